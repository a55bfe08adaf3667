"""Watermark assignment on a changelog DataFrame: FLIP-66's `WATERMARK FOR ... AS ...` on Spark.

`WatermarkAssigner` evaluates the strategy expression on every row, per split,
in arrival order, and stamps each row with the source watermark in force when
it arrives (`_watermark`, epoch ms) and whether it is late (`_late`). Sources
never drop rows: operators decide what a late row means for them (see
`chronolake.windows`). A run starts from a stored `WatermarkState` and returns
the new one; a run never lowers a watermark.

Splits: one per value of the `'scan.split-by'` column, one per Delta partition
(combination of partition values) with `'scan.split-by' = '$partitions'`, else
one for the whole source. With `'scan.idle-timeout'` a split that has had no
rows for longer than the timeout is idle and does not hold the source back
(the rules are in `_progress`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pyspark.errors import AnalysisException, ParseException, PythonException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType

from chronolake.errors import DefinitionError
from chronolake.lake.changelog import ARRIVAL_ORDER, COMMIT_TIMESTAMP, COMMIT_VERSION
from chronolake.schema import ComputedColumn, EmitStrategy, TableSpec
from chronolake.schema.dialect import (
    is_system_rowtime_call,
    is_system_watermark_call,
    parse_expression,
    spark_sql,
)
from chronolake.schema.options import SPLIT_BY_PARTITIONS
from chronolake.watermarks._failures import raise_strategy_failure
from chronolake.watermarks.millis import (
    check_watermark_type,
    is_timestamp,
    millis_timestamp,
    timestamp_millis,
    watermark_millis,
)
from chronolake.watermarks.progress import (
    GENERATED,
    IN_FORCE,
    LATE_BELOW,
    SPLIT,
    TICK,
    Progress,
    SplitTick,
)
from chronolake.watermarks.watermark import LONG_MIN, Watermark, WatermarkStatus

WATERMARK_COLUMN = "_watermark"
"""Source watermark in force when the row arrived (epoch ms; Long.MIN_VALUE before any)."""

LATE_COLUMN = "_late"
"""True when the row's rowtime is at or below `_watermark` (false for a null rowtime)."""

_INPUT = "__wm_input"
_FACTS = (SPLIT, TICK, GENERATED, COMMIT_TIMESTAMP, "rows")
"""`collect_maxima`'s columns, in `SplitTick`'s field order."""

SINGLE_SPLIT = "<all>"
"""The split key of a source without a split column."""

NULL_SPLIT = "<null>"
"""The split key of rows whose split column is null."""


class WatermarkState(BaseModel):
    """What a run starts from and hands over: every split's watermark and the source's.

    Values are epoch ms; Long.MIN_VALUE means "nothing emitted yet". A split
    listed here and not idle holds the source back from the start of the next
    run until it emits. With an idle timeout, `idle` and `active_at` say which
    splits are idle and when each last had rows, so that the next run goes on
    from there. Small enough to persist as JSON.
    """

    model_config = ConfigDict(frozen=True)

    splits: dict[str, int] = Field(default_factory=dict, description="Watermark per split key.")
    watermark: int = Field(LONG_MIN, description="The source watermark last emitted.")
    idle: tuple[str, ...] = Field((), description="Splits idle after the run, sorted.")
    active_at: dict[str, int] = Field(
        default_factory=dict,
        description="Per split, when it last had rows (epoch ms of commit time, or of the run's "
        "clock); kept only with an idle timeout.",
    )

    def to_watermark(self) -> Watermark:
        """The source watermark as a `Watermark` value."""
        return Watermark(self.watermark)

    @property
    def status(self) -> WatermarkStatus:
        """IDLE when the source has splits and every one is idle, else ACTIVE."""
        if self.splits and set(self.idle) >= self.splits.keys():
            return WatermarkStatus.IDLE
        return WatermarkStatus.ACTIVE


