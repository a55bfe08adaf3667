"""Column helpers the join modules share: quoting, conjunction, and what counts as a version."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from chronolake.lake.changelog import RowKind


def quote(name: str) -> str:
    """`name` as a Spark column reference, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def all_of(conditions: Sequence[Column]) -> Column:
    """The conjunction of one or more conditions."""
    combined = conditions[0]
    for condition in conditions[1:]:
        combined = combined & condition
    return combined


def is_version_event(kind: str | None) -> Column:
    """Whether a build row is a version event: anything but `-U` (null kinds too); every row
    when the build side has no row-kind column (`kind` None)."""
    if kind is None:
        return F.lit(True)
    column = F.col(quote(kind))
    return column.isNull() | (column != F.lit(RowKind.UPDATE_BEFORE.value))
