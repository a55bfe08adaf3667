"""The `chronolake` command as a newcomer meets it: its version, "did you mean", no lake
made by mistake, Spark's errors in a few lines, a status that fits 80 columns, feeding the
demo lake, and Ctrl-C.

Commands that need no JVM run in-process (click's runner); a command whose Spark errors
or signals matter runs as a real subprocess (each starts a JVM: they are marked slow).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog, materialize_view
from chronolake.cli.app import main
from chronolake.demo.lake import DEMO_START, build_demo_lake, correct_orders, feed_demo_lake
from chronolake.lake.layout import LOGS_ROOT, last_error_path, output_path
from chronolake.spark.errors import spark_error_line
from chronolake.sql.ddl import parse_view

ROOT = Path(__file__).resolve().parent.parent
PLATFORM_DDL = (ROOT / "assets" / "platform.sql").read_text()
CHRONOLAKE = Path(sys.executable).with_name("chronolake")
LONG_NAME = "orders_enriched_with_rates_for_the_finance_team_report"


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """The demo tables with the reference platform declared (no Spark needed)."""
    root = tmp_path / "lake"
    build_demo_lake(root)
    Catalog(root).declare(PLATFORM_DDL)
    return root


def _invoke(*args: str, columns: int = 80) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": str(columns)})


def _chronolake(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHRONOLAKE), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# -- habits: version, "did you mean" --------------------------------------------------------


def test_version_is_the_installed_package_version() -> None:
    result = _invoke("--version")
    assert result.exit_code == 0
    assert result.output == f"chronolake {version('chronolake')}\n"


def test_a_mistyped_command_gets_did_you_mean() -> None:
    result = _invoke("stauts")
    assert result.exit_code == 2
    assert "No such command 'stauts'. Did you mean 'status'?" in result.output


def test_a_mistyped_option_gets_did_you_mean(lake: Path) -> None:
    result = _invoke("status", "--lak", str(lake))
    assert result.exit_code == 2
    assert "No such option '--lak'. Did you mean '--lake'?" in result.output


# -- no lake made by mistake ------------------------------------------------------------------


@pytest.mark.parametrize("script", ["SELECT 1;", "SELECT amount FROM orders;"])
def test_sql_on_a_path_without_a_lake_fails_and_creates_nothing(
    tmp_path: Path, script: str
) -> None:
    query = tmp_path / "query.sql"
    query.write_text(script)
    missing, empty = tmp_path / "nowhere", tmp_path / "empty"
    empty.mkdir()
    for path in (missing, empty):
        result = _invoke("sql", "--lake", str(path), "-f", str(query))
        assert result.exit_code == 1
        assert result.output.startswith(f"error: no lake at {path}: it holds no chronolake")
    assert not missing.exists() and list(empty.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "query.sql"]


def test_a_script_that_declares_tables_starts_a_lake(tmp_path: Path) -> None:
    ddl = tmp_path / "ddl.sql"
    ddl.write_text("CREATE TABLE t (a INT) WITH ('path' = 't');")
    result = _invoke("sql", "--lake", str(tmp_path / "new"), "-f", str(ddl))
    assert result.exit_code == 0, result.output
    assert Catalog(tmp_path / "new").names() == ["t"]


def test_sql_without_f_or_e_reads_a_script_piped_to_it(tmp_path: Path) -> None:
    """Like psql: standard input not a terminal is a script (a terminal opens the shell,
    tests/test_sql_shell.py)."""
    script = ("CREATE TABLE t (a INT) WITH ('path' = 't');\n"
              "CREATE TABLE u (b INT) WITH ('path' = 'u');")
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path / "new")], input=script)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["-- registered table t", "-- registered table u"]
    assert Catalog(tmp_path / "new").names() == ["t", "u"]


def test_run_status_and_feed_without_a_lake_say_so(tmp_path: Path) -> None:
    for args in (["run", "orders_enriched"], ["status"], ["feed"]):
        result = _invoke(*args, "--lake", str(tmp_path))
        assert result.exit_code == 1
        assert f"no lake at {tmp_path}" in result.output or "no demo lake" in result.output
    assert list(tmp_path.iterdir()) == []


# -- status -----------------------------------------------------------------------------------


def test_status_fits_80_columns_with_full_names(lake: Path) -> None:
    catalog = Catalog(lake)
    for name in ("orders_for_the_finance_team", LONG_NAME):
        ddl = f"CREATE VIEW {name} AS SELECT order_id FROM orders_enriched"
        catalog.register(parse_view(ddl, catalog=catalog.specs()))
    result = _invoke("status", "--lake", str(lake), columns=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "orders_for_the_finance_team " in result.output  # on one line when it fits
    width = lines[0].index("kind")  # a longer name is folded in its column, not cut
    assert lines[-2].startswith("source watermarks: orders from file statistics")
    column = "".join(line[:width].strip() for line in lines[2:-2])
    assert column == "".join(catalog.names())


def test_status_names_the_lake_backend_runs_use(lake: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    monkeypatch.delenv("CHRONOLAKE_BACKEND", raising=False)
    last = _invoke("status", "--lake", str(lake)).output.splitlines()[-1]
    assert last == "lake backend: delta-rs (auto; CHRONOLAKE_BACKEND=delta-spark runs Delta's own)"
    monkeypatch.setenv("CHRONOLAKE_BACKEND", "delta-spark")
    last = _invoke("status", "--lake", str(lake)).output.splitlines()[-1]
    assert last == "lake backend: delta-spark (CHRONOLAKE_BACKEND)"


def test_status_json_is_one_object_per_table(lake: Path) -> None:
    result = _invoke("status", "--lake", str(lake), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [row["name"] for row in rows] == Catalog(lake).names()
    orders = next(row for row in rows if row["name"] == "orders")
    assert orders.pop("lag_seconds") > 0
    assert orders == {
        "name": "orders", "what": "table", "kind": "versioned", "rowtime": "order_time",
        "watermark": "2026-11-02T09:59:54.808000Z", "watermark_from": "file statistics",
        "pending_rows": None, "last_run": None, "last_run_at": None,
        "last_error": None, "last_error_at": None,
    }


# -- partitions -------------------------------------------------------------------------------


def test_partitions_before_any_run_wait_for_a_watermark(lake: Path) -> None:
    result = _invoke("partitions", "orders_enriched", "--lake", str(lake))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "orders_enriched: hourly partitions of order_time from 2026-11-02 09:00 UTC",
        "  watermark: none yet",
        "  complete: none yet",
        "  next: 2026-11-02-09:00, waits for the watermark to reach 2026-11-02 10:00:00",
        "        (there is none yet)",
        "No complete partition holds rows yet.",
    ]


def test_partitions_of_a_table_without_them_are_refused_saying_how_to_declare_them(
    lake: Path
) -> None:
    refused = _invoke("partitions", "latest_rates", "--lake", str(lake))
    assert refused.exit_code == 1
    assert refused.output == (
        "error: view 'latest_rates' has no time partitions; declare them with its WITH "
        "options, e.g. CREATE OR REPLACE VIEW latest_rates WITH ('partition.time.schedule' = "
        "'hourly', 'partition.time.start' = '2026-11-01') ...\n"
    )
    unknown = _invoke("partitions", "orders_enrichd", "--lake", str(lake))
    assert unknown.exit_code == 1
    assert "no table or view 'orders_enrichd' is registered; did you mean 'orders_enriched'?" \
        in unknown.output


def test_partitions_of_a_source_follow_its_watermark_in_its_zone(tmp_path: Path) -> None:
    build_demo_lake(tmp_path)
    orders = PLATFORM_DDL[: PLATFORM_DDL.index("-- Currency rates")]
    Catalog(tmp_path).declare(orders.replace("'changelog' = 'cdf',", (
        "'changelog' = 'cdf', 'partition.time.schedule' = 'daily', "
        "'partition.time.start' = '2026-11-01', 'partition.time.zone' = 'Europe/Berlin',")))
    result = _invoke("partitions", "orders", "--lake", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [  # Berlin's 2 Nov ends at 23:00 UTC
        "orders: daily partitions of order_time from 2026-11-01 Europe/Berlin",
        "  watermark: 2026-11-02 09:59:54.808 (file statistics)",
        "  complete: 1 (2026-11-01)",
        "  next: 2026-11-02, waits for the watermark to reach 2026-11-02 23:00:00",
        "        (13h 00m beyond the watermark)",
        "A source table's commits stamp no figures per partition; a derived table's do.",
    ]


@pytest.mark.spark
def test_partitions_complete_as_the_watermark_passes_them_and_show_later_changes(
    lake: Path, spark: SparkSession
) -> None:
    def partitions(*flags: str) -> list[str]:
        result = _invoke("partitions", "orders_enriched", "--lake", str(lake), *flags)
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    def run() -> int:
        assert _invoke("run", "orders_enriched", "--lake", str(lake)).exit_code == 0
        return DeltaTable(str(output_path(lake, "orders_enriched"))).version()

    run()  # the rates' watermark, 09:39:55, holds the join back: no hour is complete
    assert partitions()[1:] == [
        "  watermark: 2026-11-02 09:39:55.000 (its last run)",
        "  complete: none yet",
        "  next: 2026-11-02-09:00, waits for the watermark to reach 2026-11-02 10:00:00",
        "        (20m 05s beyond the watermark)",
        "No complete partition holds rows yet.",
    ]

    feed_demo_lake(lake, seed=0, now=DEMO_START + timedelta(hours=2))  # orders up to 11:00
    completing = run()
    shown = partitions()
    assert shown[2:4] == [
        "  complete: 1 (2026-11-02-09:00)",
        "  next: 2026-11-02-10:00, waits for the watermark to reach 2026-11-02 11:00:00",
    ]
    rows = _rows_per_hour(spark, lake)
    assert _partition_rows(shown) == {
        "2026-11-02-09:00": [str(rows["2026-11-02-09:00"]), "0", "0", "0", "0",
                             str(completing), "completed"],
    }

    correct_orders(lake / "orders", [3], percent=10)  # an order of the complete 09:00 hour
    feed_demo_lake(lake, seed=1, now=DEMO_START + timedelta(hours=3, minutes=30))
    changing = run()
    everything = partitions("--all")
    assert everything[2] == "  complete: 3 (2026-11-02-09:00 … 2026-11-02-11:00)"
    rows = _rows_per_hour(spark, lake)
    assert _partition_rows(everything) == {  # 11:00 holds no order: not listed
        "2026-11-02-09:00": [str(rows["2026-11-02-09:00"]), "0", "1", "1", "0",
                             str(changing), "changed"],
        "2026-11-02-10:00": [str(rows["2026-11-02-10:00"]), "0", "0", "0", "0",
                             str(changing), "completed"],
    }
    latest = partitions("--last", "1")
    assert list(_partition_rows(latest)) == ["2026-11-02-10:00"]
    assert latest[-1] == ("the latest 1 of 2 partitions with rows or changes; --all shows "
                          "every one")


def _partition_rows(lines: list[str]) -> dict[str, list[str]]:
    """The rows of `chronolake partitions`' table, by partition key."""
    return {line.split()[0]: line.split()[1:] for line in lines if line.startswith("2026-")}


