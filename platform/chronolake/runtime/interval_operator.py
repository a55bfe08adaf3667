"""The event-time interval join as a run operator, as Flink's `RowTimeIntervalJoin` runs it.

A view `... FROM a [LEFT|RIGHT|FULL] JOIN b ON a.k = b.k AND a.t BETWEEN b.t + lower AND
b.t + upper` (`chronolake.sql.interval`) keeps, per input, the rows whose interval the
watermark has not passed: a left row at `t` can meet right rows up to `t - lower`, a right
row left rows up to `t + upper` (its interval's end). A run:

- joins its new rows with the other input's state and with each other (new left × (state
  right + new right), state left × new right): each pair is emitted once, in the run that
  sees both rows, whatever the order of their runs;
- emits an outer row that has no live match, null-padded, once the watermark (both inputs',
  the run's output watermark) has passed its interval's end, exactly once;
- keeps the rows whose interval is still open (roles `left` and `right`; an outer side's
  rows with `__ij_matches`, how many live rows each has met), so state stays bounded on a
  long stream.

A row that arrives when the run's starting watermark is already at or past its interval's
end is not kept, as Flink does not cache it: it joins what the other input still holds
(state and this run's rows, but not another such row), and an outer one without a match is
padded at once; it is counted (`closed_on_arrival_rows`), not sent to the side table. A row
whose rowtime is null goes to the late-rows side table.

The output is insert-only when both inputs are. A join may read updating inputs (a
retract stream, as Flink's retract semantics extend to it): a row's kind travels to the
pairs it makes, a pair's sign the product of its rows' (`__ij_sign`), so a -U/-D of a row
emits a -D of each pair it makes with the other input's rows within the bounds, the pairs
its +I/+U made, and a +U acts as an insertion. A retraction takes one row equal to it out
of its input's state, so later rows of the other input no longer meet it. The output is a
multiset without a key (`chronolake.lake.multisets`). A retraction arriving after its
interval's end meets only what the other input still holds: pairs with rows already out
of state stay, as a late row's pairs are missed.

An outer row's live matches are the other input's rows it met, each counted by its sign,
so a retracted match uncounts itself: a row whose matches were all retracted while its
interval is open is padded when it closes. A row retracted while in state leaves it
unpadded (its pairs retracted as above); a retraction that finds its row out of state and
meets no row retracts the row's padded row (a -D the output drops if the row had matches
instead). A row whose interval closed with matches is out of state, so retracting those
matches later retracts no pair and pads nothing (Flink's regular outer join would pad it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.errors import DefinitionError
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND, SYSTEM_COLUMNS, RowKind
from chronolake.lake.multisets import values_hash
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import (
    Operator,
    RunContext,
    Step,
    Where,
    count_figures,
    without_annotations,
)
from chronolake.runtime.reuse import reused
from chronolake.schema import TableSpec, ViewSpec
from chronolake.spark.frames import query_over, table_name
from chronolake.sql.interval import (
    INTERNAL_PREFIX,
    KEEP,
    LEFT_ID,
    RIGHT_ID,
    ROW_ID,
    ROW_MS,
    SIGN,
    IntervalJoinPlan,
    joined_sql,
    parse_condition,
)
from chronolake.sql.view_kinds import is_updating
from chronolake.watermarks.assigner import LATE_COLUMN
from chronolake.watermarks.late import LateReason, side_table_rows
from chronolake.watermarks.millis import is_timestamp, timestamp_millis
from chronolake.watermarks.watermark import LONG_MIN, Watermark

LEFT_ROLE, RIGHT_ROLE = "left", "right"
"""The state tables of each input's rows whose interval is open."""
MATCHES = "__ij_matches"
"""How many live rows an outer side's row has joined so far: the other input's rows it met,
less those retracted since (stored in its state)."""
_MATCHED_BEFORE = "__ij_matched"
"""The flag state written before `__ij_matches` holds instead (one match or none)."""

