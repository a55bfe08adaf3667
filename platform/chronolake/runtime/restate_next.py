"""The next hop of a restatement: a view that reads a restated derived table.

A restatement's commit (docs/design.md, "Restatement") stamps the range of its table's time
attribute that its changes may touch (`chronolake.restated`). A view reading that table does
not apply those changes as an ordinary run would (a closed window's `-U` would go to the
side table as late): it restates that range of its input instead, from the input's rows as
of the restated commit, as the first hop restated its source. Every run finds such commits,
so a hop left behind by a killed restatement is finished by its next run.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import count, takewhile

from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.lake.changelog import ADDITIONS, ROW_KIND
from chronolake.lake.stamps import RestatedSpan
from chronolake.runtime.restate_check import AcceptedRewrite
from chronolake.schema import TableSpec


def restated_input(
    catalog: Catalog, spec: TableSpec, *, consumed_version: int, spans: Mapping[int, RestatedSpan]
) -> AcceptedRewrite | None:
    """The restatement that a reader of derived table `spec`, which last consumed
    `consumed_version`, restates next: among `spans` (`restated_commits` of the versions
    after it), the restated commits right after that version, over the union of the ranges
    they stamped, with their changes counted (one Spark job, one row to the driver). None
    when the next commit is an ordinary run's."""
    versions = list(takewhile(spans.__contains__, count(consumed_version + 1)))
    if not versions:
        return None
    changes = catalog.backend.changes(catalog.table_path(spec), versions[0], versions[-1])
    added = F.col(ROW_KIND).isin(*ADDITIONS)
    [counted] = changes.agg(  # one row of figures
        F.count(F.when(~added, 1)).alias("removed"), F.count(F.when(added, 1)).alias("added"),
    ).collect()
    return AcceptedRewrite(
        spec.name, consumed_version, versions[-1],
        min(spans[version].start_ms for version in versions),
        max(spans[version].end_ms for version in versions),
        counted["removed"], counted["added"],
    )