def _rows_per_hour(spark: SparkSession, lake: Path) -> dict[str, int]:
    rows = Catalog(lake, spark).table("orders_enriched").groupBy(
        F.date_format("order_time", "yyyy-MM-dd-HH:00").alias("hour")
    ).count()
    return {row["hour"]: row["count"] for row in rows.collect()}  # a few hours: small


# -- feed ---------------------------------------------------------------------------------------


def test_feed_adds_new_delta_versions_and_says_what(lake: Path) -> None:
    before = {name: DeltaTable(str(lake / name)).version() for name in ("orders", "rates")}
    result = _invoke("feed", "--lake", str(lake), "--seed", "1")
    assert result.exit_code == 0, result.output
    after = {name: DeltaTable(str(lake / name)).version() for name in ("orders", "rates")}
    assert result.output.splitlines() == [
        f"orders: rows appended 100, updated 1, deleted 1 (Delta versions "
        f"{before['orders'] + 1}-{after['orders']})",
        f"rates: rows updated 1 (Delta version {after['rates']})",
    ]


# -- Spark's errors -----------------------------------------------------------------------------


@pytest.mark.spark
def test_a_spark_error_is_one_line_with_the_suggested_name(
    lake: Path, spark: SparkSession
) -> None:
    catalog = Catalog(lake, spark)
    with pytest.raises(AnalysisException) as raised:  # Python API users keep the exception
        catalog.sql("SELECT amonut FROM orders").collect()
    assert spark_error_line(raised.value) == (
        "A column, variable, or function parameter with name `amonut` cannot be resolved; "
        "did you mean `amount`? [UNRESOLVED_COLUMN.WITH_SUGGESTION]"
    )
    with pytest.raises(Py4JJavaError) as failed:  # a Java error PySpark does not convert
        catalog.sql(
            "SELECT java_method('java.lang.Integer', 'parseInt', currency) FROM orders"
        ).collect()
    assert spark_error_line(failed.value).startswith("NumberFormatException: For input string: ")


