"""One registration per operation: a view is recognized by the first one that fits, binds
its plan type, and each tier above registers what runs it (no JVM: nothing here runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _orders_and_rates import ORDERS_AND_RATES

from chronolake import Catalog
from chronolake.dagster.derived_assets import OPERATOR_OPS
from chronolake.errors import DefinitionError
from chronolake.runtime.operators import OPERATORS
from chronolake.schema import ViewKind, ViewSpec
from chronolake.sql import operations
from chronolake.sql.operations import OPERATIONS, operation_of
from chronolake.sql.operator_plan import bind_plan

VIEWS = {
    "enriched": (operations.TEMPORAL_JOIN, """SELECT o.order_id, o.amount * r.rate AS usd
        FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
        ON o.currency = r.currency"""),
    "last_rate": (operations.DEDUPLICATION, """SELECT currency, rate, currency_time FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rn
        FROM rates) WHERE rn = 1"""),
    "hourly": (operations.WINDOW_AGGREGATE, """SELECT window_start, window_end, currency,
        SUM(amount) AS amount
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
        GROUP BY window_start, window_end, currency"""),
    "top_order": (operations.WINDOW_TOP_N, """SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
          ORDER BY amount DESC) AS rownum
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' HOUR)))
        WHERE rownum <= 2"""),
    "shipped_soon": (operations.INTERVAL_JOIN, """SELECT p.order_id, s.carrier
        FROM payments AS p JOIN shipments AS s ON p.order_id = s.order_id
        AND s.ship_time BETWEEN p.pay_time AND p.pay_time + INTERVAL '1' DAY"""),
    "big_orders": (operations.PLAIN, "SELECT order_id, amount FROM orders WHERE amount > 10"),
}
APPEND_ONLY = """
CREATE TABLE payments (order_id BIGINT, paid BIGINT, pay_time TIMESTAMP(3),
  WATERMARK FOR pay_time AS pay_time) WITH ('path' = 'payments');
CREATE TABLE shipments (order_id BIGINT, carrier STRING, ship_time TIMESTAMP(3),
  WATERMARK FOR ship_time AS ship_time) WITH ('path' = 'shipments');
"""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    lake = Catalog(Path(tmp_path_factory.mktemp("operations")))
    lake.declare(ORDERS_AND_RATES + APPEND_ONLY + "".join(
        f"CREATE VIEW {name} AS {query};\n" for name, (_, query) in VIEWS.items()
    ))
    return lake


@pytest.mark.parametrize("name", VIEWS)
def test_a_view_is_run_by_the_operation_its_query_is_and_records_its_kind(
    catalog: Catalog, name: str
) -> None:
    view = catalog.spec(name)
    assert isinstance(view, ViewSpec)
    expected = VIEWS[name][0]
    assert operation_of(view) is expected
    assert operation_of(view, recorded=False) is expected
    assert view.view_kind is expected.kind


@pytest.mark.parametrize("name", [name for name, (op, _) in VIEWS.items() if op.planner])
def test_an_operated_view_binds_the_plan_type_of_its_operation(catalog: Catalog, name: str
                                                               ) -> None:
    view = catalog.spec(name)
    assert isinstance(view, ViewSpec)
    plan = bind_plan(view, catalog.operator_inputs(view.query))
    assert type(plan) is VIEWS[name][0].plan_type


def test_a_plain_view_is_refused_a_plan_naming_every_operation(catalog: Catalog) -> None:
    view = catalog.spec("big_orders")
    assert isinstance(view, ViewSpec)
    with pytest.raises(DefinitionError, match="none of .*deduplication or an interval join"):
        bind_plan(view, catalog.specs())


def test_every_plan_type_has_an_operator_and_every_operated_kind_a_dagster_op() -> None:
    operated = [operation for operation in OPERATIONS if operation.planner is not None]
    assert set(OPERATORS) == {operation.plan_type for operation in operated}
    assert set(OPERATOR_OPS) == {operation.kind for operation in operated}
    assert {operation.kind for operation in OPERATIONS} == set(ViewKind)


def test_each_operation_is_registered_once_with_a_one_line_summary() -> None:
    assert len({operation.name for operation in OPERATIONS}) == len(OPERATIONS)
    assert len({op.plan_type for op in OPERATIONS}) == len(OPERATIONS)
    assert all(operation.summary and "\n" not in operation.summary for operation in OPERATIONS)