class WatermarkAssigner(BaseModel):
    """Generates watermarks per split from a strategy expression and stamps every row.

    Semantics: for each split, the strategy is evaluated on every row in
    arrival order (`_commit_version`, `_position`); a generated value is
    emitted only if it is non-null and larger than the split's last one. The
    strategy is Flink SQL as in the DDL (e.g. `order_time - INTERVAL '5'
    SECOND`), translated by `chronolake.schema.dialect` and evaluated by Spark, so
    functions registered with `spark.udf.register` work; it returns a nullable
    TIMESTAMP, TIMESTAMP_LTZ or BIGINT (epoch ms). The source
    watermark is the minimum over the active splits and never decreases. With
    `emit_strategy` on-periodic the splits emit at the end of every tick (a
    tick is one value of the `tick` column, by default one source commit);
    with on-event right after each row that raises them, so a row is never
    late against its own watermark. A row is late when its rowtime is at or
    below the watermark in force on its arrival.

    `SYSTEM_WATERMARK()` keeps the watermark the Delta source provides: the
    commit timestamp of each commit read, emitted after the commit, for the
    whole table (splits do not matter: every split has seen the commit).
    `SYSTEM_ROWTIME()` as the rowtime is the commit timestamp.

    Example:
        >>> assigner = WatermarkAssigner(rowtime="order_time",
        ...                              strategy="order_time - INTERVAL '5' SECOND")
        >>> assigned = assigner.assign(changelog)            # doctest: +SKIP
        >>> assigned.rows, assigned.state()                  # doctest: +SKIP
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rowtime: str = Field(..., description="Rowtime column path, e.g. 'event.log_ts'.")
    strategy: str = Field(..., description="Watermark strategy, a Flink SQL expression.")
    emit_strategy: EmitStrategy = Field(
        EmitStrategy.ON_PERIODIC, description="on-periodic (per tick) or on-event (per row)."
    )
    split_by: str | None = Field(None, description="Column whose values split the source.")
    split_by_partitions: tuple[str, ...] = Field(
        (),
        description="Delta partition columns: one split per combination of their values, "
        "keyed `col=value/...` (values URL-encoded, null as `<null>`).",
    )
    idle_timeout_ms: int | None = Field(
        None, gt=0, description="A split without rows for longer than this is idle."
    )
    tick: str = Field(
        COMMIT_VERSION,
        description="Column numbering the ticks, non-decreasing in arrival order.",
    )
    key: tuple[str, ...] = Field((), description="Columns that name a row in error messages.")

    @model_validator(mode="after")
    def _one_way_to_split(self) -> WatermarkAssigner:
        if self.split_by == SPLIT_BY_PARTITIONS or (self.split_by and self.split_by_partitions):
            msg = (
                f"split_by={self.split_by!r} with split_by_partitions="
                f"{self.split_by_partitions!r}: a source splits one way; to split by Delta "
                "partitions pass their columns as split_by_partitions and no split_by "
                "(WatermarkAssigner.for_table does this for '$partitions')"
            )
            raise ValueError(msg)
        return self

    @classmethod
    def for_table(
        cls, spec: TableSpec, *, partition_columns: Sequence[str] | None = None
    ) -> WatermarkAssigner:
        """The assigner a table's DDL declares: its WATERMARK, splits, idle timeout and emit
        strategy.

        A rowtime computed as `SYSTEM_ROWTIME()` is the commit timestamp; other computed
        rowtimes are read from the column the source computes. `partition_columns` are the
        Delta table's (from its log, e.g. `DeltaTable(path).metadata().partition_columns`):
        needed when the table declares `'scan.split-by' = '$partitions'`, ignored otherwise.
        """
        if spec.watermark is None:
            msg = (
                f"table {spec.name!r} declares no WATERMARK, so it has no event-time progress; "
                "add `WATERMARK FOR <rowtime> AS <expression>` to its DDL"
            )
            raise DefinitionError(msg)
        column = spec.column(spec.watermark.rowtime)
        system = isinstance(column, ComputedColumn) and column.is_system_rowtime
        split_by = spec.options.split_by
        by_partitions: tuple[str, ...] = ()
        if split_by == SPLIT_BY_PARTITIONS:
            split_by, by_partitions = None, _partitions(spec, partition_columns)
        return cls(
            rowtime="SYSTEM_ROWTIME()" if system else spec.watermark.rowtime,
            strategy=spec.watermark.expression,
            emit_strategy=spec.options.emit_strategy,
            split_by=split_by,
            split_by_partitions=by_partitions,
            idle_timeout_ms=spec.options.idle_timeout_ms,
            key=spec.primary_key,
        )

    @property
    def is_system_watermark(self) -> bool:
        return is_system_watermark_call(self.strategy)

    def assign(
        self,
        changelog: DataFrame,
        *,
        state: WatermarkState | None = None,
        now_ms: int | None = None,
        maxima: Sequence[SplitTick] | None = None,
    ) -> AssignedChangelog:
        """Stamp `changelog` with `_watermark` and `_late`, starting from `state`.

        Runs one Spark job now: the per-(split, tick) maxima of the generated
        watermark (and of the commit timestamp), from which the per-tick watermarks
        and the final state follow; a caller that knows them already (the run's
        ticks, derived from an earlier assignment's) passes `maxima` and no job runs.
        `now_ms` is the run's clock: with an idle timeout, the splits without rows
        for longer than the timeout at that time are idle after the run (they do
        not hold back the returned state's watermark). A strategy function that
        raises makes this call fail with a `RunError` naming the row, before
        anything is written.
        """
        start = state or WatermarkState()
        base, generated_type, rowtime_type = self.annotate(changelog)
        collected = tuple(maxima) if maxima is not None else self._maxima(base, generated_type)
        progress = Progress.of(
            collected,
            start_splits=start.splits,
            start_watermark=start.watermark,
            start_idle=start.idle,
            start_active_at=start.active_at,
            idle_timeout_ms=self.idle_timeout_ms,
            now_ms=now_ms,
        )
        rowtime = self.rowtime_column()
        if self.stamps_in_arrival_order:
            generated_ms = watermark_millis(F.col(GENERATED), generated_type)
            stamped = progress.on_event(
                base.withColumn(GENERATED, generated_ms), order=ARRIVAL_ORDER
            )
            late = timestamp_millis(rowtime, rowtime_type) <= F.col(IN_FORCE)
        else:
            # Compared as timestamps, not per-row millis: the threshold is per tick.
            stamped = progress.periodic(
                base, as_rowtime=lambda millis: millis_timestamp(millis, rowtime_type)
            )
            late = rowtime < F.col(LATE_BELOW)
        rows = stamped.select(
            *changelog.columns,
            F.col(IN_FORCE).alias(WATERMARK_COLUMN),
            F.coalesce(late, F.lit(False)).alias(LATE_COLUMN),
        )
        return AssignedChangelog(
            assigner=self, rows=rows, start=start, progress=progress, maxima=collected
        )

    @property
    def stamps_in_arrival_order(self) -> bool:
        """Whether `assign` stamps each row with the watermark its split had reached when the
        row arrived (a window over the rows in arrival order, costly to compute again) rather
        than with its tick's (a lookup)."""
        return self.emit_strategy is EmitStrategy.ON_EVENT and not self.is_system_watermark

    def fact_rows(self, changelog: DataFrame) -> DataFrame:
        """Per row of `changelog`: its split, tick, generated watermark (epoch ms) and commit
        timestamp; `collect_maxima` aggregates them (lazy; checks what `annotate` checks)."""
        base, generated_type, _ = self.annotate(changelog)
        return _fact_rows(base, generated_type)

    def _maxima(self, base: DataFrame, generated_type: DataType) -> tuple[SplitTick, ...]:
        """The per-(split, tick) facts of the annotated rows, in one Spark job."""
        try:
            return collect_maxima([_fact_rows(base, generated_type)])[0]
        except PythonException as error:
            raise_strategy_failure(base, error, strategy=self.strategy, key=self.key)

    def rowtime_column(self) -> Column:
        """The rowtime attribute as a column (the commit timestamp for SYSTEM_ROWTIME())."""
        if is_system_rowtime_call(self.rowtime):
            return F.col(COMMIT_TIMESTAMP)
        return F.col(self.rowtime)

    def annotate(self, changelog: DataFrame) -> tuple[DataFrame, DataType, DataType]:
        """The changelog plus split key, tick and generated value (lazy), with the types of
        the generated value and of the rowtime; checks everything that can be checked."""
        missing = [c for c in (*ARRIVAL_ORDER, COMMIT_TIMESTAMP) if c not in changelog.columns]
        if missing:
            msg = (
                f"watermark assignment needs a changelog DataFrame with the system columns "
                f"{', '.join(missing)}; read the table through a chronolake lake backend "
                "(see chronolake.lake.changelog)"
            )
            raise DefinitionError(msg)
        # Flink SQL, as the spec holds it; syntax errors name the strategy.
        strategy_node = parse_expression(
            self.strategy, what=f"watermark strategy of WATERMARK FOR {self.rowtime}"
        )
        if self.is_system_watermark:
            generated = F.col(COMMIT_TIMESTAMP)
            split, tick = F.lit(SINGLE_SPLIT), F.col(COMMIT_VERSION)
        else:
            generated = self._parse(spark_sql(strategy_node), what="watermark strategy")
            split = self._split_column(changelog)
            tick = F.col(self._known(changelog, self.tick, what="tick column")).cast(LongType())
        rowtime_type, generated_type = self._types_of(changelog, generated)
        check_watermark_type(generated_type, what=f"watermark strategy {self.strategy!r}")
        base = changelog.select(
            "*", split.alias(SPLIT), tick.alias(TICK), generated.alias(GENERATED)
        )
        return base, generated_type, rowtime_type

    def _split_column(self, changelog: DataFrame) -> Column:
        if self.split_by_partitions:
            # `region=eu/day=2024-01-01`: the Hive-style path of the Delta partition.
            return F.concat_ws("/", *(
                F.concat(F.lit(f"{name}="), F.coalesce(
                    F.url_encode(F.col(self._known(changelog, name, what="partition column"))
                                 .cast(StringType())),
                    F.lit(NULL_SPLIT),
                ))
                for name in self.split_by_partitions
            ))
        if self.split_by is None:
            return F.lit(SINGLE_SPLIT)
        column = F.col(self._known(changelog, self.split_by, what="split column"))
        return F.coalesce(column.cast(StringType()), F.lit(NULL_SPLIT))

    @staticmethod
    def _known(changelog: DataFrame, name: str, *, what: str) -> str:
        if name not in changelog.columns:
            msg = (
                f"{what} {name!r} is not a column of the changelog; "
                f"use one of: {', '.join(changelog.columns)}"
            )
            raise DefinitionError(msg)
        return name

    @staticmethod
    def _parse(expression: str, *, what: str) -> Column:
        try:
            return F.expr(expression)
        except ParseException as error:
            msg = f"{what} {expression!r} is not valid Spark SQL: {error.getMessage()}"
            raise DefinitionError(msg) from None

    def _types_of(self, changelog: DataFrame, generated: Column) -> tuple[DataType, DataType]:
        """The types of the rowtime and of the `generated` watermark over the changelog, from
        one analysis (a round trip over Spark Connect); when that fails, each is resolved on
        its own, the rowtime first, so that the error names the one at fault."""
        try:
            fields = changelog.select(self.rowtime_column(), generated).schema.fields
        except AnalysisException:
            fields = None
        rowtime_type = fields[0].dataType if fields else self._type_of(
            changelog, self.rowtime_column(), what="rowtime"
        )
        if not is_timestamp(rowtime_type):
            msg = (
                f"rowtime {self.rowtime!r} is {rowtime_type.simpleString().upper()}; the rowtime "
                "must be TIMESTAMP(3) or TIMESTAMP_LTZ(3); derive one in a computed column, e.g. "
                f"`rt AS TO_TIMESTAMP({self.rowtime})`, and declare the watermark on it"
            )
            raise DefinitionError(msg)
        if fields:
            return rowtime_type, fields[1].dataType
        return rowtime_type, self._type_of(changelog, generated, what="watermark strategy")

    def _type_of(self, changelog: DataFrame, column: Column, *, what: str) -> DataType:
        """Resolve `column` against the changelog's schema (analysis only, no Spark job)."""
        try:
            return changelog.select(column).schema[0].dataType
        except AnalysisException as error:
            msg = (
                f"{what} of WATERMARK FOR {self.rowtime} AS {self.strategy} does not resolve "
                f"against columns {', '.join(changelog.columns)}: {error.getMessage()}; "
                "fix the column names, or register the function with spark.udf.register"
            )
            raise DefinitionError(msg) from None


@dataclass(frozen=True)
class AssignedChangelog:
    """A changelog stamped with watermarks, and the state to hand to the next run.

    `rows` holds the changelog's columns plus `_watermark` and `_late`; it is
    lazy. `state()` is the watermarks after the run's last tick.
    """

    assigner: WatermarkAssigner
    rows: DataFrame
    start: WatermarkState
    progress: Progress
    maxima: tuple[SplitTick, ...] = ()
    """The per-(split, tick) facts the watermarks were computed from."""

    def state(self) -> WatermarkState:
        """The watermarks after the last tick of this run (never below `start`), with the
        idle splits (after the run's clock, if `assign` was given one)."""
        return WatermarkState(
            splits=dict(self.progress.splits),
            watermark=self.progress.watermark,
            idle=tuple(sorted(self.progress.idle)),
            active_at=dict(self.progress.active_at),
        )

    def counts(self) -> Mapping[str, int]:
        """Rows, late rows and null-rowtime rows of this run (one aggregate job)."""
        rowtime = self.assigner.rowtime_column()
        row = self.rows.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_if(F.col(LATE_COLUMN)).alias("late_rows"),
            F.count_if(rowtime.isNull()).alias("null_rowtime_rows"),
        ).first()
        assert row is not None, "a global aggregate has one row"
        return {name: int(row[name]) for name in ("rows", "late_rows", "null_rowtime_rows")}


def _partitions(spec: TableSpec, partition_columns: Sequence[str] | None) -> tuple[str, ...]:
    """The partition columns a `'$partitions'` split needs, checked against the spec."""
    if partition_columns is None:
        msg = (
            f"table {spec.name!r} declares 'scan.split-by' = '{SPLIT_BY_PARTITIONS}', so its "
            "watermark assigner needs the Delta table's partition columns; pass "
            "WatermarkAssigner.for_table(spec, partition_columns=...) from the Delta log"
        )
        raise DefinitionError(msg)
    if not partition_columns:
        msg = (
            f"table {spec.name!r} declares 'scan.split-by' = '{SPLIT_BY_PARTITIONS}' but its "
            "Delta table is not partitioned; split by a column ('scan.split-by' = '<column>') "
            "or drop the option for one split"
        )
        raise DefinitionError(msg)
    return tuple(partition_columns)


def collect_maxima(fact_rows: Sequence[DataFrame]) -> list[tuple[SplitTick, ...]]:
    """The per-(split, tick) facts of each of `fact_rows` (`WatermarkAssigner.fact_rows`),
    all in one Spark job: a run's inputs share it instead of costing a job each."""
    tagged = [rows.withColumn(_INPUT, F.lit(i)) for i, rows in enumerate(fact_rows)]
    maxima = reduce(DataFrame.unionByName, tagged).groupBy(_INPUT, SPLIT, TICK).agg(
        F.max(GENERATED).alias(GENERATED),
        F.unix_millis(F.max(COMMIT_TIMESTAMP)).alias(COMMIT_TIMESTAMP),
        F.count(F.lit(1)).alias("rows"),
    )
    found: list[list[SplitTick]] = [[] for _ in fact_rows]
    # One row per (input, split, tick) read back: metadata-sized, like the Delta log.
    for row in maxima.collect():
        found[row[_INPUT]].append(SplitTick(*(row[c] for c in _FACTS)))
    return [tuple(facts) for facts in found]


def _fact_rows(base: DataFrame, generated_type: DataType) -> DataFrame:
    generated = watermark_millis(F.col(GENERATED), generated_type).alias(GENERATED)
    return base.select(SPLIT, TICK, generated, COMMIT_TIMESTAMP)