@pytest.mark.slow
def test_a_spark_error_on_the_cli_is_a_few_lines_and_its_full_text_a_log(
    lake: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "q.sql").write_text("SELECT currency FROM rates;\nSELECT amonut FROM orders;")
    result = _chronolake("sql", "--lake", str(lake), "-f", "q.sql", cwd=workdir)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) <= 15 and len(result.stderr) < 2000, result.stderr
    assert lines[-3:-1] == [
        "error: Spark failed in statement 2 of q.sql (SELECT amonut FROM orders):",
        "  A column, variable, or function parameter with name `amonut` cannot be resolved; "
        "did you mean `amount`? [UNRESOLVED_COLUMN.WITH_SUGGESTION]",
    ]
    [log] = (lake / LOGS_ROOT).glob("*.log")
    assert lines[-1] == f"  Spark's full error: {log} (or rerun with --verbose)"
    full = log.read_text()
    assert "AnalysisException" in full and "'Project ['amonut]" in full  # the plan
    assert [p.name for p in workdir.iterdir()] == ["q.sql"]  # no spark-warehouse, no metastore


@pytest.mark.spark
def test_verbose_prints_spark_full_error_too(lake: Path, spark: SparkSession) -> None:
    script = lake.parent / "q.sql"
    script.write_text("SELECT amonut FROM orders;")
    result = CliRunner().invoke(main, ["sql", "--lake", str(lake), "-f", str(script), "-v"])
    assert result.exit_code == 1
    assert "'Project ['amonut]" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("  Spark's full error: ")
    assert "did you mean `amount`?" in result.stderr


