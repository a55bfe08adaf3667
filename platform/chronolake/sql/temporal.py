"""Planning a query's `FOR SYSTEM_TIME AS OF` join: validation, keys, and the Spark rewrite.

chronolake computes the version each probe row joins with its own operator
(`chronolake.joins`), then runs the user's query unchanged but for the
temporal join, which becomes a regular join of the emitted probe rows with
their matched build version on the probe row's identity:

    FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON c
 -> FROM <probe rows> AS o LEFT JOIN <matched versions> AS r
         ON o._commit_version = r.__tj_probe_version AND o._position = r.__tj_probe_position
            AND (c)

A probe row has at most one matched version, so INNER and LEFT keep their
temporal meaning, including LEFT rows whose version fails a further ON
condition; projections, WHERE and functions run in Spark SQL as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND, RowKind
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.dialect import spark_sql
from chronolake.schema.join_kind import JoinKind
from chronolake.sql.query import TemporalJoinRef, parse_query, temporal_joins

PROBE_VERSION = "__tj_probe_version"
PROBE_POSITION = "__tj_probe_position"
CHANGE_COLUMNS = (ROW_KIND, COMMIT_VERSION, POSITION)
"""What a joined row keeps of its probe row in a run: its kind and arrival order."""
RETRACTIONS = (RowKind.UPDATE_BEFORE, RowKind.DELETE)


class TimeMode(StrEnum):
    """Which time the join follows: the probe's rowtime or its processing time."""

    EVENT_TIME = "event-time"
    PROCESSING_TIME = "processing-time"


