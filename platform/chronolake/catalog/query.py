"""Flink SQL over a lake's registered tables, read as bounded, answered as Spark frames.

Each name a query reads becomes a frame (a table's relation, a derived table's output, a
plain view's own query over frames) and the query's Spark SQL reads those frames through
`SparkSession.sql`'s frame arguments. Nothing is registered under the user's table names,
so a temporary view of the same name in the user's own session is never replaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from chronolake.catalog.complete_as_of import (
    AsOf,
    as_of_millis,
    explaining_retention,
    pinned_versions,
    shown,
)
from chronolake.catalog.entry import Spec
from chronolake.catalog.inputs import input_specs, source_spec
from chronolake.catalog.registry import Registry
from chronolake.catalog.relations import (
    changelog_dataframe,
    has_row_watermarks,
    relation_dataframe,
    relation_with_row_watermarks,
)
from chronolake.errors import DefinitionError, SourceError, UnknownNameError
from chronolake.joins.temporal import (
    join_query,
    latest_versions,
    matched_latest,
    matched_versions,
)
from chronolake.joins.version_history import version_history
from chronolake.joins.versions import kept_versions
from chronolake.lake import LakeBackend
from chronolake.lake.layout import table_location
from chronolake.lake.reader import latest_per_key
from chronolake.location import Location
from chronolake.schema import ChangelogMode, TableSpec, ViewSpec
from chronolake.schema.dialect import canonical_sql, spark_sql
from chronolake.schema.spec import OPERATOR_KINDS
from chronolake.sql._names import relation_name
from chronolake.sql.current_watermark import (
    ROW_WATERMARK,
    HeldWatermark,
    bind,
    held_by,
    uses_current_watermark,
)
from chronolake.sql.history import reads_history, validity_condition, versioned, written_read
from chronolake.sql.query import parse_query, referenced_tables, tables_of, temporal_joins
from chronolake.sql.temporal import TemporalJoinPlan, TimeMode, plan_temporal_join
from chronolake.sql.view_kinds import is_derived

_FRAME = "__chronolake_frame_"
"""The prefix of a frame argument's name in a query's Spark SQL text."""
_FRAME_REFERENCE = re.compile(rf"`?({_FRAME}\d+)`?")


class QuerySession:
    """Queries over the registrations of `registry`, with `spark` and the lake's `backend`.

    Example:
        >>> queries = QuerySession(spark, backend, Registry(root))
        >>> queries.sql("SELECT currency, COUNT(*) FROM orders GROUP BY currency").show()
    """

    def __init__(self, spark: SparkSession, backend: LakeBackend, registry: Registry,
                 pins: Mapping[str, int] | None = None) -> None:
        self.spark = spark
        self.backend = backend
        self.registry = registry
        self.pins = dict(pins or {})
        """The Delta version each table is read at, by name (`complete_as_of`); else latest."""

    @property
    def root(self) -> Location:
        return self.registry.root

    def sql(self, query: str, *, complete_as_of: AsOf | None = None) -> DataFrame:
        """A Flink SQL query over registered tables and views, as a Spark DataFrame.

        Inputs are read as bounded: a temporal join sees every commit of both sides and
        ends with a final watermark of +infinity, so the result is the join's final result.
        `complete_as_of` (`'2026-11-02 10:00'`, UTC, or a datetime) reads each derived table
        at the first version whose watermark reached it, and each source at the version those
        versions consumed (`chronolake.catalog.complete_as_of`).
        """
        specs = self.registry.specs()
        for name in referenced_tables(query):
            if name.lower() not in specs:
                raise UnknownNameError(
                    f"query references unknown table {name!r}; registered: "
                    f"{', '.join(sorted(specs)) or 'none'} (declare it with CREATE TABLE first)"
                )
        if complete_as_of is None:
            return self._frame_of_query(query, specs)
        as_of_ms = as_of_millis(complete_as_of)
        with explaining_retention(as_of_ms):
            pins = pinned_versions(query, specs, self, as_of_ms)
            pinned = QuerySession(self.spark, self.backend, self.registry, pins)
            return pinned._frame_of_query(query, specs)

    def changelog(self, name: str, start_version: int = 0, end_version: int | None = None
                  ) -> DataFrame:
        """A table's changes between two versions, with declared and system columns."""
        spec = source_spec(self.registry.entry(name).spec, self)
        if not isinstance(spec, TableSpec):
            raise DefinitionError(
                f"{name!r} is a view computed on read; only tables and derived tables (views "
                f"with {OPERATOR_KINDS}) have a changelog"
            )
        end = self.pins.get(name.lower()) if end_version is None else end_version
        return changelog_dataframe(self.spark, self.backend, spec, self.root, start_version, end)

    def versions(self, name: str) -> DataFrame:
        """The version events of a versioned table (a table, a derived table, or a
        deduplication view's, from its source), in arrival order."""
        spec = self.registry.entry(name).spec
        if isinstance(spec, ViewSpec) and spec.deduplication is not None:
            dedup = spec.deduplication
            return kept_versions(self.versions(dedup.source), dedup.key, dedup.order_by,
                                 dedup.keep)
        if isinstance(spec, ViewSpec) and not is_derived(spec):
            raise DefinitionError(
                f"view {name!r} is computed on read, so it has no versions; a versioned view "
                "is SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t "
                "DESC) AS rn FROM src) WHERE rn = 1"
            )
        return self.changelog(name)

    def history(self, name: str, written: str | None = None) -> DataFrame:
        """`name FOR SYSTEM_TIME ALL`: one row per version, with `valid_from`, `valid_to`
        and `committed_at` (`chronolake.sql.history`); `written` is how a query reads it."""
        spec = self.registry.entry(name).spec
        how = versioned(spec, written or f"{name} FOR SYSTEM_TIME ALL")
        return version_history(self.versions(name), keys=how.key, time=how.time)

    # -- internals -------------------------------------------------------------------------

    def _frame_of_query(self, query: str, registered: Mapping[str, Spec]) -> DataFrame:
        """`query` over one frame per name it reads (its Spark SQL names frame arguments
        where the query names tables), or composed of frames for a temporal join."""
        specs = input_specs(query, registered, self)
        if temporal_joins(query):
            return self._temporal_join(plan_temporal_join(query, specs))
        tree = parse_query(query)
        stamped: set[str] = set()  # the tables read with CURRENT_WATERMARK's value per row
        if uses_current_watermark(query):
            held = self._held_watermarks(tree, specs)
            stamped = {h.table.lower() for h in held.values() if h.per_row}
            tree = bind(tree, held, where=f"query {query!r}")
        frames: dict[str, DataFrame] = {}
        keys: dict[str, str] = {}  # a name read twice (a self-join) is one frame
        read = {name.lower() for name in tables_of(tree)}
        for table in list(tree.find_all(exp.Table)):
            name = relation_name(table).lower()
            if not isinstance(table.this, exp.Identifier) or name not in read:
                continue
            version = table.args.get("version")
            read_as = name if version is None else f"{name} {canonical_sql(version)}"
            if read_as not in keys:
                keys[read_as] = f"{_FRAME}{len(keys)}"
                frames[keys[read_as]] = (
                    self._frame(name, specs, registered, stamped=name in stamped)
                    if version is None
                    else self._system_time_frame(table, specs, stamped=name in stamped)
                )
            _read_frame(table, keys[read_as])
        text = spark_sql(tree).replace("{", "{{").replace("}", "}}")
        result = self.spark.sql(_FRAME_REFERENCE.sub(r"{\1}", text), None, **frames)
        return result.drop(ROW_WATERMARK) if stamped else result  # `SELECT *` never shows it

    def _frame(self, name: str, specs: Mapping[str, Spec], registered: Mapping[str, Spec],
               *, stamped: bool = False) -> DataFrame:
        """The rows of `name` as this query reads it: a table's (or a derived table's output)
        relation, `stamped` with `CURRENT_WATERMARK`'s value per row, or a view's query over
        frames of its own."""
        spec = specs[name]
        if isinstance(spec, ViewSpec):
            return self._frame_of_query(spec.query, registered)
        return self._relation(spec, self.pins.get(name), stamped=stamped)

    def _relation(self, spec: TableSpec, version: int | None, *, stamped: bool) -> DataFrame:
        read = relation_with_row_watermarks if stamped else relation_dataframe
        return read(self.spark, self.backend, spec, self.root, version)

    def _system_time_frame(self, table: exp.Table, specs: Mapping[str, Spec], *,
                           stamped: bool = False) -> DataFrame:
        """The rows of a table read `FOR SYSTEM_TIME`: its history, cut to the range read
        (`chronolake.sql.history`); or, `AS OF` a constant, its rows at that time (FLIP-308's
        time travel): the Delta version current then."""
        name = relation_name(table)
        written = written_read(table)
        if reads_history(table):
            history = self.history(name, written)
            condition = validity_condition(table.args["version"])
            return history if condition is None else history.where(condition)
        spec = specs[name.lower()]
        if not isinstance(spec, TableSpec):
            raise DefinitionError(
                f"{written}: {name!r} is a view computed on read, which keeps no versions to "
                "travel to; read its tables FOR SYSTEM_TIME AS OF that time instead"
            )
        at_ms = self._instant_ms(table.args["version"].expression, written)
        path = table_location(self.root, spec.options.path)
        version = self.backend.version_at(path, at_ms)
        if version is None:
            first = self.backend.commits(path, 0, 0)[0].timestamp_ms
            raise SourceError(
                f"{written}: {name!r} did not exist then; its first commit is at "
                f"{shown(first)}: ask for a later time"
            )
        self.backend.check_kept(path, version)
        return self._relation(spec, version, stamped=stamped)

    def _instant_ms(self, constant: exp.Expr, written: str) -> int:
        """A constant time expression (`TIMESTAMP '…'`, `CURRENT_TIMESTAMP - INTERVAL …`) as
        epoch milliseconds, evaluated by Spark in the session's time zone."""
        instant = F.unix_millis(F.expr(spark_sql(constant)).cast("timestamp"))
        value = self.spark.range(1).select(instant).first()  # one value: the instant
        if value is None or value[0] is None:
            raise DefinitionError(f"{written}: AS OF must be a time, not NULL")
        return int(value[0])

    def _held_watermarks(self, tree: exp.Query, specs: Mapping[str, Spec]
                         ) -> dict[str, HeldWatermark]:
        """What `CURRENT_WATERMARK` is over each table `tree` reads, by its name and alias
        (lower case): per row, the watermark in force when the row arrived, for a table with
        event time (`relation_with_row_watermarks`); NULL for one without (processing time,
        or a source read snapshot-first). A table read for its history has no rowtime here."""
        held: dict[str, HeldWatermark] = {}
        for table in tree.find_all(exp.Table):
            spec = specs.get(relation_name(table).lower())
            if not isinstance(spec, TableSpec) or reads_history(table):
                continue
            alias = table.alias_or_name
            found = held_by(spec, per_row=has_row_watermarks(spec), qualifier=alias)
            if found is not None:
                held |= {relation_name(table).lower(): found, alias.lower(): found}
        return held

    def _temporal_join(self, plan: TemporalJoinPlan) -> DataFrame:
        probe = self.changelog(plan.probe.name)
        if plan.probe.primary_key and plan.probe.options.changelog is not ChangelogMode.APPEND:
            probe = latest_per_key(probe, plan.probe.primary_key)  # the probe's final rows
        build = self.versions(plan.build.name)
        if plan.mode is TimeMode.EVENT_TIME:
            matched = matched_versions(plan, probe, build)
        else:
            matched = matched_latest(plan, probe, latest_versions(build, plan.build_keys))
        return join_query(plan, probe, matched)


def _read_frame(table: exp.Table, key: str) -> None:
    """Point `table` at the frame argument `key`, keeping the name its columns are
    qualified with."""
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
    table.set("this", exp.to_identifier(key))
    table.set("db", None)
    table.set("catalog", None)
    table.set("version", None)
