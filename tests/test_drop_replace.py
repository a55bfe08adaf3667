"""Removing and replacing tables and views: DROP TABLE / VIEW [IF EXISTS], CREATE OR REPLACE.

Dropping a view removes its registration and everything chronolake wrote for it (output
table, late rows, state and checkpoints), never during a run and never half-way for good:
a crashed drop is finished by dropping again. Dropping a table leaves the user's Delta data
alone. A name other views read cannot be dropped or replaced; a registration that no longer
loads can always be dropped. Declaring the same thing again changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from _orders_and_rates import ORDERS_AND_RATES
from deltalake import DeltaTable
from deltatables import table_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, materialize_view
from chronolake.catalog import Dropped
from chronolake.errors import (
    DefinitionError,
    NameTakenError,
    RunError,
    RunLockedError,
    UnknownNameError,
)
from chronolake.faults import FAULT_ENV, FaultPoint
from chronolake.lake import table_row_count
from chronolake.lake.layout import (
    CATALOG_ROOT,
    lock_dir,
    output_path,
    state_path,
    view_data_keys,
)
from chronolake.lake.lock import lease_name, run_lock
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus
from chronolake.schema import ViewSpec
from chronolake.sql.ddl import DropStatement, parse_statements

pytestmark = pytest.mark.spark

BASE = datetime(2026, 11, 2, 9, 0)
TABLES = ORDERS_AND_RATES
ENRICHED = """CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS usd
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency"""
ENRICHED_WITHOUT_USD = ENRICHED.replace(", o.amount * r.rate AS usd", "")
DDL = f"{TABLES}{ENRICHED};"


def _at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def _orders(*ids_at: tuple[int, float]) -> list[dict]:
    return [{"order_id": i, "currency": "EUR", "amount": 10, "order_time": _at(m)}
            for i, m in ids_at]


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """orders and rates on disk, `enriched` declared and run once: an order without an
    order time goes to the late rows, so the view has output, late rows and state."""
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 2, "currency_time": _at(0)}],
                                       [{"currency": "EUR", "rate": 3, "currency_time": _at(30)}]])
    orders = _orders((1, 5), (2, 10), (3, 40))
    timeless = {**orders[0], "order_id": 4, "order_time": None}
    write_commits(tmp_path / "orders", [[*orders, timeless]])
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DDL)
    assert materialize_view(catalog, "enriched").figures["late_rows"] == 1
    return catalog


def _chronolake(*args: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).with_name("chronolake")
    return subprocess.run([str(executable), *args], capture_output=True, text=True, timeout=300)


def _versions(root: Path) -> tuple[int, int]:
    return DeltaTable(str(root / "orders")).version(), DeltaTable(str(root / "rates")).version()


# --- DROP VIEW / DROP TABLE ---------------------------------------------------------------


@pytest.mark.lake_contract
@pytest.mark.slow
def test_dropping_a_view_removes_its_registration_output_late_rows_and_state(
    lake: Catalog,
) -> None:
    root = lake.root.path
    rows = table_row_count(output_path(root, "enriched"))
    assert all((root / key).exists() for key in view_data_keys("enriched"))
    sources = _versions(root)

    [(name, dropped)] = list(lake.run_script("DROP VIEW enriched"))

    assert name == "enriched" and isinstance(dropped, Dropped)
    assert dropped.describe() == (
        f"dropped view enriched: its output table ({rows} rows), late rows, state and "
        "checkpoints removed"
    )
    assert lake.names() == ["orders", "rates"]
    assert not any((root / key).exists() for key in view_data_keys("enriched"))
    assert not (lock_dir(root) / lease_name("enriched")).path.exists()
    assert sorted(p.name for p in (root / CATALOG_ROOT).iterdir()) == ["orders.json", "rates.json"]
    assert _versions(root) == sources  # the sources are untouched
    # The name is free: declared again, the view starts from scratch.
    lake.execute(ENRICHED)
    assert materialize_view(lake, "enriched").run == 1


@pytest.mark.slow
def test_a_table_is_dropped_without_touching_its_delta_data(lake: Catalog) -> None:
    lake.execute("DROP VIEW enriched")
    sources = _versions(lake.root.path)
    dropped = lake.drop("orders", kind="table")
    assert dropped.describe() == "dropped table orders (its Delta table is untouched)"
    assert lake.names() == ["rates"]
    assert _versions(lake.root.path) == sources
    assert table_rows(str(lake.root / "orders")).num_rows == 4


@pytest.mark.slow
def test_a_table_that_views_read_cannot_be_dropped_and_the_script_changes_nothing(
    lake: Catalog,
) -> None:
    lake.execute("CREATE VIEW big AS SELECT order_id FROM orders WHERE amount > 5")
    script = "CREATE TABLE extra (a INT) WITH ('path' = 'extra');\nDROP TABLE orders;"
    with pytest.raises(DefinitionError) as error:
        list(lake.run_script(script))
    assert str(error.value) == (
        "cannot drop table orders: views big, enriched read it; drop them first "
        "(DROP VIEW big; DROP VIEW enriched)"
    )
    assert "extra" not in lake.names()  # the whole script is checked before it runs
    with pytest.raises(DefinitionError, match=r"cannot drop table orders: views big, enriched"):
        lake.drop("orders")  # the same rule in Python
    # Dropped in order (in one script), they go.
    results = list(lake.run_script("DROP VIEW big; DROP VIEW enriched; DROP TABLE orders"))
    assert [name for name, _ in results] == ["big", "enriched", "orders"]
    assert lake.names() == ["rates"]


def test_drop_checks_the_name_and_its_kind(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare(DDL)
    with pytest.raises(UnknownNameError) as error:
        catalog.declare("DROP VIEW enriched_orders")
    assert str(error.value) == (
        "cannot drop view 'enriched_orders': no such view is registered; did you mean "
        "'enriched'? (DROP VIEW IF EXISTS enriched_orders does nothing when it is absent)"
    )
    with pytest.raises(DefinitionError, match=r"^DROP TABLE enriched: 'enriched' is a view, "
                                               r"not a table; remove it with DROP VIEW enriched$"):
        catalog.declare("DROP TABLE enriched")
    with pytest.raises(DefinitionError, match=r"'rates' is a table, not a view"):
        catalog.drop("rates", kind="view")
    with pytest.raises(DefinitionError, match="no such table or view is registered; registered: "
                                              "enriched, orders, rates"):
        catalog.drop("nothing_like_it")
    for refused, message in [
        ("DROP VIEW enriched, orders", r"drop one view per statement"),
        ("DROP VIEW enriched CASCADE", r"CASCADE in DROP VIEW is not supported"),
        ("DROP TEMPORARY VIEW enriched", r"TEMPORARY in DROP VIEW is not supported"),
        ("DROP FUNCTION f", r"DROP FUNCTION is not supported"),
    ]:
        with pytest.raises(DefinitionError, match=message):
            catalog.declare(refused)
    catalog.declare("DROP VIEW IF EXISTS nowhere; DROP TABLE IF EXISTS nowhere")
    assert catalog.drop("nowhere", if_exists=True).describe() == (
        "table or view nowhere does not exist: nothing dropped"
    )
    assert catalog.names() == ["enriched", "orders", "rates"]


def test_a_drop_in_a_script_frees_the_name_for_what_follows() -> None:
    [table] = parse_statements(TABLES.split(";")[0])
    statements = parse_statements(
        "DROP TABLE orders; CREATE VIEW orders AS SELECT 1 AS a FROM rates",
        catalog={"orders": table, "rates": parse_statements(TABLES)[1]},  # type: ignore[dict-item]
    )
    assert statements[0] == DropStatement(kind="table", name="orders")
    assert isinstance(statements[1], ViewSpec)
    with pytest.raises(UnknownNameError, match="view 'v' reads unknown table 'orders'"):
        parse_statements("DROP TABLE orders; CREATE VIEW v AS SELECT * FROM orders",
                         catalog={"orders": table})


@pytest.mark.slow
def test_a_view_is_not_dropped_while_it_runs(lake: Catalog) -> None:
    refused = pytest.raises(RunLockedError, match=r"cannot drop view 'enriched' now: a run of "
                                            r"'enriched' is in progress; nothing was changed")
    with run_lock(lock_dir(lake.root), "enriched"), refused:  # the lock is what a run holds
        lake.drop("enriched")
    assert "enriched" in lake.names()
    assert all((lake.root.path / key).exists() for key in view_data_keys("enriched"))


@pytest.mark.slow
def test_a_dropped_plain_view_loses_its_materialized_rows(lake: Catalog) -> None:
    lake.execute("CREATE VIEW big AS SELECT order_id FROM orders WHERE amount > 5")
    materialize_view(lake, "big")
    assert output_path(lake.root, "big").path.exists()
    assert lake.drop("big").describe() == "dropped view big: its output table (4 rows) removed"
    assert not output_path(lake.root, "big").path.exists()


# --- CREATE again, IF NOT EXISTS, OR REPLACE --------------------------------------------


@pytest.mark.slow
def test_declaring_the_same_script_again_keeps_everything(lake: Catalog) -> None:
    checkpoints = sorted(state_path(lake.root, "enriched").path.iterdir())
    assert [spec.name for spec in lake.declare(DDL)] == ["orders", "rates", "enriched"]
    lake.declare(DDL.replace("CREATE VIEW", "CREATE OR REPLACE VIEW"))
    assert sorted(state_path(lake.root, "enriched").path.iterdir()) == checkpoints
    assert materialize_view(lake, "enriched").status is RunStatus.UP_TO_DATE


@pytest.mark.slow
def test_a_view_stored_by_an_older_chronolake_is_refreshed_not_reset(lake: Catalog) -> None:
    """Same query, other derived fields (an older version's spec): re-declaring the script
    (Dagster does at every load) refreshes the entry and keeps the view's output and state."""
    entry_file = lake.root.path / CATALOG_ROOT / "enriched.json"
    stored = json.loads(entry_file.read_text())
    stored["view"]["primary_key"] = []  # what an older chronolake might have derived
    entry_file.write_text(json.dumps(stored))
    checkpoints = sorted(state_path(lake.root, "enriched").path.iterdir())
    lake.declare(DDL)
    assert json.loads(entry_file.read_text())["view"]["primary_key"] == ["order_id"]
    assert sorted(state_path(lake.root, "enriched").path.iterdir()) == checkpoints


@pytest.mark.slow
def test_a_run_that_loaded_a_view_since_replaced_writes_nothing(lake: Catalog) -> None:
    started = DerivedTable(lake, "enriched")  # loaded, then the view changes under it
    lake.execute(ENRICHED_WITHOUT_USD.replace("CREATE VIEW", "CREATE OR REPLACE VIEW"))
    with pytest.raises(RunError, match="dropped or replaced while this run was starting"):
        started.run()
    assert not output_path(lake.root, "enriched").path.exists()  # the replace's reset stands
    assert materialize_view(lake, "enriched").run == 1  # the new definition, from scratch


def test_a_name_that_is_not_a_plain_path_component_is_refused(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    for name in ("`../../orders`", "`.hidden`", "`a/b`"):
        with pytest.raises(DefinitionError, match="cannot name a table or view"):
            catalog.execute(f"CREATE TABLE {name} (x BIGINT) WITH ('path' = 'x')")
    assert not (tmp_path / CATALOG_ROOT).exists() or not list((tmp_path / CATALOG_ROOT).iterdir())


@pytest.mark.slow
def test_create_of_a_taken_name_is_refused_unless_it_says_if_not_exists_or_or_replace(
    lake: Catalog,
) -> None:
    with pytest.raises(NameTakenError) as error:
        lake.execute(ENRICHED_WITHOUT_USD)
    assert str(error.value) == (
        "view 'enriched' already exists with a different definition; use CREATE OR REPLACE "
        "VIEW (replace=True in Python), which resets its output and state, or DROP VIEW "
        "enriched first"
    )
    with pytest.raises(NameTakenError, match=r"^'orders' is already a table; drop it first "
                                               r"\(DROP TABLE orders\)$"):
        lake.execute("CREATE VIEW orders AS SELECT currency FROM rates")
    with pytest.raises(DefinitionError, match=r"table 'rates' already exists with a different "
                                               r"definition; use CREATE OR REPLACE TABLE"):
        lake.execute(TABLES.split(";")[1].replace("rate BIGINT", "rate INT"))
    kept = lake.spec("enriched")
    lake.execute(ENRICHED_WITHOUT_USD.replace("CREATE VIEW", "CREATE VIEW IF NOT EXISTS"))
    assert lake.spec("enriched") == kept
    assert materialize_view(lake, "enriched").status is RunStatus.UP_TO_DATE


@pytest.mark.lake_contract
@pytest.mark.slow
def test_create_or_replace_view_resets_its_output_and_state(lake: Catalog) -> None:
    rows = table_row_count(output_path(lake.root, "enriched"))
    replace = ENRICHED_WITHOUT_USD.replace("CREATE VIEW", "CREATE OR REPLACE VIEW")

    [(_, replaced)] = list(lake.run_script(replace))

    assert isinstance(replaced, Dropped) and replaced.replaced_by == lake.spec("enriched")
    assert replaced.describe() == (
        f"replaced view enriched: its output table ({rows} rows), late rows, state and "
        "checkpoints removed; its next run starts from scratch"
    )
    assert not any((lake.root.path / key).exists() for key in view_data_keys("enriched"))
    result = materialize_view(lake, "enriched")
    assert result.run == 1 and result.status is RunStatus.COMMITTED
    assert "usd" not in lake.table("enriched").columns


@pytest.mark.slow
def test_a_view_other_views_read_is_not_replaced_by_another_definition(lake: Catalog) -> None:
    lake.execute("CREATE VIEW big AS SELECT order_id FROM enriched WHERE usd > 5")
    with pytest.raises(DefinitionError) as error:
        lake.execute(ENRICHED_WITHOUT_USD.replace("CREATE VIEW", "CREATE OR REPLACE VIEW"))
    assert str(error.value) == (
        "cannot replace view enriched with a different definition: view big reads it, with "
        "output and state built on the current one; drop it first (DROP VIEW big), replace "
        "enriched, then create it again"
    )
    with pytest.raises(DefinitionError, match=r"cannot drop view enriched: view big reads it"):
        lake.execute("DROP VIEW enriched")
    assert all((lake.root.path / key).exists() for key in view_data_keys("enriched"))


def test_python_register_follows_the_same_rules(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare(DDL)
    other = catalog.spec("enriched").model_copy(update={"query": "SELECT order_id FROM orders"})
    assert isinstance(other, ViewSpec)
    assert catalog.register(catalog.spec("enriched")) == catalog.spec("enriched")  # a no-op
    with pytest.raises(DefinitionError, match="already exists with a different definition"):
        catalog.register(other)
    state_path(tmp_path, "enriched").path.mkdir(parents=True)  # stands for a run's state
    catalog.register(other, replace=True)
    assert catalog.spec("enriched") == other
    assert not state_path(tmp_path, "enriched").path.exists()


def test_create_or_replace_table_keeps_its_data_and_is_refused_while_views_read_it(
    tmp_path: Path,
) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare(DDL)
    wider = TABLES.split(";")[1].replace("CREATE TABLE", "CREATE OR REPLACE TABLE")
    wider = wider.replace("rate BIGINT", "rate DECIMAL(38, 10)")
    with pytest.raises(DefinitionError, match=r"cannot replace table rates with a different "
                                               r"definition: view enriched reads it"):
        catalog.declare(wider)
    catalog.declare("DROP VIEW enriched")
    [(_, replaced)] = list(catalog.run_script(wider))
    assert isinstance(replaced, Dropped)
    assert replaced.describe() == "replaced table rates (its Delta table is untouched)"
    assert catalog.spec("rates").columns[1].type == "DECIMAL(38, 10)"  # type: ignore[union-attr]


# --- broken registrations and crashes -----------------------------------------------------


@pytest.mark.slow
def test_a_registration_that_no_longer_loads_can_always_be_dropped(lake: Catalog) -> None:
    entry = lake.root.path / CATALOG_ROOT / "enriched.json"
    stored = json.loads(entry.read_text())
    stored["view"]["primary_key"] = 42  # what an older or newer chronolake might have written
    entry.write_text(json.dumps(stored))
    with pytest.raises(DefinitionError, match=r"the registration of 'enriched' .* no longer "
                                               r"loads: .*drop it with DROP VIEW enriched"):
        lake.names()
    with pytest.raises(DefinitionError, match=r"registration no longer loads; use CREATE OR "
                                               r"REPLACE VIEW"):
        lake.execute(ENRICHED)

    [(_, dropped)] = list(lake.run_script("DROP VIEW enriched"))

    assert isinstance(dropped, Dropped) and dropped.describe().startswith(
        "dropped view enriched: its output table (")
    assert lake.names() == ["orders", "rates"]
    assert not any((lake.root.path / key).exists() for key in view_data_keys("enriched"))


def test_an_entry_that_is_not_even_json_can_be_dropped(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare(DDL)
    (tmp_path / CATALOG_ROOT / "enriched.json").write_text("{ truncated")
    [(_, dropped)] = list(catalog.run_script("DROP TABLE enriched"))  # any kind: it can't tell
    assert isinstance(dropped, Dropped) and dropped.describe() == (
        "dropped registration enriched (it had never run: no data to remove)")
    assert catalog.names() == ["orders", "rates"]


def test_a_view_whose_source_is_gone_can_be_dropped(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare(DDL)
    (tmp_path / CATALOG_ROOT / "rates.json").unlink()  # removed behind chronolake's back
    catalog.declare("DROP VIEW enriched")
    assert catalog.names() == ["orders"]


@pytest.mark.slow
def test_a_drop_killed_halfway_is_finished_by_dropping_or_declaring_again(lake: Catalog) -> None:
    root = lake.root.path

    def killed_drop() -> None:
        code = f"from chronolake.catalog import Catalog; Catalog({str(root)!r}).drop('enriched')"
        env = {**os.environ, FAULT_ENV: FaultPoint.DROP_AFTER_OUTPUT.value}
        done = subprocess.run([sys.executable, "-c", code], env=env, timeout=300, check=False)
        assert done.returncode == -9  # SIGKILL, halfway through
        assert "enriched" not in lake.names()  # unregistered first: nothing can run it
        assert not output_path(root, "enriched").path.exists()
        assert state_path(root, "enriched").path.exists()  # not removed yet

    killed_drop()
    [(_, dropped)] = list(lake.run_script("DROP VIEW enriched"))  # finishes the drop
    assert isinstance(dropped, Dropped) and dropped.describe() == (
        "dropped view enriched: late rows, state and checkpoints removed")
    assert not any((root / key).exists() for key in view_data_keys("enriched"))
    assert sorted(p.name for p in (root / CATALOG_ROOT).iterdir()) == ["orders.json", "rates.json"]

    lake.execute(ENRICHED)
    materialize_view(lake, "enriched")
    killed_drop()
    lake.execute(ENRICHED)  # declared anew: it inherits nothing of the half-dropped one
    assert not any((root / key).exists() for key in view_data_keys("enriched"))
    assert materialize_view(lake, "enriched").run == 1


# --- the CLI --------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_drop_view_says_what_it_removed_and_fails_with_exit_1(lake: Catalog) -> None:
    root = str(lake.root)
    script = lake.root.path / "drop.sql"
    script.write_text("DROP TABLE orders;")
    refused = _chronolake("sql", "--lake", root, "-f", str(script))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: cannot drop table orders: view enriched reads it; drop it first "
        "(DROP VIEW enriched)")

    script.write_text("DROP VIEW enriched;\nDROP VIEW IF EXISTS enriched;")
    done = _chronolake("sql", "--lake", root, "-f", str(script))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("-- dropped view enriched: its output table (")
    assert lines[0].endswith(" rows), late rows, state and checkpoints removed")
    assert lines[1] == "-- view enriched does not exist: nothing dropped"
    assert done.stdout == ""

    script.write_text("DROP VIEW enriched;")
    again = _chronolake("sql", "--lake", root, "-f", str(script))
    assert again.returncode == 1
    assert "no such view is registered" in again.stderr
