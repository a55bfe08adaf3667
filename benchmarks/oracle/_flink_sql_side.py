"""A Flink SQL server for the time-SQL differential check: one JVM, one job per request.

Run by `/tmp/flinkvenv/bin/python` (a virtualenv with PyPI's `apache-flink`, never the
project's); it imports nothing from chronolake. Requests and answers are JSON lines:

    request: {"rows": [[table, id, k, v, t_ms, wm_ms or null], ...],
              "views": [[name, select over `arrivals`], ...], "query": sql, "explain": bool}
    answer:  {"flink": version, "rows": [[kind, value, ...], ...], "plan": str | null}
             or {"error": str}

All tables of a case arrive in one stream, `arrivals`, in the case's arrival order; each table
is a view over it (`WHERE tbl = '<table>'`). Its time attribute is `ts` (TIMESTAMP(3),
UTC wall clock of `t_ms`) and its watermark is the row's `wm` column: the watermark the
case wants in force when the row arrives (chronolake's, for the run the row lands in).
`pipeline.auto-watermark-interval` is 0, so `WatermarkAssignerOperator` emits a watermark
right after the row that raises it; a row of table `~tick` closes each round by raising it
to the round's final watermark, and no view selects it. One stream fixes the order of
rows and watermarks at the source, not at a join: each input of a join reaches it through
its own exchange, the two interleave as the network delivers them, and the join's watermark
is the minimum of its inputs' (the other input's often arrives after this one's rows), so a
join may see a round's rows under a watermark lower than the one they carry. The caller
leaves out the matches that depend on (`_time_cases.order_sensitive`, `lazy_cleanup`).
Timestamps come back as epoch ms; each row with its row kind (+I, -U, +U, -D), since a
query Flink plans as an updating one says so there.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from pyflink.common import Configuration, Row, RowKind
from pyflink.common.typeinfo import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import DataTypes, Schema, StreamTableEnvironment

_KINDS = {RowKind.INSERT: "+I", RowKind.UPDATE_BEFORE: "-U", RowKind.UPDATE_AFTER: "+U",
          RowKind.DELETE: "-D"}
_NAMES = ["tbl", "id", "k", "v", "t", "wm"]
_TYPES = [Types.STRING(), Types.LONG(), Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()]


def _environment() -> tuple[StreamExecutionEnvironment, StreamTableEnvironment]:
    config = Configuration()
    config.set_string("pipeline.auto-watermark-interval", "0 ms")
    config.set_string("parallelism.default", "1")
    config.set_string("table.local-time-zone", "UTC")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(0)
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("table.local-time-zone", "UTC")
    return env, t_env


def _schema() -> Schema:
    return (Schema.new_builder()
            .column("tbl", DataTypes.STRING()).column("id", DataTypes.BIGINT())
            .column("k", DataTypes.STRING()).column("v", DataTypes.BIGINT())
            .column("t", DataTypes.BIGINT()).column("wm", DataTypes.BIGINT())
            .column_by_expression("ts", "CAST(TO_TIMESTAMP_LTZ(t, 3) AS TIMESTAMP(3))")
            .column_by_expression("wm_ts", "CAST(TO_TIMESTAMP_LTZ(wm, 3) AS TIMESTAMP(3))")
            .watermark("ts", "wm_ts")
            .build())


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return round(moment.timestamp() * 1000)
    return value


def _run(env: StreamExecutionEnvironment, t_env: StreamTableEnvironment,
         request: dict[str, Any]) -> dict[str, Any]:
    rows = [Row(*row) for row in request["rows"]]
    arrivals = t_env.from_data_stream(
        env.from_collection(rows, type_info=Types.ROW_NAMED(_NAMES, _TYPES)), _schema())
    t_env.create_temporary_view("arrivals", arrivals)
    try:
        for name, select in request["views"]:
            t_env.execute_sql(f"CREATE TEMPORARY VIEW {name} AS {select}")
        plan = t_env.explain_sql(request["query"]) if request.get("explain") else None
        with t_env.execute_sql(request["query"]).collect() as results:
            out = [[_KINDS[row.get_row_kind()], *(_plain(value) for value in row)]
                   for row in results]
    finally:
        for name, _ in reversed(request["views"]):
            t_env.drop_temporary_view(name)
        t_env.drop_temporary_view("arrivals")
    return {"rows": out, "plan": plan}


def main() -> None:
    from pyflink.version import __version__

    env, t_env = _environment()
    for line in sys.stdin:
        try:
            answer = _run(env, t_env, json.loads(line))
        except Exception as error:  # noqa: BLE001 - reported to the caller, who decides
            answer = {"error": str(error)[:1500]}
        answer["flink"] = __version__
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
