"""Temporal joins: the as-of core every event-time temporal join runs on."""

from __future__ import annotations

from chronolake.joins.asof import join_valid_versions
from chronolake.joins.tuning import AsOfTuning
from chronolake.schema.join_kind import JoinKind

__all__ = ["AsOfTuning", "JoinKind", "join_valid_versions"]
