"""Which column a table's or view's time partitions cut, checked when it is declared.

A partition is complete once the table's watermark passes its end (`chronolake.watermarks.
partitions`), so only a time column the watermark bounds can be partitioned by: the rowtime,
or a window aggregate's `window_start` (its windows are emitted once the watermark passes
their ends). A session window's end is not bounded, nor is any time of a view computed on
read, which has no watermark of its own.
"""

from __future__ import annotations

from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema.spec import TableSpec, ViewKind, ViewSpec
from chronolake.schema.time_options import TimeOptions
from chronolake.schema.windows import WINDOW_START, WindowKind
from chronolake.sql.query import parse_query
from chronolake.sql.view_kinds import view_kind


def partitioned_on(spec: TableSpec | ViewSpec, time: TimeOptions) -> TimeOptions:
    """`time` with its partitions' column resolved (the rowtime by default, `window_start` for
    a window aggregate); `DefinitionError` where the watermark does not bound that column."""
    partitions = time.partitions
    if partitions is None:
        return time
    owner = f"{'table' if isinstance(spec, TableSpec) else 'view'} {spec.name!r}"
    kind = view_kind(spec) if isinstance(spec, ViewSpec) else None
    if kind is ViewKind.PLAIN:
        msg = (f"{owner} is computed on read and has no watermark to complete partitions; "
               "partition the table it reads, or a view an operator runs")
        raise DefinitionError(msg)
    windowed = kind is ViewKind.WINDOW_AGGREGATE
    bounded = [name for name in (spec.rowtime, WINDOW_START if windowed else None) if name]
    column = partitions.column or (bounded[0] if bounded else None)
    if column is None:
        msg = (f"{owner} has no rowtime, so no watermark completes its partitions; declare "
               "WATERMARK FOR <time column> AS ... on it, or drop the 'partition.time.*' options")
        raise DefinitionError(msg)
    if column.lower() not in {name.lower() for name in bounded}:
        msg = (f"{owner}: 'partition.time.column' = {column!r} is not a time its watermark "
               f"bounds; partition by {' or '.join(map(repr, bounded))}")
        raise DefinitionError(msg)
    if windowed and isinstance(spec, ViewSpec) and _calls_session(spec.query):
        msg = (f"{owner}: a SESSION window's end is not bounded, so no watermark completes a "
               "partition of window_start; partition the table it reads instead")
        raise DefinitionError(msg)
    resolved = partitions.model_copy(update={"column": column})
    return time.model_copy(update={"partitions": resolved})


def _calls_session(query: str) -> bool:
    return any(node.name.upper() == WindowKind.SESSION.value
               for node in parse_query(query).find_all(exp.Anonymous))
