"""Removing what chronolake wrote for a view: its output table, late rows, state and checkpoints.

Only the catalog calls this, when a view is dropped or replaced, or when a name is
registered anew over data a crashed drop left behind. The caller holds the view's
run lock (`removal_lock`) so that no run of the view writes while its data goes.
The user's own Delta tables (a table's `path`) are never touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from pydantic import BaseModel, ConfigDict, Field

from chronolake.errors import RunLockedError
from chronolake.faults import FaultPoint, fault_point
from chronolake.lake.layout import lock_dir, view_data_keys
from chronolake.lake.lock import run_lock
from chronolake.lake.storage import Storage
from chronolake.lake.tables import readable_row_count
from chronolake.location import LocationLike


class RemovedData(BaseModel):
    """What a view had on disk when its data was removed."""

    model_config = ConfigDict(frozen=True)

    output: bool = Field(False, description="It had an output table.")
    output_rows: int | None = Field(
        None, description="Rows of the output table's latest version (None: none, or unreadable)."
    )
    late: bool = Field(False, description="It had a late-rows side table.")
    state: bool = Field(False, description="It had state or checkpoints.")

    def describe(self) -> str:
        """`its output table (1,234 rows), late rows, state and checkpoints`; '' for nothing."""
        parts = []
        if self.output:
            rows = "" if self.output_rows is None else f" ({self.output_rows:,} rows)"
            parts.append(f"its output table{rows}")
        parts += ["late rows"] * self.late + ["state and checkpoints"] * self.state
        return ", ".join(parts)


@contextmanager
def removal_lock(root: LocationLike, name: str, action: str) -> Iterator[None]:
    """Hold the run lock of view `name` while `action` (e.g. "drop view 'v'") changes it.

    Raises `RunError`, having changed nothing, when a run of the view holds the lock.
    """
    with ExitStack() as stack:
        try:
            stack.enter_context(run_lock(lock_dir(root), name.lower()))
        except RunLockedError:
            msg = (
                f"cannot {action} now: a run of {name!r} is in progress; nothing was changed: "
                "wait for the run to finish, then try again"
            )
            raise RunLockedError(msg) from None
        yield


def remove_view_data(root: LocationLike, name: str) -> RemovedData:
    """Delete view `name`'s output, late rows and state (the caller holds `removal_lock`)."""
    lake, (output, late, state) = Storage(root), view_data_keys(name)
    has_output = lake.holds(output)
    removed = RemovedData(
        output=has_output,
        output_rows=readable_row_count(lake.path_of(output)) if has_output else None,
        late=lake.holds(late),
        state=lake.holds(state),
    )
    lake.delete_tree(output)
    fault_point(FaultPoint.DROP_AFTER_OUTPUT)
    for folder in (late, state):
        lake.delete_tree(folder)
    return removed


def has_view_data(root: LocationLike, name: str) -> bool:
    """Whether anything chronolake writes for a view exists under `name`."""
    lake = Storage(root)
    return any(lake.holds(folder) for folder in view_data_keys(name))