@pytest.mark.spark
def test_a_failed_run_shows_in_status_until_a_run_succeeds(lake: Path, spark: SparkSession
                                                             ) -> None:
    catalog = Catalog(lake, spark)
    checked = (
        "CREATE VIEW checked AS SELECT order_id, CASE WHEN currency = 'GBP' "
        "THEN raise_error('GBP is not traded') ELSE currency END AS currency FROM orders"
    )
    catalog.register(parse_view(checked, catalog=catalog.specs()))
    failed = CliRunner().invoke(main, ["run", "checked", "--lake", str(lake)])
    assert failed.exit_code == 1
    assert failed.stderr.startswith(
        "error: Spark failed in the run of checked:\n  GBP is not traded [USER_RAISED_EXCEPTION]"
    )
    assert _status_of(lake, "checked")["last_error"] == "GBP is not traded [USER_RAISED_EXCEPTION]"
    assert _status_of(lake, "checked")["last_run"] is None
    table = " ".join(_invoke("status", "--lake", str(lake)).output.split())  # wrapped at 80
    assert "checked: last run failed at" in table
    assert "UTC: GBP is not traded [USER_RAISED_EXCEPTION]" in table

    DeltaTable(str(lake / "orders")).delete("currency = 'GBP'")  # the data fixed
    assert CliRunner().invoke(main, ["run", "checked", "--lake", str(lake)]).exit_code == 0
    assert not last_error_path(lake, "checked").path.exists()
    row = _status_of(lake, "checked")
    assert row["last_error"] is None and row["last_run"] is not None


def _status_of(lake: Path, name: str) -> dict[str, object]:
    result = _invoke("status", "--lake", str(lake), "--format", "json")
    [row] = [row for row in map(json.loads, result.output.splitlines()) if row["name"] == name]
    return row


# -- Ctrl-C -------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.spark
def test_ctrl_c_ends_a_run_with_130_and_one_line_and_the_next_run_finishes_it(
    lake: Path, tmp_path: Path, spark: SparkSession
) -> None:
    view = "orders_enriched"
    reference = tmp_path / "reference"
    shutil.copytree(lake, reference)
    intent = lake / "_chronolake" / "state" / view / "intent-00000001.json"
    run = subprocess.Popen(
        [str(CHRONOLAKE), "run", view, "--lake", str(lake)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 240
    while not intent.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # into the run's writes
    os.kill(run.pid, signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, (out, err)
    assert err.splitlines() == [
        f"interrupted; the run of {view} did not finish, and its next run completes it exactly "
        "once (nothing lost, nothing written twice)"
    ]
    assert "checkpoint-00000001.json" not in os.listdir(intent.parent)

    again = _chronolake("run", view, "--lake", str(lake), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    expected = materialize_view(Catalog(reference, spark), view)
    assert again.stdout.splitlines()[0] == f"{view}: {expected.message}"
    query = f"SELECT * FROM {view} ORDER BY order_id"
    assert Catalog(lake, spark).sql(query).collect() == Catalog(reference, spark).sql(
        query).collect()