_NEW, _CLOSED, _END, _HIT = "__ij_new", "__ij_closed", "__ij_end", "__ij_hit"
_BUCKET = "__ij_bucket"
_VALUES, _NTH, _RETRACTED = "__ij_values", "__ij_nth", "__ij_retracted"
_TAKES_BACK = "__ij_takes_back"
_RETRACTIONS = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)
_SIDE = "_late_side"


@dataclass(frozen=True)
class _Side:
    """One input's rows in a run: state and new rows, marked; and its null-rowtime rows."""

    rows: DataFrame
    """State rows then new rows: stored columns, `__ij_id`, `__ij_ms`, `__ij_end` (its
    interval's end, ms), `__ij_new`, `__ij_closed` (arrived at or after that end),
    `__ij_matches` and `__ij_sign`."""
    stored: list[str]
    nulls: DataFrame


class IntervalJoinOperator(Operator):
    """An interval join view, run incrementally into an insert-only table (or a multiset,
    over updating inputs).

    Example:
        >>> catalog.execute('''CREATE VIEW paid AS SELECT o.id, p.amount
        ...     FROM orders AS o JOIN payments AS p ON o.id = p.order_id
        ...     AND p.pay_time BETWEEN o.order_time AND o.order_time + INTERVAL '1' HOUR''')
        >>> DerivedTable(catalog, "paid").run()      # doctest: +SKIP
    """

    def __init__(self, catalog: Catalog, view: ViewSpec, plan: IntervalJoinPlan) -> None:
        self.plan = plan
        # Flink's RowTimeIntervalJoin.getMaxOutputDelay: a pair can be as old as the widest
        # side of the interval behind the watermark that released it.
        self.output_delay_ms = max(-self.plan.lower_ms, self.plan.upper_ms, 0)
        self.left = _input(self.plan.left, view.name)
        self.right = _input(self.plan.right, view.name)
        self.inputs = (self.left,) if self.left.name == self.right.name else (
            self.left, self.right)
        self.event_time = True
        self.updating = view.updating
        self.retracting = {LEFT_ROLE: is_updating(self.left), RIGHT_ROLE: is_updating(self.right)}
        """Which inputs hold retractions (an updating view's others are insert-only)."""

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        plan = self.plan
        started = context.checkpoint.watermark
        started = LONG_MIN if started is None else started
        ending = LONG_MIN if watermark_ms is None else watermark_ms
        left = self._side(context, reads[self.left.name], LEFT_ROLE, plan.left_time,
                          end=-plan.lower_ms, started=started, outer=plan.kind.pads_left)
        right = self._side(context, reads[self.right.name], RIGHT_ROLE, plan.right_time,
                           end=plan.upper_ms, started=started, outer=plan.kind.pads_right)
        # each pair once: a new row meets state and new rows; two closed rows never meet
        la, ra = plan.left_alias, plan.right_alias
        once = f"({la}.{_NEW} OR {ra}.{_NEW}) AND NOT ({la}.{_CLOSED} AND {ra}.{_CLOSED})"
        same_bucket = f"{la}.{_BUCKET} = {ra}.{_BUCKET} AND {once}"
        left_buckets, right_buckets = self._buckets(left.rows, right.rows)
        matched = self._query(left_buckets, right_buckets, "INNER", same_bucket)
        outer = plan.kind.pads_left or plan.kind.pads_right
        if outer:  # read by the output, by the outer rows' matches and by a figure
            matched = reused(matched)
        sides = {
            LEFT_ROLE: _settle(left, matched, LEFT_ID, ending=ending, outer=plan.kind.pads_left,
                               retracting=self.retracting[LEFT_ROLE]),
            RIGHT_ROLE: _settle(right, matched, RIGHT_ID, ending=ending,
                                outer=plan.kind.pads_right, retracting=self.retracting[RIGHT_ROLE]),
        }
        parts = [matched]
        if (padded := sides[LEFT_ROLE].padded) is not None:
            parts.append(self._query(padded, right.rows.limit(0), "LEFT"))
        if (padded := sides[RIGHT_ROLE].padded) is not None:
            parts.append(self._query(left.rows.limit(0), padded, "RIGHT"))
        output = parts[0]
        for part in parts[1:]:
            output = output.unionByName(part)
        if KEEP in output.columns:
            output = output.where(F.coalesce(F.col(KEEP), F.lit(False)))
        output = _visible(output, kinds=self.updating)  # read once, by the write, which counts it
        late = left.nulls.withColumn(_SIDE, F.lit(LEFT_ROLE))
        self_join = self.right.name == self.left.name  # one input, its late rows once
        late_sides = {LEFT_ROLE: LEFT_ROLE, RIGHT_ROLE: LEFT_ROLE if self_join else RIGHT_ROLE}
        if not self_join:
            late = late.unionByName(right.nulls.withColumn(_SIDE, F.lit(RIGHT_ROLE)),
                                    allowMissingColumns=True)
        late = reused(late)
        counts = count_figures({
            # pairs made, not their retractions, as an inner join's output figure counts
            **({"matched_pairs": Where(matched, F.col(SIGN) > 0)} if outer else {}),
            "late_rows": late,
            **{f"{role}_{name}": where for role, side in sides.items()
               for name, where in side.figures().items()},
            **{f"{role}_nulls": Where(late, F.col(_SIDE) == late_side)
               for role, late_side in late_sides.items()},
        })

        def both(name: str) -> int:
            return sum(counts[f"{role}_{name}"] for role in sides)

        rows_in = {f"{role}_rows_in": counts[f"{role}_new"] + counts[f"{role}_nulls"]
                   for role in sides}
        state_rows = both("state_rows")
        figures = {
            "rows_in": rows_in["left_rows_in"] + (0 if self_join else rows_in["right_rows_in"]),
            **rows_in,
            **({"matched_pairs": counts["matched_pairs"]} if outer else {}),
            "padded_rows": both("padded_rows"),
            "closed_on_arrival_rows": both("closed_on_arrival_rows"),
            "late_rows": counts["late_rows"],
            "left_state_rows": counts["left_state_rows"],
            "right_state_rows": counts["right_state_rows"],
            "null_rowtime_rows": counts["late_rows"],
            "state_rows": state_rows,
            "pending_rows": state_rows,
        }
        return Step(
            output=output,
            late=late,
            state={role: side.state for role, side in sides.items()},
            history=None,
            figures=figures,
            # an inner join's output is its pairs (and, over retract inputs, their retractions)
            output_figures={} if outer else {
                "matched_pairs": F.count_if(F.col(ROW_KIND) != RowKind.DELETE.value)},
        )

    def _side(
        self, context: RunContext, read: InputRead, role: str, rowtime: str, *, end: int,
        started: int, outer: bool,
    ) -> _Side:
        """`read`'s new rows after `role`'s state, marked; `end` is what a row's interval's end
        adds to its rowtime (Flink's relative window size on the other input)."""
        new_rows = read.rows  # read twice: its timed rows are stored, its null-rowtime rows not
        time = F.col(f"`{rowtime}`")
        data_type = new_rows.select(time).schema[0].dataType
        if not is_timestamp(data_type):
            msg = (
                f"interval join view over {read.spec.name!r}: its rowtime {rowtime!r} is "
                f"{data_type.simpleString().upper()}; an interval join bounds TIMESTAMP(3) or "
                "TIMESTAMP_LTZ(3) rowtimes"
            )
            raise DefinitionError(msg)
        nulls = side_table_rows(new_rows.where(time.isNull()).drop(LATE_COLUMN),
                                LateReason.NULL_ROWTIME)
        timed = without_annotations(new_rows.where(time.isNotNull()))
        stored = list(timed.columns) + ([MATCHES] if outer else [])
        millis = timestamp_millis(time, data_type)
        fresh = timed.select(
            "*", F.lit(0).cast("long").alias(MATCHES), F.lit(True).alias(_NEW),
            (F.lit(started) >= millis + end).alias(_CLOSED),
        )
        state = context.state(role)
        if state is not None:
            matches = (F.col(MATCHES) if MATCHES in state.columns
                       else F.col(_MATCHED_BEFORE).cast("long")
                       if _MATCHED_BEFORE in state.columns else F.lit(0).cast("long"))
            kept = state.select(*[F.col(f"`{c}`") for c in timed.columns],
                                matches.alias(MATCHES), F.lit(False).alias(_NEW),
                                F.lit(False).alias(_CLOSED))
            fresh = kept.unionByName(fresh)
        retracting = self.retracting[role]
        retraction = F.col(ROW_KIND).isin(*_RETRACTIONS) if retracting else F.lit(False)
        rows = fresh.select(
            "*", F.struct(COMMIT_VERSION, POSITION).alias(ROW_ID), millis.alias(ROW_MS),
            (millis + end).alias(_END), F.when(retraction, -1).otherwise(1).alias(SIGN),
        )
        return _Side(rows=reused(rows), stored=stored, nulls=nulls)

    def _buckets(self, left: DataFrame, right: DataFrame) -> tuple[DataFrame, DataFrame]:
        """Both sides with a time bucket as the width of the interval, so the join is an
        equi-join on key and bucket instead of a range scan of each key's rows: a right row
        sits in one bucket, a left row in the one or two its interval touches (each pair
        still meets in exactly one)."""
        lower, upper = self.plan.lower_ms, self.plan.upper_ms
        width = max(upper - lower, 1)
        ms = F.col(ROW_MS)
        first, last = F.floor((ms - upper) / width), F.floor((ms - lower) / width)
        return (
            left.withColumn(_BUCKET, F.explode(F.sequence(first, last))),
            right.withColumn(_BUCKET, F.floor(ms / width)),
        )

    def _query(self, left: DataFrame, right: DataFrame, how: str, on: str | None = None
               ) -> DataFrame:
        """The view's SELECT over the rows of `left` and `right`, joined `how` (see
        `joined_sql`)."""
        names = table_name("left"), table_name("right")
        sql = joined_sql(self.plan, left_view=names[0], right_view=names[1], how=how,
                         on=parse_condition(on) if on else None)
        return query_over(sql, dict(zip(names, (left, right), strict=True)))


