"""One exception family for everything a chronolake user can hit.

Every message names the culprit, what was expected and how to fix it, and is
raised before any table is changed.
"""

from __future__ import annotations


class ChronolakeError(Exception):
    """Root of every error chronolake raises on purpose."""


class DefinitionError(ChronolakeError):
    """A table, view or query definition is wrong (bad DDL, spec or join)."""


class SourceError(ChronolakeError):
    """A lake table cannot be read as declared (not Delta, no change data feed, vacuumed)."""


class RunError(ChronolakeError):
    """A run must stop (concurrent run, bad input, schema change)."""


class UnknownNameError(DefinitionError):
    """A name that no table or view in the catalog has: a query's, a view's or a DROP's."""


class NameTakenError(DefinitionError):
    """A CREATE of a name registered with another definition, or as another kind."""


class VersionGoneError(SourceError):
    """A table version that can no longer be read: its Delta log entries were cleaned up
    (`delta.logRetentionDuration`) or its data files vacuumed
    (`delta.deletedFileRetentionDuration`)."""


class SourceRewrittenError(SourceError):
    """A source rewritten (OVERWRITE, REPLACE) since a derived table's checkpoint, which a
    run cannot apply as changes."""


class RestateRangeError(SourceError):
    """A source's rows changed outside the time range a restatement names."""


class RunLockedError(RunError):
    """Another run of the same derived table holds its lock."""
