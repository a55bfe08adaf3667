"""The temporal join operator: which build version each emitted probe row joins, then the query.

Event time (`FOR SYSTEM_TIME AS OF o.rowtime`): the version of the key valid at
the probe row's rowtime among the build events visible to it
(`join_valid_versions`). Processing time (`FOR SYSTEM_TIME AS OF o.proctime`):
the key's latest version (by arrival) when the probe row is processed. Either
way the result is a small "matched" relation (probe identity + build columns)
that the user's query joins as a regular join (`chronolake.sql.temporal`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from chronolake.joins.asof import join_valid_versions
from chronolake.lake.changelog import (
    ARRIVAL_ORDER,
    COMMIT_VERSION,
    POSITION,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)
from chronolake.schema.join_kind import JoinKind
from chronolake.spark.frames import query_over, table_name
from chronolake.sql.temporal import (
    CHANGE_COLUMNS,
    PROBE_POSITION,
    PROBE_VERSION,
    TemporalJoinPlan,
    TimeMode,
    rewrite_as_regular_join,
)

_BUILD_PREFIX = "__tj_b_"
_INTERNAL = (PROBE_VERSION, PROBE_POSITION)


def build_columns(build_events: DataFrame) -> list[str]:
    """The build side's own columns (system columns and internal markers left out)."""
    return [c for c in build_events.columns if c not in SYSTEM_COLUMNS and not c.startswith("_")]


def matched_versions(
    plan: TemporalJoinPlan, probe_rows: DataFrame, build_events: DataFrame
) -> DataFrame:
    """Event time: per probe row (by identity), the build version valid at its rowtime."""
    assert plan.mode is TimeMode.EVENT_TIME and plan.build_time is not None
    probe = probe_rows.select(
        F.col(COMMIT_VERSION).alias(PROBE_VERSION),
        F.col(POSITION).alias(PROBE_POSITION),
        *[F.col(k).alias(f"__tj_pk_{i}") for i, k in enumerate(plan.probe_keys)],
        F.col(plan.probe_time).alias("__tj_pt"),
    )
    columns = build_columns(build_events)
    matched = join_valid_versions(
        probe,
        build_events,
        probe_keys=[f"__tj_pk_{i}" for i in range(len(plan.probe_keys))],
        build_keys=list(plan.build_keys),
        probe_time="__tj_pt",
        build_time=plan.build_time,
        how=JoinKind.INNER,
        build_order=ARRIVAL_ORDER,
        build_row_kind=ROW_KIND if ROW_KIND in build_events.columns else None,
        build_columns={c: f"{_BUILD_PREFIX}{c}" for c in columns},
    )
    return matched.select(*_INTERNAL, *[F.col(f"{_BUILD_PREFIX}{c}").alias(c) for c in columns])


def latest_versions(build_events: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Processing time: each key's latest row by arrival; a key whose last event is `-D` is gone.

    `-U` events are ignored (their `+U` carries the new row).
    """
    events = build_events
    if ROW_KIND in events.columns:
        events = events.where(F.col(ROW_KIND) != RowKind.UPDATE_BEFORE.value)
    order = [F.col(c).desc() for c in ARRIVAL_ORDER if c in events.columns]
    ranked = events.withColumn(
        "__tj_rank", F.row_number().over(Window.partitionBy(*keys).orderBy(*order))
    ).where(F.col("__tj_rank") == 1)
    if ROW_KIND in events.columns:
        ranked = ranked.where(F.col(ROW_KIND) != RowKind.DELETE.value)
    return ranked.drop("__tj_rank")


def matched_latest(plan: TemporalJoinPlan, probe_rows: DataFrame, latest: DataFrame) -> DataFrame:
    """Processing time: per probe row (by identity), the latest version of its key."""
    columns = build_columns(latest)
    build = latest.select(*[F.col(c).alias(f"{_BUILD_PREFIX}{c}") for c in columns])
    condition = [
        probe_rows[p].eqNullSafe(build[f"{_BUILD_PREFIX}{b}"]) & probe_rows[p].isNotNull()
        for p, b in zip(plan.probe_keys, plan.build_keys, strict=True)
    ]
    joined = probe_rows.join(build, on=condition, how="inner")
    return joined.select(
        F.col(COMMIT_VERSION).alias(PROBE_VERSION),
        F.col(POSITION).alias(PROBE_POSITION),
        *[F.col(f"{_BUILD_PREFIX}{c}").alias(c) for c in columns],
    )


def join_query(
    plan: TemporalJoinPlan, probe_rows: DataFrame, matched: DataFrame, *, changelog: bool = False
) -> DataFrame:
    """Run the user's query with the temporal join answered by `matched`.

    `changelog` keeps each joined row's probe kind and arrival order (a run's output is a
    changelog); else the result is the query's columns alone.
    """
    probe_view, matched_view = table_name("probe"), table_name("matched")
    result = query_over(
        rewrite_as_regular_join(
            plan, probe_view=probe_view, matched_view=matched_view, changelog=changelog
        ),
        {probe_view: probe_rows, matched_view: matched},
    )
    kept = CHANGE_COLUMNS if changelog else ()
    hidden = [
        c for c in result.columns if (c in SYSTEM_COLUMNS or c in _INTERNAL) and c not in kept
    ]
    return result.drop(*hidden)