class TemporalJoinPlan(BaseModel):
    """A validated temporal join: sides, mode, equi-keys and time columns."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    query: str = Field(..., description="The whole query, canonical Flink SQL.")
    ref: TemporalJoinRef
    probe: TableSpec
    build: TableSpec | ViewSpec
    mode: TimeMode
    probe_keys: tuple[str, ...] = Field(..., description="Probe columns equal to build_keys.")
    build_keys: tuple[str, ...] = Field(..., description="Build columns (cover its primary key).")
    probe_time: str = Field(..., description="The probe's rowtime or proctime column.")

    @property
    def kind(self) -> JoinKind:
        return self.ref.kind

    @property
    def build_time(self) -> str | None:
        return self.build.rowtime


def plan_temporal_join(query: str, specs: Mapping[str, TableSpec | ViewSpec]) -> TemporalJoinPlan:
    """Validate the query's one temporal join against the catalog, with Flink's rules."""
    joins = temporal_joins(query)
    if len(joins) != 1:
        raise DefinitionError(
            f"expected exactly one FOR SYSTEM_TIME AS OF join, found {len(joins)}; "
            "split the query into views with one temporal join each"
        )
    ref = joins[0]
    probe = specs.get((ref.probe_table or "").lower())
    if not isinstance(probe, TableSpec):
        raise DefinitionError(
            f"the probe side of FOR SYSTEM_TIME AS OF {ref.time_attribute} must be a table "
            f"declared with CREATE TABLE, got {ref.probe_table or ref.probe_alias!r}"
        )
    build = specs[ref.build_table.lower()]
    mode, probe_time = _time_mode(ref, probe)
    if mode is TimeMode.EVENT_TIME:
        _require_versioned(ref, build)
    _require_versions(ref, build)
    probe_keys, build_keys = _equi_keys(ref, build)
    return TemporalJoinPlan(
        query=query, ref=ref, probe=probe, build=build, mode=mode,
        probe_keys=probe_keys, build_keys=build_keys, probe_time=probe_time,
    )


def rewrite_as_regular_join(
    plan: TemporalJoinPlan, *, probe_view: str, matched_view: str, changelog: bool = False
) -> str:
    """Spark SQL of the query with the temporal join replaced as the module docstring says.

    `changelog` also selects the probe row's kind and arrival order (`_row_kind`,
    `_commit_version`, `_position`): the joined row takes its probe row's kind, as Flink's
    temporal join operators emit it. An inner join then keeps a retraction (`-U`, `-D`)
    that matches no version too, null-padded: it retracts what an earlier run emitted for
    its probe row, which a version matched then (the table's state is keyed by the probe's
    key, so the final state is the inner join of the probe's final rows).
    """
    tree = parse_query(plan.query)
    if changelog and isinstance(tree, exp.Select):
        tree.select(
            *(exp.column(name, plan.ref.probe_alias).as_(name) for name in CHANGE_COLUMNS),
            copy=False,
        )
    for table in list(tree.find_all(exp.Table)):
        alias = table.alias_or_name
        if table.args.get("version") is not None:
            join = table.parent
            assert isinstance(join, exp.Join), "temporal_joins read it as a join's"
            table.replace(exp.to_table(matched_view).as_(alias))
            identity = exp.and_(
                exp.column(COMMIT_VERSION, plan.ref.probe_alias).eq(
                    exp.column(PROBE_VERSION, alias)
                ),
                exp.column(POSITION, plan.ref.probe_alias).eq(exp.column(PROBE_POSITION, alias)),
            )
            join.set("on", exp.and_(identity, exp.paren(join.args["on"])))
            if changelog and plan.kind is JoinKind.INNER and isinstance(tree, exp.Select):
                join.set("side", "LEFT")
                matched = exp.column(PROBE_VERSION, alias).is_(exp.null()).not_()
                retraction = exp.column(ROW_KIND, plan.ref.probe_alias).isin(
                    *(exp.Literal.string(kind.value) for kind in RETRACTIONS)
                )
                tree.where(exp.or_(matched, retraction), copy=False)
        elif alias == plan.ref.probe_alias:
            table.replace(exp.to_table(probe_view).as_(alias))
    return spark_sql(tree)


def _time_mode(ref: TemporalJoinRef, probe: TableSpec) -> tuple[TimeMode, str]:
    column = ref.time_attribute.split(".")[-1]
    if probe.rowtime and column.lower() == probe.rowtime.lower():
        return TimeMode.EVENT_TIME, probe.rowtime
    if probe.proctime and column.lower() == probe.proctime.lower():
        return TimeMode.PROCESSING_TIME, probe.proctime
    attributes = [a for a in (probe.rowtime, probe.proctime) if a]
    raise DefinitionError(
        f"FOR SYSTEM_TIME AS OF {ref.time_attribute}: {column!r} is not a time attribute of "
        f"{probe.name!r}; temporal joins follow the probe side's rowtime (WATERMARK FOR ...) or a "
        f"PROCTIME() column: use {' or '.join(attributes) if attributes else 'one of them'}"
    )


def _require_versioned(ref: TemporalJoinRef, build: TableSpec | ViewSpec) -> None:
    if not build.primary_key and (isinstance(build, ViewSpec) or build.derived):
        raise DefinitionError(
            f"Temporal Table Join requires primary key in versioned table, but view "
            f"{build.name!r} has none: its output is a changelog without a key (a retract "
            "stream, when its own input has no primary key, or its SELECT drops it), whose "
            "rows are no versions of a key; declare PRIMARY KEY (...) NOT ENFORCED on the "
            f"table {build.name!r} reads and keep that key in its SELECT, or join FOR "
            "SYSTEM_TIME AS OF a PROCTIME() column"
        )
    if not build.primary_key:
        raise DefinitionError(
            f"Temporal Table Join requires primary key in versioned table, but no primary key "
            f"can be found for {build.name!r}: declare PRIMARY KEY (...) NOT ENFORCED on it (or "
            "use a deduplication view), or join FOR SYSTEM_TIME AS OF a PROCTIME() column"
        )
    if build.rowtime is None:
        raise DefinitionError(
            f"Event-Time Temporal Table Join requires both primary key and row time attribute in "
            f"versioned table, but no row time attribute can be found for {build.name!r}: declare "
            "WATERMARK FOR <time column> AS ... on it, or join FOR SYSTEM_TIME AS OF a PROCTIME() "
            "column"
        )


def _require_versions(ref: TemporalJoinRef, build: TableSpec | ViewSpec) -> None:
    """The build side's versions come from a changelog: a table's, or a deduplication view's
    source; any other view only has a current state, which a temporal join cannot follow."""
    if isinstance(build, ViewSpec) and build.deduplication is None:
        raise DefinitionError(
            f"FOR SYSTEM_TIME AS OF {ref.time_attribute}: the build side {build.name!r} is a view "
            "but not a deduplication view, so it has no versions to join; join its table "
            "directly, or a view SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k "
            "ORDER BY t DESC) AS rn FROM src) WHERE rn = 1"
        )


def _equi_keys(
    ref: TemporalJoinRef, build: TableSpec | ViewSpec
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    condition = parse_query(f"SELECT 1 FROM t WHERE {ref.condition}").args["where"].this
    pairs: list[tuple[str, str]] = []
    for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        if not isinstance(conjunct, exp.EQ):
            continue
        left, right = conjunct.this, conjunct.expression
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        if left.table == ref.build_alias and right.table != ref.build_alias:
            left, right = right, left
        if right.table == ref.build_alias and left.table in (ref.probe_alias, ""):
            pairs.append((left.name, right.name))
    build_keys = [b.lower() for _, b in pairs]
    missing = [k for k in build.primary_key if k.lower() not in build_keys]
    if build.primary_key and missing:
        wanted = " AND ".join(f"{ref.probe_alias}.<col> = {ref.build_alias}.{k}" for k in missing)
        raise DefinitionError(
            f"Temporal table's primary key [{', '.join(build.primary_key)}] must be included in "
            f"the equivalence condition of temporal join, but current temporal join condition is "
            f"[{ref.condition}]: add {wanted}"
        )
    if not pairs:
        raise DefinitionError(
            f"FOR SYSTEM_TIME AS OF {ref.time_attribute}: the ON condition [{ref.condition}] has "
            f"no equality between {ref.probe_alias} and {ref.build_alias}: add one"
        )
    if build.primary_key:  # join on the key only; other equalities stay in the ON condition
        keyed = {b.lower(): p for p, b in pairs}
        return tuple(keyed[k.lower()] for k in build.primary_key), tuple(build.primary_key)
    return tuple(p for p, _ in pairs), tuple(b for _, b in pairs)
