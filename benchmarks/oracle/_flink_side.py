"""The Apache Flink half of the differential check: run temporal joins in real Flink.

Run by `/tmp/flinkvenv/bin/python` (a virtualenv with PyPI's `apache-flink`, never the
project's): JSON jobs on stdin, JSON rows on stdout, one JVM (a local mini-cluster) for all
jobs. It imports nothing from chronolake.

Input: {"jobs": [{"name": str, "left": bool, "condition": str | null,
                  "probe": [[cid, id, key, t_ms], ...],
                  "build": [[cid, key, value, t_ms, kind], ...]}]}
with every side in arrival order and `kind` one of +I, -U, +U, -D. `cid` separates cases that
share one job: it is part of the join key and of the build side's primary key.
Output: {"flink": version, "results": {name: [[cid, id, value or null], ...]}}.

Watermarks: `WATERMARK FOR ts AS ts - INTERVAL '1' SECOND` on both sides, but with
`pipeline.auto-watermark-interval` set beyond every timestamp, Flink's
`WatermarkAssignerOperator` emits no watermark before the end of input (neither periodically
nor eagerly: it emits eagerly only when the watermark jumps by more than the interval), so
the join fires once, on the final +inf watermark, after both inputs have ended: every probe
row is joined against every build event of its job, whatever the arrival interleaving of the
two inputs. That makes the result deterministic.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyflink.common import Configuration, Row, RowKind
from pyflink.common.typeinfo import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import DataTypes, Schema, StreamTableEnvironment

_KINDS = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER,
          "-D": RowKind.DELETE}
# ~100 years in ms: larger than any epoch-ms timestamp the cases use, so no eager emission.
_NO_WATERMARK_MS = 100 * 365 * 24 * 3600 * 1000


def _environment() -> tuple[StreamExecutionEnvironment, StreamTableEnvironment]:
    config = Configuration()
    config.set_string("pipeline.auto-watermark-interval", f"{_NO_WATERMARK_MS} ms")
    config.set_string("parallelism.default", "1")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(_NO_WATERMARK_MS)
    return env, StreamTableEnvironment.create(env)


def _schema(columns: list[tuple[str, Any]], *, key: tuple[str, ...] = ()) -> Schema:
    builder = Schema.new_builder()
    for name, data_type in columns:
        builder.column(name, data_type)
    builder.column_by_expression("ts", "TO_TIMESTAMP_LTZ(t, 3)")
    builder.watermark("ts", "ts - INTERVAL '1' SECOND")
    if key:
        builder.primary_key(*key)
    return builder.build()


def _run_job(env: StreamExecutionEnvironment, t_env: StreamTableEnvironment,
             job: dict[str, Any]) -> list[list[Any]]:
    name = job["name"]
    probe_rows = [Row(cid, id_, key, t) for cid, id_, key, t in job["probe"]]
    build_rows = []
    for cid, key, value, t, kind in job["build"]:
        row = Row(cid, key, value, t)
        row.set_row_kind(_KINDS[kind])
        build_rows.append(row)
    probe_type = Types.ROW_NAMED(["cid", "id", "k", "t"],
                                 [Types.LONG(), Types.LONG(), Types.STRING(), Types.LONG()])
    build_type = Types.ROW_NAMED(["cid", "k", "v", "t"],
                                 [Types.LONG(), Types.STRING(), Types.LONG(), Types.LONG()])
    probe = t_env.from_data_stream(
        env.from_collection(probe_rows, type_info=probe_type),
        _schema([("cid", DataTypes.BIGINT()), ("id", DataTypes.BIGINT()),
                 ("k", DataTypes.STRING()), ("t", DataTypes.BIGINT())]),
    )
    build = t_env.from_changelog_stream(
        env.from_collection(build_rows, type_info=build_type),
        _schema([("cid", DataTypes.BIGINT().not_null()), ("k", DataTypes.STRING().not_null()),
                 ("v", DataTypes.BIGINT()), ("t", DataTypes.BIGINT())], key=("cid", "k")),
    )
    t_env.create_temporary_view(f"probe_{name}", probe)
    t_env.create_temporary_view(f"build_{name}", build)
    condition = f" AND {job['condition']}" if job.get("condition") else ""
    query = (
        f"SELECT p.cid, p.id, b.v FROM probe_{name} AS p {'LEFT ' if job['left'] else ''}"
        f"JOIN build_{name} FOR SYSTEM_TIME AS OF p.ts AS b "
        f"ON p.cid = b.cid AND p.k = b.k{condition}"
    )
    with t_env.execute_sql(query).collect() as results:
        return [[row[0], row[1], row[2]] for row in results]


def main() -> None:
    jobs = json.load(sys.stdin)["jobs"]
    env, t_env = _environment()
    results = {job["name"]: _run_job(env, t_env, job) for job in jobs}
    from pyflink.version import __version__

    json.dump({"flink": __version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
