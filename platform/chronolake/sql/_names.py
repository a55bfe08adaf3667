"""Names of tables in Flink SQL ASTs, and lookups in a catalog of specs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from sqlglot import exp

from chronolake.errors import UnknownNameError

SpecT = TypeVar("SpecT")


def relation_name(table: exp.Table) -> str:
    """`db.orders` for a (possibly qualified) table reference, without quotes."""
    return ".".join(part.name for part in table.parts)


def lookup(catalog: Mapping[str, SpecT], name: str, *, reader: str) -> SpecT:
    """The spec registered as `name` (exact, else case-insensitive, as Spark resolves names)."""
    if name in catalog:
        return catalog[name]
    by_lower = {key.lower(): spec for key, spec in catalog.items()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    known = ", ".join(sorted(catalog)) or "none"
    msg = (
        f"{reader} reads unknown table {name!r}; declare it first (CREATE TABLE {name} ...) "
        f"or pass it in catalog=; known: {known}"
    )
    raise UnknownNameError(msg)
