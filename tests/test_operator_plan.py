"""A derived table's operator plan, kept in its catalog entry, reads back as the plan bound.

Every kind of operator plan goes through JSON (the catalog entry) and comes back equal, so a
later run, in another process, runs exactly what the first one bound. Each view is planned
by the one operation its query is (`chronolake.sql.operations`), and every tier above
registers what runs it. No Spark: these views read tables only, and declaring and binding
them needs no JVM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _orders_and_rates import ORDERS_AND_RATES

from chronolake import Catalog
from chronolake.catalog import CatalogEntry
from chronolake.dagster.derived_assets import OPERATOR_OPS
from chronolake.errors import DefinitionError
from chronolake.runtime.figures import COMMON_FIGURES, RunFigures, run_figures
from chronolake.runtime.operators import OPERATORS
from chronolake.schema import ViewKind, ViewSpec
from chronolake.sql.deduplication import DeduplicationPlan
from chronolake.sql.interval import IntervalJoinPlan
from chronolake.sql.operations import DEDUPLICATION, OPERATIONS, WINDOW_AGGREGATE, operation_of
from chronolake.sql.operator_plan import StoredPlan, bind_plan
from chronolake.sql.temporal import TemporalJoinPlan
from chronolake.sql.window import WindowPlan
from chronolake.sql.window_rank import WindowRankPlan

VIEWS = {
    "enriched": (TemporalJoinPlan, """SELECT o.order_id, o.amount * r.rate AS usd
        FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
        ON o.currency = r.currency"""),
    "last_rate": (DeduplicationPlan, """SELECT currency, rate, currency_time FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rn
        FROM rates) WHERE rn = 1"""),
    "at_last_rate": (TemporalJoinPlan, """SELECT o.order_id, l.rate
        FROM orders AS o JOIN last_rate FOR SYSTEM_TIME AS OF o.order_time AS l
        ON o.currency = l.currency"""),
    "hourly": (WindowPlan, """SELECT window_start, window_end, currency, SUM(amount) AS amount
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
        GROUP BY window_start, window_end, currency"""),
    "top_order": (WindowRankPlan, """SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
          ORDER BY amount DESC) AS rownum
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' HOUR)))
        WHERE rownum <= 2"""),
    "shipped_soon": (IntervalJoinPlan, """SELECT p.order_id, s.carrier FROM payments AS p
        LEFT JOIN shipments AS s ON p.order_id = s.order_id
        AND s.ship_time BETWEEN p.pay_time AND p.pay_time + INTERVAL '1' DAY"""),
}
APPEND_ONLY = """
CREATE TABLE payments (order_id BIGINT, paid BIGINT, pay_time TIMESTAMP(3),
  WATERMARK FOR pay_time AS pay_time) WITH ('path' = 'payments');
CREATE TABLE shipments (order_id BIGINT, carrier STRING, ship_time TIMESTAMP(3),
  WATERMARK FOR ship_time AS ship_time) WITH ('path' = 'shipments');
