"""The catalog: tables and views declared once, persisted in the lake, queried with SQL.

The catalog lives under `<lake>/_chronolake/catalog/`, one JSON document per
table or view, so a later process (the CLI, `dagster dev`, a scheduled run)
sees what an earlier one registered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pyspark.sql import DataFrame, SparkSession

from chronolake._atomic import write_text_atomically
from chronolake._spark import local_spark_session
from chronolake.errors import DefinitionError, SourceError
from chronolake.joins.temporal import (
    join_query,
    latest_versions,
    matched_latest,
    matched_versions,
)
from chronolake.joins.versions import forward_newer_versions
from chronolake.lake import LakeBackend, backend_for
from chronolake.lake.layout import CATALOG_ROOT, output_path
from chronolake.lake.reader import latest_per_key
from chronolake.relations import changelog_dataframe, relation_dataframe
from chronolake.schema import ChangelogMode, TableSpec, ViewSpec
from chronolake.sql.ddl import QueryStatement, parse_statements
from chronolake.sql.query import referenced_tables, temporal_joins, to_spark
from chronolake.sql.temporal import TemporalJoinPlan, TimeMode, plan_temporal_join
from chronolake.sql.view_kinds import (
    is_derived,
    output_table_spec,
    plain_source,
    through_view_spec,
)

Spec = TableSpec | ViewSpec


class CatalogEntry(BaseModel):
    """What the catalog stores per name: the spec and the statement that declared it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["table", "view"]
    table: TableSpec | None = Field(None, description="Set for tables.")
    view: ViewSpec | None = Field(None, description="Set for views.")
    statement: str | None = Field(None, description="The DDL text, when declared in SQL.")

    @property
    def spec(self) -> Spec:
        spec = self.table if self.kind == "table" else self.view
        assert spec is not None
        return spec


