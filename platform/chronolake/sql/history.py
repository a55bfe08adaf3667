"""A versioned table's history as rows: SQL:2011's `FOR SYSTEM_TIME` reads, as in MariaDB and
SQL Server's system-versioned tables.

`rates FOR SYSTEM_TIME ALL` has one row per version of each key, the versions a temporal join
picks from (`chronolake.joins.version_history`): the table's columns plus

- `valid_from`: the version's event time, inclusive;
- `valid_to`: the next version's event time (or its delete's), exclusive; NULL while current;
- `committed_at`: the time of the Delta commit that carried the version.

`FROM a TO b`, `BETWEEN a AND b` and `CONTAINED IN (a, b)` are that history filtered by
validity, with SQL Server's meaning (`validity_condition`). `AS OF` a constant is not a
history read: it travels to a commit time (FLIP-308), and `AS OF` a column is a temporal join.

A view that projects and filters one history read is a derived table keyed by (primary key,
`valid_from`); any other query over a history is computed on read.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.dialect import canonical_sql, spark_sql
from chronolake.schema.spec import KeepRow, ViewKind
from chronolake.sql._names import relation_name
from chronolake.sql.query import parse_query, single_relation

VALID_FROM = "valid_from"
VALID_TO = "valid_to"
COMMITTED_AT = "committed_at"
HISTORY_COLUMNS = (VALID_FROM, VALID_TO, COMMITTED_AT)
COMMITTED_AT_TYPE = "TIMESTAMP_LTZ(6)"

_HISTORY_KINDS = frozenset({"ALL", "FROM", "BETWEEN", "CONTAINED IN"})


def reads_history(table: exp.Table) -> bool:
    """Whether `table` is read `FOR SYSTEM_TIME ALL` (or a range of it)."""
    version = table.args.get("version")
    return version is not None and version.text("kind").upper() in _HISTORY_KINDS


def history_reads(query: str) -> list[str]:
    """The tables a query reads `FOR SYSTEM_TIME ALL` (or a range of it)."""
    return [relation_name(t) for t in parse_query(query).find_all(exp.Table) if reads_history(t)]


def validity_condition(version: exp.Version) -> str | None:
    """The range of a history read as Spark SQL over `valid_from` and `valid_to` (None for
    `ALL`), with SQL Server's meaning: `FROM a TO b` the versions valid at some time in
    [a, b), `BETWEEN a AND b` in [a, b], `CONTAINED IN (a, b)` those whose whole validity
    lies in [a, b] (a current version never does)."""
    kind = version.text("kind").upper()
    if kind == "ALL":
        return None
    value = version.expression
    if not isinstance(value, exp.Tuple) or len(value.expressions) != 2:
        msg = f"FOR SYSTEM_TIME {kind} {canonical_sql(value)}: expected two times"
        raise DefinitionError(msg)
    low, high = (spark_sql(bound) for bound in value.expressions)
    open_or_after = f"({VALID_TO} IS NULL OR {VALID_TO} > {low})"
    if kind == "FROM":
        return f"{VALID_FROM} < {high} AND {open_or_after}"
    if kind == "BETWEEN":
        return f"{VALID_FROM} <= {high} AND {open_or_after}"
    return f"{VALID_FROM} >= {low} AND {VALID_TO} IS NOT NULL AND {VALID_TO} <= {high}"


class Versioned(BaseModel):
    """Where a versioned table's versions come from: the table whose changes carry them, its
    key and version time, and the rule of a deduplication view in between (FLIP-132)."""

    model_config = ConfigDict(frozen=True)

    key: tuple[str, ...] = Field(..., description="The primary key (a deduplication's key).")
    time: str = Field(..., description="The version time: the rowtime.")
    keep: KeepRow | None = Field(None, description="A deduplication view's rule; None else.")
    source: str = Field(..., description="The table whose changes carry the versions.")


def versioned(spec: TableSpec | ViewSpec, written: str) -> Versioned:
    """How `spec` is versioned, or why it has no history (`written` is how the query reads
    it): a table or derived table needs a primary key and a rowtime; a view must be a
    deduplication on a rowtime or a derived table with a key."""
    if isinstance(spec, ViewSpec) and spec.deduplication is not None:
        dedup = spec.deduplication
        if spec.rowtime is None:
            _refuse(spec, written, "is a deduplication on processing time, whose versions have "
                    "no event time; order it by a rowtime (ORDER BY <rowtime> DESC)")
        return Versioned(key=dedup.key, time=dedup.order_by, keep=dedup.keep,
                         source=dedup.source)
    if isinstance(spec, ViewSpec) and spec.view_kind in (None, ViewKind.PLAIN):
        _refuse(spec, written, "is a view computed on read, which keeps no versions; read its "
                "table's history, or make it a deduplication view")
    if not spec.primary_key:
        _refuse(spec, written, "has no primary key, so its rows are no versions of a key; "
                "declare PRIMARY KEY (...) NOT ENFORCED on it")
    if spec.rowtime is None:
        _refuse(spec, written, "has no rowtime, so its versions have no event time; declare "
                "WATERMARK FOR <time column> AS ... on it")
    assert spec.rowtime is not None
    taken = sorted({c.lower() for c in _columns(spec)} & set(HISTORY_COLUMNS))
    if taken:
        _refuse(spec, written, f"has a column {taken[0]!r}, a name its history gives the "
                "validity; rename the column in a view first")
    return Versioned(key=spec.primary_key, time=spec.rowtime, source=spec.name)


def _columns(spec: TableSpec | ViewSpec) -> list[str]:
    return [c.name for c in spec.columns] if isinstance(spec, TableSpec) else []


def _refuse(spec: TableSpec | ViewSpec, written: str, problem: str) -> None:
    raise DefinitionError(f"{written}: {spec.name!r} {problem}")


def written_read(table: exp.Table) -> str:
    """How a query reads a table `FOR SYSTEM_TIME`, for messages."""
    return f"{relation_name(table)} {canonical_sql(table.args['version'])}"


def history_read(query: str) -> exp.Table | None:
    """The one history read a query projects and filters (a history view), if it is that."""
    table = single_relation(query)
    if table is None or not isinstance(table.this, exp.Identifier) or not reads_history(table):
        return None
    return table


class HistoryPlan(BaseModel):
    """A history view bound for its operator: what it reads, and how its rows are made."""

    model_config = ConfigDict(frozen=True)

    source: TableSpec = Field(..., description="The table whose changes carry the versions.")
    versioned: Versioned
    condition: str | None = Field(None, description="The read's validity range, Spark SQL.")
    select: str = Field(..., description="The view's query, applied to each history row.")


def plan_history(view: ViewSpec, inputs: Mapping[str, TableSpec | ViewSpec]) -> HistoryPlan:
    """The plan of history view `view`, bound against `inputs`."""
    table = history_read(view.query)
    assert table is not None, "only a history view has this plan"
    written = written_read(table)
    spec = inputs[relation_name(table).lower()]
    how = versioned(spec, written)
    source = inputs.get(how.source.lower())
    if not isinstance(source, TableSpec):
        msg = (
            f"view {view.name!r} reads {written}, whose versions come from {how.source!r}, a "
            "view computed on read whose changes no operator can follow; deduplicate a table, "
            "a derived table, or a projection or filter of one"
        )
        raise DefinitionError(msg)
    return HistoryPlan(source=source, versioned=how,
                       condition=validity_condition(table.args["version"]), select=view.query)