@dataclass(frozen=True)
class _Settled:
    """One input's rows after this run's join: which stay in state, which are padded now."""

    rows: DataFrame
    """The side's rows, `__ij_matches` updated with this run's matches (outer sides)."""
    keep: Column
    pads: Column | None
    """Which rows are padded now (None for an inner side)."""
    stored: list[str]

    @property
    def state(self) -> DataFrame:
        return self.rows.where(self.keep).select(*[F.col(f"`{c}`") for c in self.stored])

    @property
    def padded(self) -> DataFrame | None:
        return None if self.pads is None else self.rows.where(self.pads)

    def figures(self) -> dict[str, Where]:
        """The side's figures, counted in one pass over its rows."""
        return {
            "new": Where(self.rows, F.col(_NEW)),
            "state_rows": Where(self.rows, self.keep),
            "padded_rows": Where(self.rows, F.lit(False) if self.pads is None else self.pads),
            "closed_on_arrival_rows": Where(self.rows, F.col(_CLOSED)),
        }


def _settle(
    side: _Side, matched: DataFrame, id_column: str, *, ending: int, outer: bool,
    retracting: bool,
) -> _Settled:
    """`side`'s rows with this run's matches. A row stays while its interval's end is at or
    after the watermark `ending` (and, `retracting`, it is an addition no retraction took
    back). An outer row is padded when it leaves (or, closed on arrival, at once) with no
    live match: its matches (the other input's rows it met, each counted by that row's sign,
    so a retracted match uncounts itself) add up to none. A retraction pads too, retracting
    the padded row, when it takes back no row in this run (its row left state, padded or
    matched) and meets no row; one that takes back a row of state, never padded, does not."""
    rows = side.rows
    keep = ~F.col(_CLOSED) & (F.col(_END) >= F.lit(ending))
    if retracting:
        rows = _retracted(rows, side.stored)
        keep = keep & ~F.col(_RETRACTED)
    if not outer:
        return _Settled(rows=rows, keep=keep, pads=None, stored=side.stored)
    # a pair's sign times its row's is the other row's sign: +1 a match, -1 one retracted
    hits = matched.groupBy(F.col(id_column).alias(ROW_ID)).agg(F.sum(SIGN).alias(_HIT))
    rows = reused(rows.join(hits, on=ROW_ID, how="left").withColumn(
        MATCHES, F.col(MATCHES) + F.col(SIGN) * F.coalesce(F.col(_HIT), F.lit(0))).drop(_HIT))
    alone = F.col(MATCHES) <= 0
    if retracting:
        alone = alone & F.when(F.col(SIGN) > 0, ~F.col(_RETRACTED)).otherwise(~F.col(_TAKES_BACK))
    return _Settled(rows=rows, keep=keep, pads=~keep & alone, stored=side.stored)


