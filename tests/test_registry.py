"""The registry: entries cached by the tag of their documents, another process's write seen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chronolake.catalog import Registry
from chronolake.errors import DefinitionError, UnknownNameError
from chronolake.location import Location
from chronolake.schema import TableSpec
from chronolake.sql.ddl import parse_statements

ROOT = Path(__file__).resolve().parent.parent


def _table(ddl: str) -> TableSpec:
    [spec] = parse_statements(ddl, catalog={})
    assert isinstance(spec, TableSpec)
    return spec


ORDERS = "CREATE TABLE orders (id BIGINT, amount INT) WITH ('path' = 'orders')"
WIDER = "CREATE TABLE orders (id BIGINT, amount INT, note STRING) WITH ('path' = 'orders')"


def test_an_unchanged_entry_is_loaded_once(tmp_path: Path) -> None:
    registry = Registry(Location(str(tmp_path)))
    registry.write(_table(ORDERS))
    first = registry.entry("orders")
    assert registry.entry("ORDERS") is first
    assert registry.specs()["orders"] is first.spec


def test_another_process_registration_is_seen_by_a_registry_that_loaded_the_old_one(
    tmp_path: Path,
) -> None:
    """The Dagster code server keeps its registry while the CLI re-declares a table."""
    registry = Registry(Location(str(tmp_path)))
    registry.write(_table(ORDERS))
    assert [c.name for c in registry.entry("orders").spec.columns] == ["id", "amount"]
    script = (
        "import sys; from chronolake.catalog import Registry; from chronolake.location import "
        "Location; from chronolake.sql.ddl import parse_statements; "
        "[spec] = parse_statements(sys.argv[2], catalog={}); "
        "Registry(Location(sys.argv[1])).write(spec)"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path), WIDER], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "platform")}, timeout=120)
    assert [c.name for c in registry.specs()["orders"].columns] == ["id", "amount", "note"]


def test_an_entry_edited_by_hand_is_refused_naming_it_then_loads_once_fixed(
    tmp_path: Path,
) -> None:
    registry = Registry(Location(str(tmp_path)))
    registry.write(_table(ORDERS))
    document = tmp_path / "_chronolake" / "catalog" / "orders.json"
    good = document.read_text()
    document.write_text(good.replace('"kind": "table"', '"kind": "tabel"'))
    with pytest.raises(DefinitionError, match=r"registration of 'orders'.*DROP VIEW \(or TABLE\)"):
        registry.entries()
    assert registry.loadable() == ({}, ["orders"])
    document.write_text(good)
    assert list(registry.entries()) == ["orders"]


def test_an_unknown_name_lists_the_registered_ones(tmp_path: Path) -> None:
    registry = Registry(Location(str(tmp_path)))
    registry.write(_table(ORDERS))
    with pytest.raises(UnknownNameError, match="unknown table or view 'rates'; registered: orders"):
        registry.entry("rates")
