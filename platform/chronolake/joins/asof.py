"""The event-time temporal join's data plane: each probe row meets the version valid at its time.

The plan is an equi-join on (key, time bucket) with a range check inside the bucket, never a
range or cartesian join: the build changelog becomes validity intervals (`_intervals`), each
copied into the buckets it overlaps (`_buckets`). A small build side is broadcast, so the probe
side is never shuffled and key skew costs nothing; a large one is shuffled with the probe by
(key, bucket), and hot keys get finer buckets so that no task holds one whole key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, NumericType, TimestampNTZType, TimestampType

from chronolake.errors import DefinitionError
from chronolake.joins._buckets import plan_buckets
from chronolake.joins._columns import all_of, quote
from chronolake.joins._intervals import END, validity_intervals
from chronolake.joins.tuning import AsOfTuning
from chronolake.joins.version_history import version_events
from chronolake.lake.changelog import ARRIVAL_ORDER, ROW_KIND, SYSTEM_COLUMNS
from chronolake.schema.join_kind import JoinKind

_INTERNAL = "__cl_"
_PROBE_TIME = "__cl_pt"
_PROBE_TICK = "__cl_ptick"
_PROBE_HASH = "__cl_ph"
_PROBE_JOIN = "__cl_pj"
_BUILD_TIME = "__cl_bt"
_BUILD_TICK = "__cl_btick"
_BUILD_HASH = "__cl_bh"
_BUILD_JOIN = "__cl_bj"
_BUCKET = "__cl_bucket"
_BUILD_KIND = "__cl_kind"
_MATCH_OK = "__cl_ok"


def join_valid_versions(
    probe: DataFrame,
    build: DataFrame,
    *,
    probe_keys: Sequence[str],
    build_keys: Sequence[str],
    probe_time: str,
    build_time: str,
    how: JoinKind | str = JoinKind.INNER,
    build_order: Sequence[str] = ARRIVAL_ORDER,
    build_row_kind: str | None = ROW_KIND,
    build_columns: Sequence[str] | Mapping[str, str] | None = None,
    build_prefix: str = "",
    condition: Column | None = None,
    tuning: AsOfTuning | None = None,
) -> DataFrame:
    """Join each probe row with the build version of its key valid at the probe's time.

    The build side is a versioned table's changelog. A version with time t is valid from t
    inclusive until the key's next version time; among events of one key with the same time
    the later arrival (`build_order`) wins; `-U` events are ignored; a winning `-D` means the
    key has no version from its time on (so a `-D` stamped with its insert's time erases that
    version). A probe row with a null key or time matches nothing. `how="inner"` drops
    unmatched probe rows, `"left"` keeps them with null build columns. `condition` holds the
    other ON conditions: it is evaluated on the matched pair (probe columns and build columns
    under their output names); a pair it does not accept counts as unmatched. Row order is not
    kept; the caller orders.

    Args:
        probe: The probe (left) side; every column is kept, its row kind and arrival included.
        build: The build side's changelog (see `chronolake.lake.changelog`).
        probe_keys: Probe columns equal to `build_keys`, pairwise.
        build_keys: The build side's primary key columns.
        probe_time: The probe's TIMESTAMP or TIMESTAMP_NTZ time column.
        build_time: The build's version time column, of the same type as `probe_time`.
        how: `inner` or `left`.
        build_order: Build columns giving arrival order (ties between equal version times).
        build_row_kind: Build column holding +I/-U/+U/-D; None for an insert-only build side.
        build_columns: Build columns to output, as names (prefixed with `build_prefix`) or a
            mapping to output names; None: every build column but the system columns.
        build_prefix: Prefix of the output names when `build_columns` is not a mapping.
        condition: Other ON conditions over the output columns, or None.
        tuning: Plan knobs (broadcast threshold, bucket sizes, hot keys); never change results.

    Raises:
        DefinitionError: Before any Spark job, for a missing column, mismatched key or time
            types, output names clashing with probe columns, or an unknown `how`.

    Example:
        >>> enriched = join_valid_versions(
        ...     orders, rates_changelog, probe_keys=["currency"], build_keys=["currency"],
        ...     probe_time="order_time", build_time="currency_time", how="left",
        ...     build_columns={"rate": "rate"})
    """
    join_type = _join_type(how)
    tuning = tuning or AsOfTuning()
    _check_key_lists(probe_keys, build_keys)
    _require_columns(probe, [*probe_keys, probe_time], side="probe")
    arrival = list(build_order)
    kind = [build_row_kind] if build_row_kind is not None else []
    _require_columns(build, [*build_keys, build_time, *arrival, *kind], side="build")
    if not arrival:
        msg = "build_order is empty: expected the build's arrival columns, e.g. " + str(
            list(ARRIVAL_ORDER)
        )
        raise DefinitionError(msg)
    _check_time_types(probe, probe_time, build, build_time)
    key_types = _common_key_types(probe, probe_keys, build, build_keys)
    outputs = _output_names(build, build_columns, build_prefix, probe.columns)

    time_type = probe.schema[probe_time].dataType
    probe_key_cols = [f"__cl_pk{i}" for i in range(len(probe_keys))]
    build_key_cols = [f"__cl_bk{i}" for i in range(len(build_keys))]
    arrival_cols = [f"__cl_o{i}" for i in range(len(arrival))]
    probe_side = probe.select(
        "*",
        *_cast_keys(probe_keys, key_types, probe_key_cols),
        F.col(quote(probe_time)).alias(_PROBE_TIME),
    ).withColumns(
        {
            _PROBE_HASH: F.xxhash64(*probe_key_cols),
            _PROBE_TICK: _ticks(F.col(_PROBE_TIME), time_type),
        }
    )
    events = (
        version_events(build, build_keys, build_time, build_row_kind)
        .select(
            *_cast_keys(build_keys, key_types, build_key_cols),
            F.col(quote(build_time)).alias(_BUILD_TIME),
            *_renamed(zip(arrival, arrival_cols, strict=True)),
            (F.col(quote(build_row_kind)) if build_row_kind else F.lit(None)).alias(_BUILD_KIND),
            *_renamed(outputs.items()),
        )
        .withColumns(
            {
                _BUILD_HASH: F.xxhash64(*build_key_cols),
                _BUILD_TICK: _ticks(F.col(_BUILD_TIME), time_type),
            }
        )
    )

    plan = plan_buckets(
        events,
        probe_side.where(_all_not_null([*probe_key_cols, _PROBE_TIME])),
        build_hash=_BUILD_HASH,
        build_tick=_BUILD_TICK,
        probe_hash=_PROBE_HASH,
        probe_tick=_PROBE_TICK,
        tuning=tuning,
    )
    windows = validity_intervals(
        events, keys=build_key_cols, start=_BUILD_TIME, arrival=arrival_cols, kind=_BUILD_KIND
    )
    buckets = plan.interval_buckets(
        F.col(_BUILD_HASH), F.col(_BUILD_TICK), _ticks(F.col(END), time_type)
    )
    intervals = windows.select(
        *build_key_cols, _BUILD_TIME, END, *outputs.values(), F.explode(buckets).alias(_BUCKET)
    ).withColumn(_BUILD_JOIN, F.xxhash64(*build_key_cols, _BUCKET))
    bucket = plan.probe_bucket(F.col(_PROBE_HASH), F.col(_PROBE_TICK))
    probe_side = probe_side.withColumn(_PROBE_JOIN, F.xxhash64(*probe_key_cols, bucket))
    # One long equi-key (a hash of key and bucket) keeps Spark's fastest hash relation (a
    # LongHashedRelation). The keys themselves are compared too, so hash collisions cannot
    # match; wrapped in coalesce so that the planner does not lift them into the join keys.
    on = [F.col(_PROBE_JOIN) == F.col(_BUILD_JOIN)]
    on += [
        F.coalesce(F.col(p) == F.col(b), F.lit(False))
        for p, b in zip(probe_key_cols, build_key_cols, strict=True)
    ]
    on += [
        F.col(_PROBE_TIME) >= F.col(_BUILD_TIME),
        F.col(END).isNull() | (F.col(_PROBE_TIME) < F.col(END)),
    ]
    matched = probe_side.join(
        F.broadcast(intervals) if plan.broadcast else intervals,
        on=all_of(on),
        how=join_type.value,
    )
    probe_out = [F.col(quote(name)) for name in probe.columns]
    build_out = [F.col(quote(name)) for name in outputs.values()]
    if condition is None:
        return matched.select(*probe_out, *build_out)
    if join_type is JoinKind.INNER:
        return matched.where(condition).select(*probe_out, *build_out)
    accepted = matched.withColumn(_MATCH_OK, F.coalesce(condition, F.lit(False)))
    nulled = [
        F.when(F.col(_MATCH_OK), col).alias(name)
        for col, name in zip(build_out, outputs.values(), strict=True)
    ]
    return accepted.select(*probe_out, *nulled)


def _join_type(how: JoinKind | str) -> JoinKind:
    """INNER or LEFT: a temporal join keeps every probe row or only matched ones, never
    unmatched build versions."""
    if how in (JoinKind.INNER, JoinKind.LEFT):
        return JoinKind(how)
    msg = f"how={how!r} is not a temporal join type: expected 'inner' or 'left'"
    raise DefinitionError(msg)


def _check_key_lists(probe_keys: Sequence[str], build_keys: Sequence[str]) -> None:
    if not build_keys or len(probe_keys) != len(build_keys):
        msg = (
            f"probe_keys {list(probe_keys)} and build_keys {list(build_keys)} must pair up: "
            "expected the same, non-zero number of columns (the build's primary key must be "
            "among the equality conditions)"
        )
        raise DefinitionError(msg)


def _require_columns(frame: DataFrame, names: Sequence[str], *, side: str) -> None:
    missing = [name for name in names if name not in frame.columns]
    if missing:
        msg = (
            f"{side} side has no column {missing[0]!r}: expected one of {frame.columns}; "
            "select nested fields or expressions as top-level columns first"
        )
        raise DefinitionError(msg)


def _check_time_types(probe: DataFrame, probe_time: str, build: DataFrame, build_time: str) -> None:
    probe_type = probe.schema[probe_time].dataType
    build_type = build.schema[build_time].dataType
    for name, dtype in ((probe_time, probe_type), (build_time, build_type)):
        if not isinstance(dtype, TimestampType | TimestampNTZType):
            msg = (
                f"time column {name!r} is {dtype.simpleString()}: expected TIMESTAMP or "
                "TIMESTAMP_NTZ; cast it or declare a computed rowtime column"
            )
            raise DefinitionError(msg)
    if type(probe_type) is not type(build_type):
        msg = (
            f"probe time {probe_time!r} is {probe_type.simpleString()} but build time "
            f"{build_time!r} is {build_type.simpleString()}: expected the same type on both "
            "sides (as Flink requires); cast one of them"
        )
        raise DefinitionError(msg)


def _common_key_types(
    probe: DataFrame, probe_keys: Sequence[str], build: DataFrame, build_keys: Sequence[str]
) -> list[DataType]:
    """Both sides' keys cast to one type, so that equal keys hash equal."""
    types = []
    for probe_key, build_key in zip(probe_keys, build_keys, strict=True):
        probe_type = probe.schema[probe_key].dataType
        build_type = build.schema[build_key].dataType
        if probe_type == build_type:
            types.append(probe_type)
        elif isinstance(probe_type, NumericType) and isinstance(build_type, NumericType):
            widened = probe.sparkSession.range(0).select(
                F.coalesce(F.lit(None).cast(probe_type), F.lit(None).cast(build_type))
            )  # analysis only: no job runs
            types.append(widened.schema[0].dataType)
        else:
            msg = (
                f"join key {probe_key!r} is {probe_type.simpleString()} but {build_key!r} is "
                f"{build_type.simpleString()}: expected the same type; cast one of them"
            )
            raise DefinitionError(msg)
    return types


