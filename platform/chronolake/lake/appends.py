"""Committing data files already written into a Delta table, exactly once, with delta-rs.

Whoever wrote the files (Spark, in a run; pyarrow, where Spark cannot reach the store),
their commit is this one path: one `append` commit tagged with the run's application
transaction (`app_id`, `app_version`), so a retried run commits at most once. The table
is a local folder or an object store URI; delta-rs reaches both (its store is configured
by the same environment as `chronolake.lake.storage`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from deltalake import CommitProperties, DeltaTable, Schema, Transaction
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction

from chronolake.lake.delta_log import CDF_PROPERTY
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike


def open_or_create(
    location: LocationLike, schema: Schema, partition_by: Sequence[str] = (), *,
    enable_cdf: bool = False,
) -> DeltaTable:
    """The Delta table at `location`, created empty with `schema` when there is none.

    Every column is created nullable, as Delta's own writer creates a table from a frame:
    Delta counts a NOT NULL column as an invariant, which a table-features protocol must
    then list, and Delta's reader refuses a table that does not (delta-rs lists none).
    """
    return DeltaTable.create(
        str(location),
        schema=Schema.from_json(json.dumps(_nullable(json.loads(schema.to_json())))),
        mode="ignore",
        partition_by=list(partition_by) or None,
        configuration={CDF_PROPERTY: "true"} if enable_cdf else None,
    )


def _nullable(node: object) -> object:
    """A Delta schema's JSON with every field, array element and map value nullable."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    flags = {"nullable", "containsNull", "valueContainsNull"}
    return {key: True if key in flags else _nullable(value) for key, value in node.items()}


def is_committed(table: DeltaTable, app_id: str, app_version: int) -> bool:
    """Whether the table holds a commit of `app_id` at `app_version` or later."""
    done = table.transaction_version(app_id)
    return done is not None and done >= app_version


def commit_appended(
    table: DeltaTable,
    location: LocationLike,
    added: Sequence[AddAction],
    *,
    app_id: str,
    app_version: int,
    commit_info: Mapping[str, str] | None = None,
) -> int | None:
    """Commit the files `added` (written into the table at `location`) as one append; the
    new version, or None when the transaction was committed already (by an earlier attempt,
    or one racing this): then the files are removed and nothing is written.

    Another writer's commit of a different transaction in between is retried by delta-rs;
    a conflict it cannot resolve is raised.
    """
    partition_columns = list(table.metadata().partition_columns)
    try:
        table.create_write_transaction(
            [*added],  # delta-rs takes a `list[AddAction | RemoveAction]` (invariant)
            mode="append",
            schema=table.schema(),
            partition_by=partition_columns or None,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id, app_version)],
                custom_metadata=dict(commit_info or {}),
            ),
        )
    except CommitFailedError:
        table.update_incremental()
        if not is_committed(table, app_id, app_version):
            raise
        files = Storage(location)
        for action in added:
            files.delete(action.path)
        return None
    table.update_incremental()
    return table.version()
