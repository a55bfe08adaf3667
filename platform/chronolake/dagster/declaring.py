"""A code location's tables and views, read from its DDL in memory, and the explicit step that
declares them in the lake.

Loading a code location writes nothing: its assets come from the DDL as parsed here, so a
deployment that may only read the lake still loads. Declaring them in the lake's catalog is a
job of its own (`declare_job`), run once by whoever sets the lake up, and again when the DDL
changes; a run of an asset the lake does not declare stops, saying so
(`LakeResource.catalog`).
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

from collections.abc import Iterable

from dagster import JobDefinition, OpExecutionContext, job, op

from chronolake.catalog import load_entries
from chronolake.dagster.resources import DECLARE_JOB, LakeResource
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.ddl import parse_statements


def script_specs(script: str) -> list[TableSpec | ViewSpec]:
    """The tables and views a DDL script creates, in its order, as declaring it into an empty
    lake would register them; nothing is read or written."""
    return [s for s in parse_statements(script) if isinstance(s, (TableSpec, ViewSpec))]


def served_specs(root: Location, specs: Iterable[TableSpec | ViewSpec] | None
                 ) -> list[TableSpec | ViewSpec]:
    """What a code location serves as assets: `specs` as given (`script_specs`), or else what
    the lake at `root` declares (read, never written)."""
    if specs is not None:
        return list(specs)
    return [entry.spec for entry in load_entries(root).values()]


def declare_job(script: str, name: str = DECLARE_JOB) -> JobDefinition:
    """A job that declares `script`'s statements in the lake's catalog (declaring again what
    is declared already changes nothing; another definition under a taken name is refused)."""

    @op(name=f"{name}_statements",
        description="Declare the code location's tables and views in the lake's catalog.")
    def declare(context: OpExecutionContext, lake: LakeResource) -> None:
        declared = lake.catalog(None).declare(script)
        context.log.info(f"declared {len(declared)} tables and views in {lake.location}")

    @job(name=name, description="Declare the code location's DDL in the lake's catalog: once, "
         "when the lake is set up, and again when the DDL changes.")
    def declare_statements() -> None:
        declare()

    return declare_statements