def _output_names(
    build: DataFrame,
    build_columns: Sequence[str] | Mapping[str, str] | None,
    prefix: str,
    probe_columns: Sequence[str],
) -> dict[str, str]:
    if isinstance(build_columns, Mapping):
        outputs = dict(build_columns)
    else:
        chosen = build_columns
        if chosen is None:
            chosen = [name for name in build.columns if name not in SYSTEM_COLUMNS]
        outputs = {name: prefix + name for name in chosen}
    _require_columns(build, list(outputs), side="build")
    names = list(outputs.values())
    clashes = sorted({n for n in names if n in probe_columns or names.count(n) > 1})
    reserved = [n for n in [*probe_columns, *names] if n.startswith(_INTERNAL)]
    if clashes or reserved:
        msg = (
            f"output column {(clashes or reserved)[0]!r} is ambiguous: expected build output "
            f"names distinct from the probe's columns and not starting with {_INTERNAL!r}; "
            "pass build_prefix or a build_columns mapping"
        )
        raise DefinitionError(msg)
    return outputs


def _cast_keys(
    keys: Sequence[str], types: Sequence[DataType], names: Sequence[str]
) -> list[Column]:
    return [
        F.col(quote(key)).cast(dtype).alias(name)
        for key, dtype, name in zip(keys, types, names, strict=True)
    ]


def _renamed(pairs: Iterable[tuple[str, str]]) -> list[Column]:
    return [F.col(quote(source)).alias(target) for source, target in pairs]


def _ticks(time: Column, dtype: DataType) -> Column:
    """A long that never decreases as `time` grows: the bucket ruler (matching compares times).

    Both types hold microseconds since the epoch; only TIMESTAMP has a function that reads them.
    A cast of TIMESTAMP_NTZ to TIMESTAMP converts every row through the session time zone
    (slow, and a DST gap reorders times), so the NTZ value is relabelled as TIMESTAMP instead:
    `to_timestamp` with a format passes a timestamp through unchanged (the format only parses
    strings). Exact and monotone in every session zone.
    """
    if isinstance(dtype, TimestampNTZType):
        time = F.to_timestamp(time, "yyyy")
    return F.unix_micros(time)


def _all_not_null(names: Sequence[str]) -> Column:
    return all_of([F.col(quote(name)).isNotNull() for name in names])
