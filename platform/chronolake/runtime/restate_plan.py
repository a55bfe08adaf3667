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
from chronolake.errors import RunError, SourceError
from chronolake.location import Location
from chronolake.runtime.chain import downstream_derived
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_check import AcceptedRewrite, check_rewrite, restatable_source
from chronolake.runtime.restate_run import restated_region
from chronolake.runtime.result import RunResult, RunStatus


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
    left: tuple[str, ...] = ()
    """The views among `views` that have run and depend on processing time, and the views
    downstream of them: no recompute of the range reproduces their rows, so the restatement
    leaves them as they are; their next runs read the rewrite as new changes."""


def plan_restatement(
    catalog: Catalog, table: str, *, start_ms: int, end_ms: int
) -> RestatementPlan:
    """The hops of restating [`start_ms`, `end_ms`) (epoch milliseconds) of source `table`,
    with the rewrite checked for every direct consumer that has run.

    Raises what `check_rewrite` raises (`RestateRangeError` for a change outside the range,
    naming its times), and `RunError` for a hop whose last run was interrupted, before
    anything is written. A hop that has run in processing time is left (`left`).

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
    left: list[str] = []
    for view in views:
        try:
            derived = DerivedTable(catalog, view)
        except SourceError:
            if CheckpointStore.of(catalog.root, view).latest().run == 0:
                continue  # it reads a derived table that has not run, and has not run either
            raise
        consumed = derived.consumed()
        reads_left = any(spec.changelog_table.name.lower() in left
                         for spec in derived.inputs.values())
        if consumed and (derived.operator.depends_on_processing_time or reads_left):
            left.append(view)
            continue
        if name not in consumed:  # a later hop (its run restates), or it has not run yet
            continue
        interrupted = derived.interrupted_run()
        same = RestatedRange(source=name, start_ms=start_ms, end_ms=end_ms)
        if interrupted is not None and interrupted.restate != same:
            # what it consumed is not what its next run starts from
            raise _interrupted_error(spec.name, view, interrupted.run,
                                     derived.store.storage.location)
        version = consumed[name]
        if version not in checked:
            checked[version] = check_rewrite(
                catalog, name, consumed_version=version, start_ms=start_ms, end_ms=end_ms,
                end_version=end_version,
            )
        consumers[view] = checked[version]
    return RestatementPlan(spec.name, start_ms, end_ms, end_version, views, consumers,
                           tuple(left))


def run_restatement(
    catalog: Catalog, table: str, *, start_ms: int, end_ms: int
) -> list[RunResult]:
    """Restate [`start_ms`, `end_ms`) of source `table` through every view downstream of it:
    planned and checked first (`plan_restatement`: a refusal writes nothing), then each hop
    in dependency order. A view that reads the source restates the range (`DerivedTable.
    restate`); a view that reads a restated view runs, and its run restates the range that
    view's restatement stamped (after an ordinary run for any commits before it). Running it
    again after a kill finishes the interrupted hop and finds the others done."""
    plan = plan_restatement(catalog, table, start_ms=start_ms, end_ms=end_ms)
    restated = {plan.table.lower(), *plan.views}
    hops = [DerivedTable(catalog, view) for view in plan.views if view not in plan.left
            and CheckpointStore.of(catalog.root, view).latest().run > 0]
    for hop in hops:  # every hop that has run checked before the first one writes
        for source in {spec.changelog_table.name.lower() for spec in hop.inputs.values()}:
            if source in restated:
                restated_region(hop.view, hop.operator, source=source, start_ms=start_ms,
                                end_ms=end_ms)
    results: list[RunResult] = []
    for hop in hops:
        if hop.name in plan.consumers:
            results.append(hop.restate(plan.consumers[hop.name]))
        else:
            results.extend(_caught_up(hop))
    return results + [_left(catalog, view) for view in plan.left]


def restate_view(
    catalog: Catalog, view: str, table: str, *, start_ms: int, end_ms: int
) -> RunResult | None:
    """Restate [`start_ms`, `end_ms`) of source `table` in `view` alone, when `view` reads
    `table` itself and has run: a step of a Dagster backfill launched with the restate tag,
    whose other assets restate in their own steps. Planned as `run_restatement` plans (a
    refusal writes nothing); None when `view` does not read `table` itself or has not run:
    its ordinary run reads what it must (a restated view's commit is restated by it)."""
    plan = plan_restatement(catalog, table, start_ms=start_ms, end_ms=end_ms)
    name = view.lower()  # as registered
    if name in plan.left:
        return _left(catalog, view)
    if name not in plan.consumers:
        return None
    return DerivedTable(catalog, view).restate(plan.consumers[name])


def _left(catalog: Catalog, view: str) -> RunResult:
    """What a restatement says of a view it leaves as it is (`RestatementPlan.left`)."""
    message = (
        "left as it is: its rows depend on processing time (its own or a view's it reads), "
        "which no recompute of the range reproduces; its next run reads the rewrite as new "
        f"changes, or rebuild it (`chronolake run {view} --full-refresh`)"
    )
    return RunResult(table=view, run=CheckpointStore.of(catalog.root, view).latest().run,
                     status=RunStatus.LEFT, message=message)


def _caught_up(hop: DerivedTable) -> list[RunResult]:
    """The runs of `hop`, a later hop, until no restatement's commit of its inputs is left
    unread: a run restates such a commit instead of reading it (`DerivedTable.run`), and
    reads the ordinary commits before it first. One run each, so each makes progress."""
    results = []
    while hop.interrupted_run() is not None or hop.restatement_unread():
        results.append(hop.run())
    return results


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