def _retracted(rows: DataFrame, stored: list[str]) -> DataFrame:
    """`rows` with `__ij_retracted`: a retraction, or one of the first (in arrival order) of
    the additions equal to a retraction, as many as its equal retractions (Flink's retract
    of one equal row: equal rows are interchangeable, each meets the same rows); and
    `__ij_takes_back`: a retraction with such an addition to take back (the first ones, as
    many as its equal additions)."""
    values = values_hash([c for c in stored if c not in SYSTEM_COLUMNS and c != MATCHES])
    rows = rows.withColumn(_VALUES, values)
    by_values = Window.partitionBy(_VALUES)
    retractions = F.sum(F.when(F.col(SIGN) < 0, 1).otherwise(0)).over(by_values)
    additions = F.sum(F.when(F.col(SIGN) > 0, 1).otherwise(0)).over(by_values)
    nth = F.row_number().over(Window.partitionBy(_VALUES, SIGN).orderBy(ROW_ID))
    return rows.withColumn(_NTH, nth).withColumns({
        _RETRACTED: (F.col(SIGN) < 0) | (F.col(_NTH) <= retractions),
        _TAKES_BACK: (F.col(SIGN) < 0) & (F.col(_NTH) <= additions),
    }).drop(_VALUES, _NTH)


def _visible(output: DataFrame, *, kinds: bool) -> DataFrame:
    """The SELECT's columns: internal and changelog columns a `*` brought along dropped; with
    `kinds`, each row's kind by its sign (+I, or -D: a retraction of an equal row)."""
    hidden = [c for c in output.columns if (c.startswith(INTERNAL_PREFIX) and c != SIGN)
              or c in SYSTEM_COLUMNS]
    visible = output.drop(*hidden)
    if kinds:
        visible = visible.select(
            "*", F.when(F.col(SIGN) < 0, RowKind.DELETE.value).otherwise(
                RowKind.INSERT.value).alias(ROW_KIND),
            F.lit(None).cast("long").alias(COMMIT_VERSION),
            F.lit(None).cast("long").alias(POSITION),
        )
    return visible.drop(SIGN)


def _input(spec: TableSpec | ViewSpec, view: str) -> TableSpec:
    if not isinstance(spec, TableSpec):
        msg = (
            f"view {view!r}: the interval join reads {spec.name!r}, a view computed as a whole "
            "on read, whose changes no operator can follow; join tables, derived tables, or "
            "projections or filters of one"
        )
        raise DefinitionError(msg)
    return spec
