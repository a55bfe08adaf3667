"""Materializing any view: incrementally when it joins FOR SYSTEM_TIME AS OF, aggregates windows
or deduplicates, else by recomputing it."""

from __future__ import annotations

from contextlib import suppress

from chronolake.catalog import Catalog
from chronolake.clock import Clock
from chronolake.errors import DefinitionError
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.last_error import clear_failure, record_failure
from chronolake.runtime.result import RunResult, RunStatus
from chronolake.runtime.source_checks import OverwritePolicy
from chronolake.schema import ViewSpec
from chronolake.sql.view_kinds import is_derived


def materialize_view(
    catalog: Catalog,
    name: str,
    *,
    clock: Clock | None = None,
    full_refresh: bool = False,
    on_source_overwrite: OverwritePolicy = OverwritePolicy.FAIL,
) -> RunResult:
    """Bring the view's Delta table under `_chronolake/views/` up to date with its inputs.

    `full_refresh` rebuilds an incremental view from scratch (a recomputed view is
    rebuilt every time anyway); `on_source_overwrite` says what an incremental run
    does when a source was rewritten by OVERWRITE since its checkpoint.
    """
    view = catalog.spec(name)
    if not isinstance(view, ViewSpec):
        raise DefinitionError(
            f"{name!r} is a table: tables are observed, not materialized; materialize a view"
        )
    try:
        result = _run(catalog, view, clock, full_refresh, on_source_overwrite)
    except Exception as error:  # kept for `chronolake status`, then raised as it was
        with suppress(OSError):  # the run's own error matters more than this record's
            record_failure(catalog.root, view.name, error)
        raise
    clear_failure(catalog.root, view.name)
    return result


def _run(
    catalog: Catalog, view: ViewSpec, clock: Clock | None, full_refresh: bool,
    on_source_overwrite: OverwritePolicy,
) -> RunResult:
    if is_derived(view):
        derived = DerivedTable(
            catalog, view.name, clock=clock, on_source_overwrite=on_source_overwrite
        )
        return derived.run(full_refresh=full_refresh)
    frame = catalog.table(view.name).localCheckpoint()
    version = catalog.backend.overwrite_dataframe(frame, output_path(catalog.root, view.name))
    rows = frame.count()
    return RunResult(
        table=view.name, run=version, status=RunStatus.COMMITTED,
        message=f"recomputed {rows} rows", figures={"rows_out": rows}, output_version=version,
    )
