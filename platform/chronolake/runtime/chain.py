"""The derived tables a view reads, directly or through other views (its pipeline upstream),
and those that read a table (its pipeline downstream)."""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.catalog.inputs import registrations_read
from chronolake.errors import SourceError
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import ViewSpec
from chronolake.sql.query import referenced_tables
from chronolake.sql.view_kinds import is_derived


def upstream_derived(catalog: Catalog, name: str) -> list[str]:
    """The derived tables `name` reads, transitively, upstream first (dependency order)."""
    specs = catalog.specs()
    ordered: list[str] = []

    def visit(current: str) -> None:
        spec = specs[current.lower()]
        if not isinstance(spec, ViewSpec):
            return
        for read in referenced_tables(spec.query):
            visit(read.lower())
            if is_derived(specs[read.lower()]) and read.lower() not in ordered:
                ordered.append(read.lower())

    visit(name)
    return ordered


def downstream_derived(catalog: Catalog, table: str) -> list[str]:
    """The derived tables that read `table`, directly or through other views, each after the
    derived tables it reads (dependency order)."""
    specs = catalog.specs()
    reading = sorted(
        name for name, spec in specs.items()
        if isinstance(spec, ViewSpec) and is_derived(spec)
        and table.lower() in registrations_read(spec.query, specs)
    )
    ordered: list[str] = []
    for name in reading:
        ordered += [
            view for view in (*upstream_derived(catalog, name), name)
            if view in reading and view not in ordered
        ]
    return ordered


def behind(catalog: Catalog, names: list[str]) -> list[str]:
    """Those of `names` whose next run has work: new commits in an input, or never run."""
    late = []
    for name in names:
        try:
            due = DerivedTable(catalog, name).prepare() is not None
        except SourceError:  # an input that has never run: so is this one, in effect
            due = True
        if due:
            late.append(name)
    return late