"""
PLAIN_VIEW = "CREATE VIEW big_orders AS SELECT order_id, amount FROM orders WHERE amount > 10;"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    lake = Catalog(Path(tmp_path_factory.mktemp("plans")))
    lake.declare(ORDERS_AND_RATES + APPEND_ONLY + PLAIN_VIEW + "".join(
        f"CREATE VIEW {name} AS {query};\n" for name, (_, query) in VIEWS.items()
    ))
    return lake


@pytest.mark.parametrize("name", VIEWS)
def test_every_kind_of_plan_is_bound_by_its_operation_and_reads_back_as_bound(
    catalog: Catalog, name: str
) -> None:
    view = catalog.spec(name)
    assert isinstance(view, ViewSpec)
    operation = operation_of(view)  # as its entry records it, and as its query says
    assert operation_of(view, recorded=False) is operation and view.view_kind is operation.kind
    assert operation.plan_type is VIEWS[name][0]
    stored = catalog.operator_plan(view)
    assert isinstance(stored.plan, VIEWS[name][0])
    assert stored.plan == bind_plan(view, catalog.operator_inputs(view.query))
    catalog.keep_plan(view, stored)
    kept = Catalog(catalog.root).entry(name).plan
    assert kept == stored and type(kept.plan) is type(stored.plan)
    assert StoredPlan.model_validate_json(stored.model_dump_json()) == stored


def test_a_plan_records_every_registration_it_read_through_views(catalog: Catalog) -> None:
    """A registration changed anywhere under the view (here: the deduplication the join
    reads) makes the plan bound anew; one the view does not read does not."""
    view = catalog.spec("at_last_rate")
    assert isinstance(view, ViewSpec)
    stored = catalog.operator_plan(view)
    assert set(stored.bound_against) == {"orders", "last_rate", "rates"}
    specs = catalog.specs()
    assert stored.holds_for(specs)
    renamed = specs["last_rate"].model_copy(update={"primary_key": ("rate",)})
    assert not stored.holds_for({**specs, "last_rate": renamed})
    assert stored.holds_for({**specs, "hourly": specs["enriched"]})


def test_a_kept_plan_that_no_longer_loads_never_keeps_the_view_from_loading(
    catalog: Catalog,
) -> None:
    """A plan another version kept, whose specs today's validators refuse, is dropped on load
    (the next run binds anew); the view's registration loads as before."""
    view = catalog.spec("enriched")
    assert isinstance(view, ViewSpec)
    catalog.keep_plan(view, catalog.operator_plan(view))
    entry = json.loads(catalog.entry("enriched").model_dump_json())
    entry["plan"]["plan"]["probe"]["columns"][0]["type"] = "NOPE_TYPE"
    loaded = CatalogEntry.model_validate_json(json.dumps(entry))
    assert loaded.plan is None and loaded.spec == view


def test_a_plain_view_is_refused_a_plan_naming_every_operation(catalog: Catalog) -> None:
    view = catalog.spec("big_orders")
    assert isinstance(view, ViewSpec) and view.view_kind is ViewKind.PLAIN
    with pytest.raises(DefinitionError, match="none of .*an interval join or a history"):
        bind_plan(view, catalog.specs())


def test_every_plan_type_has_an_operator_and_every_operated_kind_a_dagster_op() -> None:
    operated = [operation for operation in OPERATIONS if operation.planner is not None]
    assert set(OPERATORS) == {operation.plan_type for operation in operated}
    assert set(OPERATOR_OPS) == {operation.kind for operation in operated}
    assert {operation.kind for operation in OPERATIONS} == set(ViewKind)


def test_each_operation_is_registered_once_with_a_one_line_summary() -> None:
    assert len({operation.name for operation in OPERATIONS}) == len(OPERATIONS)
    assert len({operation.plan_type for operation in OPERATIONS}) == len(OPERATIONS)
    assert all(operation.summary and "\n" not in operation.summary for operation in OPERATIONS)


def test_every_figure_is_counted_by_every_run_or_registered_with_an_operation() -> None:
    registered = {figure for operation in OPERATIONS for figure in operation.figures}
    assert COMMON_FIGURES | registered == set(RunFigures.__annotations__)
    assert not COMMON_FIGURES & registered


def test_a_run_counting_a_figure_its_operation_does_not_register_is_refused() -> None:
    """A deduplication has no windows: an operator bug that counted them stops the run."""
    assert run_figures({"rows_in": 4, "outdated_rows": 1}, DEDUPLICATION)["outdated_rows"] == 1
    with pytest.raises(ValueError, match="deduplication counted figures .*: windows_fired"):
        run_figures({"rows_in": 4, "windows_fired": 1}, DEDUPLICATION)
    assert run_figures({"windows_fired": 1}, WINDOW_AGGREGATE) == {"windows_fired": 1}
