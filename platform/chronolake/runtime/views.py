"""Materializing any view: incrementally when it has a temporal join, else by recomputing it."""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.clock import Clock
from chronolake.errors import DefinitionError
from chronolake.runtime.derived import DerivedTable, output_path
from chronolake.runtime.result import RunResult, RunStatus
from chronolake.schema import ViewSpec
from chronolake.sql.query import temporal_joins


def is_incremental(view: ViewSpec) -> bool:
    """Views with a temporal join run incrementally; others are recomputed as a whole."""
    return bool(temporal_joins(view.query))


def materialize_view(catalog: Catalog, name: str, *, clock: Clock | None = None) -> RunResult:
    """Bring the view's Delta table under `_chronolake/views/` up to date with its inputs."""
    view = catalog.spec(name)
    if not isinstance(view, ViewSpec):
        raise DefinitionError(
            f"{name!r} is a table: tables are observed, not materialized; materialize a view"
        )
    if is_incremental(view):
        return DerivedTable(catalog, name, clock=clock).run()
    frame = catalog.table(name).localCheckpoint()
    version = catalog.backend.overwrite_dataframe(frame, output_path(catalog.root, name))
    rows = frame.count()
    return RunResult(
        table=view.name, run=version, status=RunStatus.COMMITTED,
        message=f"recomputed {rows} rows", figures={"rows_out": rows}, output_version=version,
    )
