"""What a restatement of a source's time range goes through: its hops and what each direct
consumer reads.

A restatement of [t0, t1) of source `TABLE` (docs/design.md, "Restatement") restates every
derived table downstream of it, each after the derived tables it reads, so that each hop
reads what the previous one changed. The first hops, the derived tables that read the source
itself, each read its changes since the version their last run consumed; the rewrite check
(`chronolake.runtime.restate_check`) accepts those changes for each of them, or refuses the
restatement before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from chronolake.catalog import Catalog
from chronolake.catalog.checkpoint import CheckpointStore, RestatedRange
from chronolake.errors import DefinitionError, RunError, SourceError
from chronolake.location import Location
from chronolake.runtime.chain import downstream_derived
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_check import AcceptedRewrite, check_rewrite, restatable_source
from chronolake.runtime.restate_run import restated_region
from chronolake.runtime.result import RunResult


@dataclass(frozen=True, slots=True)
class RestatementPlan:
    """The hops of a restatement of [`start_ms`, `end_ms`) of source `table`."""

    table: str
    start_ms: int
    end_ms: int
    end_version: int
    """The source's latest version when the restatement was planned: every consumer reads up
    to it, so all of them restate the same rewrite."""
    views: tuple[str, ...]
    """Every derived table downstream of `table`, each after the derived tables it reads."""
    consumers: dict[str, AcceptedRewrite]
    """The derived tables that read `table` itself and have run, with the source's versions
    each reads (after the one its last run consumed, up to `end_version`) and what changed in
    them. One that has not run yet is not here: its first run reads the rewritten source."""


def plan_restatement(
    catalog: Catalog, table: str, *, start_ms: int, end_ms: int
) -> RestatementPlan:
    """The hops of restating [`start_ms`, `end_ms`) (epoch milliseconds) of source `table`,
    with the rewrite checked for every direct consumer that has run.

    Raises what `check_rewrite` raises (`RestateRangeError` for a change outside the range,
    naming its times), `DefinitionError` for a hop that has run in processing time, and
    `RunError` for a hop whose last run was interrupted, before anything is written.

    Example:
        >>> plan = plan_restatement(catalog, "orders", start_ms=t0, end_ms=t1)
        >>> plan.views, plan.consumers["orders_enriched"].after_version
        (('orders_enriched', 'revenue_per_minute'), 12)
    """
    spec = restatable_source(catalog, table, start_ms=start_ms, end_ms=end_ms)
    name = spec.name.lower()
    views = tuple(downstream_derived(catalog, name))
    end_version = catalog.backend.latest_version(catalog.table_path(spec))
    checked: dict[int, AcceptedRewrite] = {}  # consumers at the same version share one check
    consumers: dict[str, AcceptedRewrite] = {}
    for view in views:
        try:
            derived = DerivedTable(catalog, view)
        except SourceError:
            if CheckpointStore.of(catalog.root, view).latest().run == 0:
                continue  # it reads a derived table that has not run, and has not run either
            raise
        interrupted = derived.interrupted_run()
        same = RestatedRange(source=name, start_ms=start_ms, end_ms=end_ms)
        if interrupted is not None and interrupted.restate != same:
            # what it consumed is not what its next run starts from
            raise _interrupted_error(spec.name, view, interrupted.run,
                                     derived.store.storage.location)
        consumed = derived.consumed()
        if consumed and derived.operator.depends_on_processing_time:
            raise _processing_time_error(spec.name, view)
        if name not in consumed:  # it reads only derived tables, or has not run yet
            continue
        version = consumed[name]
        if version not in checked:
            checked[version] = check_rewrite(
                catalog, name, consumed_version=version, start_ms=start_ms, end_ms=end_ms,
                end_version=end_version,
            )
        consumers[view] = checked[version]
    return RestatementPlan(spec.name, start_ms, end_ms, end_version, views, consumers)


def run_restatement(
    catalog: Catalog, table: str, *, start_ms: int, end_ms: int
) -> list[RunResult]:
    """Restate [`start_ms`, `end_ms`) of source `table` through every view downstream of it:
    planned and checked first (`plan_restatement`: a refusal writes nothing), then each
    consumer's hop, one run each (`DerivedTable.restate`). Running it again after a kill
    finishes the interrupted hop and finds the others done."""
    plan = plan_restatement(catalog, table, start_ms=start_ms, end_ms=end_ms)
    hops = {view: DerivedTable(catalog, view) for view in plan.consumers}
    for hop in hops.values():  # every hop checked before the first one writes
        restated_region(hop.view, hop.operator, start_ms=start_ms, end_ms=end_ms)
    for view in plan.views:
        if view not in hops and CheckpointStore.of(catalog.root, view).latest().run > 0:
            raise _second_hop_error(plan.table, view)
    return [hops[view].restate(plan.consumers[view]) for view in plan.views if view in hops]


def _second_hop_error(table: str, view: str) -> DefinitionError:
    """A view that reads a restated view would need the restatement's next hop."""
    msg = (
        f"cannot restate {table!r}: view {view!r} reads a view downstream of it, and "
        "restatement does not go past the views that read the source yet; run a full "
        f"refresh of the views downstream of {table!r} instead (`chronolake run VIEW "
        "--full-refresh`); nothing was written"
    )
    return DefinitionError(msg)


def _processing_time_error(table: str, view: str) -> DefinitionError:
    """A processing-time view's rows depend on when they were processed, not only on the
    rows of a time range: no recompute of the range can reproduce them."""
    msg = (
        f"cannot restate {table!r}: view {view!r}, downstream of it, depends on processing "
        "time, so its rows depend on when they were processed, not only on the source's rows "
        f"in the range; run a full refresh of {view!r} and the views downstream of it instead; "
        "nothing was written"
    )
    return DefinitionError(msg)


def _interrupted_error(table: str, view: str, run: int, state: Location) -> RunError:
    """A killed run's intent binds the view's next run to the input versions it fixed, which
    the restatement's check would not start from."""
    msg = (
        f"cannot restate {table!r}: run {view!r} first: its run {run} was interrupted after "
        f"fixing the input versions it reads (its intent under {state}), and its next run "
        f"finishes it; run {view!r} (`chronolake run {view}`), then restate again; nothing "
        "was written"
    )
    return RunError(msg)