class Catalog:
    """Tables and views of one lake, with Flink SQL on top of Spark.

    `lake` is the lake root (a folder; table paths are relative to it). `spark`
    defaults to the process's local session.

    Example:
        >>> catalog = Catalog("demo-lake")
        >>> catalog.execute("CREATE TABLE orders (...) WITH ('path' = 'orders')")
        >>> catalog.sql("SELECT currency, COUNT(*) FROM orders GROUP BY currency").show()
    """

    def __init__(
        self,
        lake: str | os.PathLike[str],
        spark: SparkSession | None = None,
        *,
        backend: Literal["auto", "delta-rs", "delta-spark"] = "auto",
    ) -> None:
        self.root = Path(lake).resolve()
        self._spark = spark
        self._backend_kind = backend
        self._dir = self.root / CATALOG_ROOT

    @cached_property
    def spark(self) -> SparkSession:
        """The Spark session; created on first use, so declaring tables needs no JVM."""
        return self._spark or local_spark_session()

    @cached_property
    def backend(self) -> LakeBackend:
        return backend_for(self.spark, self._backend_kind)

    # -- declaring -------------------------------------------------------------------------

    def execute(self, statement: str) -> Spec | DataFrame:
        """Run one statement: DDL registers a table or view; a query returns its DataFrame."""
        results = list(self.run_script(statement))
        if len(results) != 1:
            raise DefinitionError(
                f"execute() takes exactly one statement, got {len(results)}; "
                "use run_script() for a script"
            )
        return results[0][1]

    def run_script(self, script: str) -> Iterator[tuple[str, Spec | DataFrame]]:
        """Run a script's statements in order, yielding (statement text, result) for each.

        The whole script is parsed first, so a syntax error anywhere changes nothing.
        """
        statements = parse_statements(script, catalog=self.specs())
        for statement in statements:
            if isinstance(statement, QueryStatement):
                yield statement.sql, self.sql(statement.sql)
            else:
                self.register(statement)
                yield statement.name, statement

    def declare(self, script: str) -> list[Spec]:
        """Register every table and view of a DDL script (no Spark needed); queries are refused."""
        statements = parse_statements(script, catalog=self.specs())
        queries = [s.sql for s in statements if isinstance(s, QueryStatement)]
        if queries:
            raise DefinitionError(
                f"declare() takes CREATE TABLE / VIEW only, got a query: {queries[0][:60]!r}; "
                "run queries with sql()"
            )
        return [self.register(spec) for spec in statements if not isinstance(spec, QueryStatement)]

    def register(self, spec: Spec, *, statement_text: str | None = None) -> Spec:
        """Register (or replace) a table or view spec built in Python or parsed from DDL."""
        entry = CatalogEntry(
            kind="table" if isinstance(spec, TableSpec) else "view",
            table=spec if isinstance(spec, TableSpec) else None,
            view=spec if isinstance(spec, ViewSpec) else None,
            statement=statement_text,
        )
        path = self._dir / f"{spec.name.lower()}.json"
        write_text_atomically(path, entry.model_dump_json(indent=2))
        return spec

    def drop(self, name: str) -> None:
        """Forget a table or view (its Delta data stays where it is)."""
        path = self._entry_path(name)
        path.unlink()

    # -- reading ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered table and view names, sorted."""
        return sorted(self.specs())

    def spec(self, name: str) -> Spec:
        """The spec registered under `name` (case-insensitive)."""
        return self._entry(name).spec

    def entry(self, name: str) -> CatalogEntry:
        return self._entry(name)

    def table_path(self, spec: TableSpec) -> Path:
        """Where a table's Delta data lives: its `path` option, relative to the lake root."""
        return (self.root / spec.options.path).resolve()

    def source_spec(self, name: str) -> Spec:
        """What `name` is when read: a table, a derived view's output table (its latest
        committed state and change data feed), or another view (computed on read).

        Raises `SourceError` for a derived view that has never run: it has no rows yet.
        """
        spec = self.spec(name)
        if not is_derived(spec):
            return spec
        assert isinstance(spec, ViewSpec)
        path = output_path(self.root, spec.name)
        if not self.backend.is_delta_table(path):
            msg = (
                f"view {spec.name!r} is a derived table that has never run, so it has no rows "
                f"to read yet; run it first: `chronolake run {spec.name} --lake {self.root}` "
                "(or materialize its asset in Dagster)"
            )
            raise SourceError(msg)
        schema = self.backend.snapshot(path).schema
        return output_table_spec(spec, schema, str(path.relative_to(self.root)))

    def input_specs(self, query: str) -> dict[str, Spec]:
        """Every registered spec, with the derived views `query` reads as their output tables
        (what an operator reading them plans against). A deduplication view joined
        FOR SYSTEM_TIME AS OF stays a view: its versions come from its source's changelog."""
        specs = self.specs()
        builds = [specs.get(ref.build_table.lower()) for ref in temporal_joins(query)]
        versioned_by_source = {
            build.name.lower() for build in builds
            if isinstance(build, ViewSpec) and build.deduplication is not None
        }
        for name in referenced_tables(query):
            spec = specs.get(name.lower())
            if spec is not None and is_derived(spec) and name.lower() not in versioned_by_source:
                specs[name.lower()] = self.source_spec(name)
        return specs

    def operator_inputs(self, query: str) -> dict[str, Spec]:
        """`input_specs`, with each plain view `query` reads (a projection or filter of one
        table) as its source's changes through the view's SELECT: what an operator runs on."""
        specs = self.input_specs(query)
        for name in referenced_tables(query):
            spec = specs.get(name.lower())
            if isinstance(spec, ViewSpec) and plain_source(spec.query) is not None:
                specs[name.lower()] = self._through_view(spec)
        return specs

    def _through_view(self, view: ViewSpec) -> TableSpec:
        source_name = plain_source(view.query)
        assert source_name is not None
        source = self.operator_inputs(view.query)[source_name.lower()]
        if not isinstance(source, TableSpec):
            msg = (
                f"view {view.name!r} reads {source.name!r}, a view computed as a whole on read, "
                "whose changes no operator can follow; read a table, a derived table, or a "
                "projection or filter of one"
            )
            raise DefinitionError(msg)
        return through_view_spec(view, source, self.sql(view.query).schema)

    def table(self, name: str) -> DataFrame:
        """The current contents of a table or view, with computed and metadata columns applied.

        A changelog table reads as its materialized state at the latest version
        (inserts, updates and deletes applied).
        """
        return self.sql(f"SELECT * FROM {name}")

    def sql(self, query: str) -> DataFrame:
        """A Flink SQL query over registered tables and views, as a Spark DataFrame.

        Inputs are read as bounded: a temporal join sees every commit of both
        sides and ends with a final watermark of +infinity, so the result is the
        join's final result.
        """
        specs = self.specs()
        for name in referenced_tables(query):
            if name.lower() not in specs:
                raise DefinitionError(
                    f"query references unknown table {name!r}; registered: "
                    f"{', '.join(sorted(specs)) or 'none'} (declare it with CREATE TABLE first)"
                )
        specs = self.input_specs(query)
        for name in referenced_tables(query):
            self._register_temp_view(name.lower(), specs)
        if temporal_joins(query):
            return self._temporal_join(plan_temporal_join(query, specs), specs)
        return self.spark.sql(to_spark(query))

    def changelog(self, name: str, start_version: int = 0, end_version: int | None = None
                  ) -> DataFrame:
        """A table's changes between two versions, with declared and system columns."""
        spec = self.source_spec(name)
        if not isinstance(spec, TableSpec):
            raise DefinitionError(
                f"{name!r} is a view computed on read; only tables and derived tables (views "
                "with a temporal join, a window aggregate or a deduplication) have a changelog"
            )
        return changelog_dataframe(self.spark, self.backend, spec, self.root, start_version,
                                   end_version)

    def versions(self, name: str) -> DataFrame:
        """The version events of a versioned table or deduplication view, in arrival order."""
        spec = self.spec(name)
        if isinstance(spec, TableSpec):
            return self.changelog(name)
        if spec.deduplication is None:
            raise DefinitionError(
                f"view {name!r} is not a deduplication view, so it has no versions; a versioned "
                "view is SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t "
                "DESC) AS rn FROM src) WHERE rn = 1"
            )
        dedup = spec.deduplication
        return forward_newer_versions(self.versions(dedup.source), dedup.key, dedup.order_by)

    def _temporal_join(self, plan: TemporalJoinPlan, specs: dict[str, Spec]) -> DataFrame:
        probe = self.changelog(plan.probe.name)
        if plan.probe.primary_key and plan.probe.options.changelog is not ChangelogMode.APPEND:
            probe = latest_per_key(probe, plan.probe.primary_key)  # the probe's final rows
        build = self.versions(plan.build.name)
        if plan.mode is TimeMode.EVENT_TIME:
            matched = matched_versions(plan, probe, build)
        else:
            matched = matched_latest(plan, probe, latest_versions(build, plan.build_keys))
        return join_query(plan, probe, matched)

    # -- internals -------------------------------------------------------------------------

    def _register_temp_view(self, name: str, specs: dict[str, Spec]) -> None:
        spec = specs[name]
        if isinstance(spec, ViewSpec):
            specs = self.input_specs(spec.query)
            for inner in referenced_tables(spec.query):
                self._register_temp_view(inner.lower(), specs)
            self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` AS {to_spark(spec.query)}")
        else:
            frame = relation_dataframe(self.spark, self.backend, spec, self.root)
            frame.createOrReplaceTempView(name)

    def _entry_path(self, name: str) -> Path:
        path = self._dir / f"{name.lower()}.json"
        if not path.exists():
            known = ", ".join(self.names()) or "none"
            raise DefinitionError(f"unknown table or view {name!r}; registered: {known}")
        return path

    def _entry(self, name: str) -> CatalogEntry:
        return CatalogEntry.model_validate_json(self._entry_path(name).read_text())

    def specs(self) -> dict[str, Spec]:
        """Every registered spec by (lower-case) name."""
        return {name: entry.spec for name, entry in load_entries(self.root).items()}


def load_entries(root: str | os.PathLike[str]) -> dict[str, CatalogEntry]:
    """The catalog entries of a lake without a Spark session (for Dagster definitions)."""
    directory = Path(root) / CATALOG_ROOT
    if not directory.exists():
        return {}
    return {
        path.stem: CatalogEntry.model_validate_json(path.read_text())
        for path in sorted(directory.glob("*.json"))
    }

