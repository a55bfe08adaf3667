"""Full refresh: rebuild a derived table from scratch, replacing what it holds.

A full refresh is the fix for what an incremental run cannot apply: a source
rewritten by OVERWRITE, versions vacuumed since the checkpoint, a changed
column type or a changed view. It is one run of the ordinary exactly-once
protocol (`chronolake.catalog.checkpoint`) whose intent says "from scratch":
every input is read from the beginning (from its last OVERWRITE; from a
snapshot of its latest version when older changes are gone), without state,
and output, late rows and history are replaced, one Delta overwrite commit
each, so readers see the old rows or the new ones, never a mix. Killed midway,
the next run (incremental or not) finishes the refresh first.

Over the same commits it produces the rows the incremental runs did, as long
as no build-side change arrived after the probe rows it would have joined were
emitted (incremental results are never revised; a refresh sees every change).
"""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.clock import Clock
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunResult


def full_refresh(catalog: Catalog, name: str, *, clock: Clock | None = None) -> RunResult:
    """Rebuild derived table `name` from all of its inputs' commits, replacing its output.

    Takes the table's run lock like any run (`RunError` if another run holds
    it); raises `SourceError` before writing anything when an input cannot be
    read.

    Example:
        >>> result = full_refresh(Catalog("demo-lake"), "orders_enriched")
        >>> result.message
        'run 4 rebuilt the table from scratch with 1339 rows'
    """
    return DerivedTable(catalog, name, clock=clock).run(full_refresh=True)
