"""What a query reads: each registered name resolved to the spec a reader plans against.

A table is read as itself. A derived view (one an operator runs) is read as its output
table: its latest committed state and its change data feed. A plain view is computed on
read, or, for an operator, followed change by change through its SELECT when it projects
and filters one table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from pyspark.sql.types import StructType

from chronolake.catalog.entry import Spec
from chronolake.errors import DefinitionError, SourceError
from chronolake.lake import LakeBackend
from chronolake.lake.layout import output_path, view_data_keys
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.history import history_reads
from chronolake.sql.operator_plan import registration_digest
from chronolake.sql.query import referenced_tables, temporal_joins
from chronolake.sql.view_kinds import is_derived, output_table_spec, plain_source, through_view_spec


class Lake(Protocol):
    """Where a lake's derived tables are, and how its tables are read: its backend is only
    asked for when a derived table is read (declaring and binding need no Spark)."""

    @property
    def root(self) -> Location: ...

    @property
    def backend(self) -> LakeBackend: ...


SchemaOf = Callable[[str], StructType]
"""The schema of a query's rows (Spark's analysis of it)."""


def source_spec(spec: Spec, lake: Lake) -> Spec:
    """What `spec` is when read: a table, a derived view's output table (its latest committed
    state and change data feed), or another view (computed on read).

    Raises `SourceError` for a derived view that has never run: it has no rows yet.
    """
    if not is_derived(spec):
        return spec
    assert isinstance(spec, ViewSpec)
    path = output_path(lake.root, spec.name)
    if not lake.backend.is_delta_table(path):
        msg = (
            f"view {spec.name!r} is a derived table that has never run, so it has no rows "
            f"to read yet; run it first: `chronolake run {spec.name} --lake {lake.root}` "
            "(or materialize its asset in Dagster)"
        )
        raise SourceError(msg)
    schema = lake.backend.snapshot(path).schema
    return output_table_spec(spec, schema, view_data_keys(spec.name)[0])


def input_specs(query: str, specs: Mapping[str, Spec], lake: Lake) -> dict[str, Spec]:
    """Every registered spec, with the derived views `query` reads as their output tables
    (what an operator reading them plans against). A deduplication view joined
    FOR SYSTEM_TIME AS OF, or read FOR SYSTEM_TIME ALL, stays a view: its versions come from
    its source's changelog."""
    resolved = dict(specs)
    versioned_reads = [ref.build_table for ref in temporal_joins(query)] + history_reads(query)
    builds = [specs.get(name.lower()) for name in versioned_reads]
    versioned_by_source = {
        build.name.lower() for build in builds
        if isinstance(build, ViewSpec) and build.deduplication is not None
    }
    for name in referenced_tables(query):
        spec = specs.get(name.lower())
        if spec is not None and is_derived(spec) and name.lower() not in versioned_by_source:
            resolved[name.lower()] = source_spec(spec, lake)
    return resolved


def operator_inputs(query: str, specs: Mapping[str, Spec], lake: Lake, schema_of: SchemaOf
                    ) -> dict[str, Spec]:
    """`input_specs`, with each plain view `query` reads (a projection or filter of one
    table) as its source's changes through the view's SELECT: what an operator runs on."""
    resolved = input_specs(query, specs, lake)
    for name in referenced_tables(query):
        spec = resolved.get(name.lower())
        if isinstance(spec, ViewSpec) and plain_source(spec.query) is not None:
            resolved[name.lower()] = _through_view(spec, specs, lake, schema_of)
    return resolved


def registrations_read(query: str, specs: Mapping[str, Spec]) -> dict[str, str]:
    """Each registered table and view `query` reads, directly or through views, with the
    digest of its registration."""
    read: dict[str, str] = {}
    pending = list(referenced_tables(query))
    while pending:
        name = pending.pop().lower()
        spec = specs.get(name)
        if spec is None or name in read:
            continue
        read[name] = registration_digest(spec)
        if isinstance(spec, ViewSpec):
            pending += referenced_tables(spec.query)
    return read


def _through_view(view: ViewSpec, specs: Mapping[str, Spec], lake: Lake, schema_of: SchemaOf
                  ) -> TableSpec:
    source_name = plain_source(view.query)
    assert source_name is not None
    source = operator_inputs(view.query, specs, lake, schema_of)[source_name.lower()]
    if not isinstance(source, TableSpec):
        msg = (
            f"view {view.name!r} reads {source.name!r}, a view computed as a whole on read, "
            "whose changes no operator can follow; read a table, a derived table, or a "
            "projection or filter of one"
        )
        raise DefinitionError(msg)
    return through_view_spec(view, source, schema_of(view.query))
