"""The catalog: tables and views declared once, persisted in the lake, queried with SQL.

The catalog lives under `<lake>/_chronolake/catalog/`, one JSON document per
table or view, so a later process (the CLI, `dagster dev`, a scheduled run)
sees what an earlier one registered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from chronolake.catalog.relations import changelog_dataframe, relation_dataframe
from chronolake.catalog.removal import (
    RemovedData,
    has_view_data,
    removal_lock,
    remove_view_data,
)
from chronolake.catalog.stored_types import check_stored_types
from chronolake.errors import ChronolakeError, DefinitionError, SourceError, UnknownNameError
from chronolake.joins.temporal import (
    join_query,
    latest_versions,
    matched_latest,
    matched_versions,
)
from chronolake.joins.versions import first_versions, forward_newer_versions
from chronolake.lake import LakeBackend, backend_for
from chronolake.lake.layout import catalog_dir, output_path, table_location, view_data_keys
from chronolake.lake.reader import latest_per_key
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.lake.storage import Storage
from chronolake.lake.tables import stored_schema
from chronolake.location import Location, LocationLike, as_location
from chronolake.schema import ChangelogMode, StartupMode, TableSpec, ViewSpec
from chronolake.schema.dialect import spark_sql
from chronolake.schema.persisted import Persisted
from chronolake.schema.spec import OPERATOR_KINDS, KeepRow
from chronolake.spark.session import local_spark_session
from chronolake.spark.stack import BackendChoice, chosen_backend
from chronolake.sql.current_watermark import HeldWatermark, bind, held_by, uses_current_watermark
from chronolake.sql.ddl import DropStatement, QueryStatement, Statement, parse_statements
from chronolake.sql.existing import (
    Kind,
    readers_error,
    readers_of,
    same_definition,
    taken_error,
    unknown_error,
    wrong_kind_error,
)
from chronolake.sql.operator_plan import (
    StoredPlan,
    bind_plan,
    refuse_plain,
    registration_digest,
)
from chronolake.sql.query import parse_query, referenced_tables, temporal_joins, to_spark
from chronolake.sql.temporal import TemporalJoinPlan, TimeMode, plan_temporal_join
from chronolake.sql.view_kinds import (
    is_derived,
    output_table_spec,
    plain_source,
    through_view_spec,
)
from chronolake.watermarks.assigner import WatermarkAssigner

Spec = TableSpec | ViewSpec
_ENTRY, _DROPPING = ".json", ".dropping"  # a registration; one a drop is removing


class CatalogEntry(Persisted):
    """What the catalog stores per name: the spec and the statement that declared it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["table", "view"]
    table: TableSpec | None = Field(None, description="Set for tables.")
    view: ViewSpec | None = Field(None, description="Set for views.")
    statement: str | None = Field(None, description="The DDL text, when declared in SQL.")
    plan: StoredPlan | None = Field(
        None, description="A derived table's operator plan, kept by a run (`operator_plan`)."
    )

    @field_validator("plan", mode="wrap")
    @classmethod
    def _plan_or_none(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        """A plan stored by another chronolake version that no longer loads is bound anew: it
        never keeps the view's registration from loading."""
        try:
            return handler(value)
        except (ValidationError, ChronolakeError):  # a spec's own validators raise the latter
            return None

    @property
    def spec(self) -> Spec:
        spec = self.table if self.kind == "table" else self.view
        assert spec is not None
        return spec


class Dropped(BaseModel):
    """What `Catalog.drop` removed: a registration, and for a view chronolake's data of it."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Kind | None = Field(None, description="None for a registration that no longer loads.")
    existed: bool = Field(True, description="False: IF EXISTS found nothing to drop.")
    removed: RemovedData = Field(default_factory=RemovedData)
    replaced_by: Spec | None = Field(
        None, description="What CREATE OR REPLACE registered in its place."
    )

    def describe(self) -> str:
        """One line for a person: what went, and what stayed."""
        what = self.kind or ("registration" if self.existed else "table or view")
        verb = "replaced" if self.replaced_by else "dropped"
        if not self.existed:
            return (f"registered {what} {self.name}" if self.replaced_by else
                    f"{what} {self.name} does not exist: nothing dropped")
        if self.kind == "table":
            return f"{verb} table {self.name} (its Delta table is untouched)"
        data = self.removed.describe()
        if not data:
            return f"{verb} {what} {self.name} (it had never run: no data to remove)"
        after = "; its next run starts from scratch" if self.replaced_by else ""
        return f"{verb} {what} {self.name}: {data} removed{after}"


class Catalog:
    """Tables and views of one lake, with Flink SQL on top of Spark.

    `lake` is the lake root (a folder, or an object store URI such as `s3://bucket/lake`;
    table paths are relative to it). `spark` defaults to the process's local session.

    Example:
        >>> catalog = Catalog("demo-lake")
        >>> catalog.execute("CREATE TABLE orders (...) WITH ('path' = 'orders')")
        >>> catalog.sql("SELECT currency, COUNT(*) FROM orders GROUP BY currency").show()
    """

    def __init__(
        self,
        lake: LocationLike,
        spark: SparkSession | None = None,
        *,
        backend: BackendChoice | None = None,
    ) -> None:
        location = as_location(lake)
        self.root = Location(str(location.path.resolve())) if location.is_local else location
        self._spark = spark
        self._backend_kind = chosen_backend(backend)
        self._entries = _entries(self.root)

    @cached_property
    def spark(self) -> SparkSession:
        """The Spark session; created on first use, so declaring tables needs no JVM."""
        return self._spark or local_spark_session(lake=self.root, backend=self._backend_kind)

    @cached_property
    def backend(self) -> LakeBackend:
        return backend_for(self.spark, self._backend_kind)

    # -- declaring -------------------------------------------------------------------------

    def execute(self, statement: str) -> Spec | Dropped | DataFrame:
        """Run one statement: DDL registers a table or view (a DROP returns what it removed); a
        query returns its DataFrame."""
        results = list(self.run_script(statement))
        if len(results) != 1:
            raise DefinitionError(
                f"execute() takes exactly one statement, got {len(results)}; "
                "use run_script() for a script"
            )
        return results[0][1]

    def run_script(self, script: str) -> Iterator[tuple[str, Spec | Dropped | DataFrame]]:
        """Run a script's statements in order, yielding (statement text, result) for each:
        the spec registered, what a DROP removed, or a query's rows.

        The whole script is checked first, so an error anywhere (a syntax error, an unknown
        name, a DROP of a table views read) changes nothing.
        """
        for statement in self._parse(script):
            if isinstance(statement, QueryStatement):
                yield statement.sql, self.sql(statement.sql)
            elif isinstance(statement, DropStatement):
                yield statement.name, self._drop_statement(statement)
            else:
                yield statement.name, self.register(statement)

    def declare(self, script: str) -> list[Spec]:
        """Apply a DDL script's CREATE and DROP statements (no Spark needed) and return the
        specs registered; queries are refused."""
        statements = self._parse(script)
        queries = [s.sql for s in statements if isinstance(s, QueryStatement)]
        if queries:
            raise DefinitionError(
                f"declare() takes CREATE / DROP TABLE / VIEW only, got a query: "
                f"{queries[0][:60]!r}; run queries with sql()"
            )
        registered = []
        for statement in statements:
            if isinstance(statement, DropStatement):
                replaced_by = self._drop_statement(statement).replaced_by
                registered += [replaced_by] if replaced_by else []
            elif not isinstance(statement, QueryStatement):
                registered.append(self.register(statement))
        return registered

    def register(
        self, spec: Spec, *, replace: bool = False, statement_text: str | None = None
    ) -> Spec:
        """Register a table or view spec built in Python or parsed from DDL.

        A name registered already with the same spec is left as it is (declaring again is
        a no-op). With another spec (or a registration that no longer loads) it is refused,
        unless `replace`: then the old one is dropped first (`drop`: refused while other
        views read it; a view's output, late rows and state are removed, so its next run
        starts from scratch). A name registered anew never inherits data a crashed drop
        of the same name left behind.
        """
        kind: Kind = "table" if isinstance(spec, TableSpec) else "view"
        if isinstance(spec, TableSpec):
            self._check_stored_types(spec)
        stored = self._entries.read_text(_entry_name(spec.name))
        if stored is not None:
            current = _loaded(stored)
            if current is not None and current.spec == spec:
                return spec
            if current is not None and same_definition(current.spec, spec):
                return self._write_entry(spec)  # what chronolake derives, refreshed
            if not replace:
                raise taken_error(spec.name, current.kind if current else None, kind)
            self.drop(spec.name, kind=kind)
        elif self._entries.exists(_pending_name(spec.name)) or has_view_data(self.root, spec.name):
            self._finish_drop(spec.name, f"register {kind} {spec.name!r}")
        return self._write_entry(spec, statement_text)

    def _write_entry(self, spec: Spec, statement_text: str | None = None) -> Spec:
        entry = CatalogEntry(
            kind="table" if isinstance(spec, TableSpec) else "view",
            table=spec if isinstance(spec, TableSpec) else None,
            view=spec if isinstance(spec, ViewSpec) else None,
            statement=statement_text,
        )
        self._entries.write_text(_entry_name(spec.name), entry.model_dump_json(indent=2))
        return spec

    def drop(self, name: str, *, kind: Kind | None = None, if_exists: bool = False) -> Dropped:
        """Forget table or view `name`; for a view, delete chronolake's data of it too.

        Dropping a table never touches its Delta data (the user's source). Dropping a
        view removes its output table, late rows, state and checkpoints (`Dropped` says
        what, with the output's row count), under the view's run lock, so never during
        a run. `kind` ("table" / "view") refuses a name of the other kind; `if_exists`
        makes an absent name a no-op. Refused, naming them, while other views read
        `name`. Works from the stored JSON alone, so a registration that no longer loads
        can always be dropped; a drop a crash interrupted is finished by dropping again.
        """
        stored = self._entries.read_text(_entry_name(name))
        pending = self._entries.read_text(_pending_name(name))
        if stored is None and pending is None:
            if if_exists:
                return Dropped(name=name, kind=kind, existed=False)
            raise unknown_error(name, kind, self._registered_names())
        actual, shown = _kind_and_name(_raw_entry(stored or pending or ""), name)
        if kind is not None and actual is not None and actual != kind:
            raise wrong_kind_error(shown, actual, f"DROP {kind.upper()}")
        if stored is not None:
            readers = readers_of(name, self._stored_queries())
            if readers:
                raise readers_error(shown, actual or kind or "view", readers)
        action = f"drop {actual or 'registration'} {shown!r}"
        return Dropped(name=shown, kind=actual, removed=self._finish_drop(name, action))

    # -- reading ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered table and view names, sorted."""
        return sorted(self.specs())

    def spec(self, name: str) -> Spec:
        """The spec registered under `name` (case-insensitive)."""
        return self._entry(name).spec

    def entry(self, name: str) -> CatalogEntry:
        return self._entry(name)

    def table_path(self, spec: TableSpec) -> Location:
        """Where a table's Delta data lives: its `path` option, relative to the lake root."""
        return table_location(self.root, spec.options.path)

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
        return output_table_spec(spec, schema, view_data_keys(spec.name)[0])

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

    def operator_plan(self, view: ViewSpec) -> StoredPlan:
        """The operator plan of derived table `view`: the one its entry keeps while every
        registration it was bound against is unchanged, else bound now (`keep_plan` keeps it)."""
        entries = load_entries(self.root)
        specs = {name: entry.spec for name, entry in entries.items()}
        entry = entries.get(view.name.lower())
        stored = entry.plan if entry is not None and entry.spec == view else None
        if stored is not None and stored.holds_for(specs):
            return stored
        refuse_plain(view)  # before its inputs are bound: one of them may not have run yet
        return StoredPlan(
            bound_against=_registrations_read(view.query, specs),
            plan=bind_plan(view, self.operator_inputs(view.query)),
        )

    def keep_plan(self, view: ViewSpec, stored: StoredPlan) -> None:
        """Keep `stored` in the entry of `view` for its later runs. Called by a run under the
        view's lock once it checked the registration, so never into a dropped view's entry."""
        entry = self._entry(view.name)
        if entry.spec == view and entry.plan != stored:
            kept = entry.model_copy(update={"plan": stored})
            self._entries.write_text(_entry_name(view.name), kept.model_dump_json(indent=2))

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
                raise UnknownNameError(
                    f"query references unknown table {name!r}; registered: "
                    f"{', '.join(sorted(specs)) or 'none'} (declare it with CREATE TABLE first)"
                )
        specs = self.input_specs(query)
        for name in referenced_tables(query):
            self._register_temp_view(name.lower(), specs)
        if temporal_joins(query):
            return self._temporal_join(plan_temporal_join(query, specs), specs)
        return self.spark.sql(self._spark_query(query, specs))

    def changelog(self, name: str, start_version: int = 0, end_version: int | None = None
                  ) -> DataFrame:
        """A table's changes between two versions, with declared and system columns."""
        spec = self.source_spec(name)
        if not isinstance(spec, TableSpec):
            raise DefinitionError(
                f"{name!r} is a view computed on read; only tables and derived tables (views "
                f"with {OPERATOR_KINDS}) have a changelog"
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
        source = self.versions(dedup.source)
        if dedup.keep is KeepRow.FIRST:
            return first_versions(source, dedup.key, dedup.order_by)
        return forward_newer_versions(source, dedup.key, dedup.order_by)

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
            text = self._spark_query(spec.query, specs)
            self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` AS {text}")
        else:
            frame = relation_dataframe(self.spark, self.backend, spec, self.root)
            frame.createOrReplaceTempView(name)

    def _spark_query(self, query: str, specs: dict[str, Spec]) -> str:
        """Spark SQL of a query read now: `CURRENT_WATERMARK` is what each table holds now."""
        if not uses_current_watermark(query):
            return to_spark(query)
        tree = parse_query(query)
        held: dict[str, HeldWatermark] = {}
        for table in tree.find_all(exp.Table):
            spec = specs.get(table.name.lower())
            if isinstance(spec, TableSpec):
                found = held_by(spec, self._watermark_now(spec))
                if found is not None:
                    held |= {table.name.lower(): found, table.alias_or_name.lower(): found}
        return spark_sql(bind(tree, held, where=f"query {query!r}"))

    def _watermark_now(self, spec: TableSpec) -> int | None:
        """The watermark a table holds now: a derived table's last recorded one; a source's
        generated over all its commits (one Spark job); None under processing time."""
        if spec.derived:
            return latest_recorded_watermark(self.table_path(spec))
        hybrid = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
        if spec.watermark is None or hybrid:
            return None
        assigner = WatermarkAssigner.for_table(spec)
        return assigner.assign(self.changelog(spec.name)).state().watermark

    def _drop_statement(self, statement: DropStatement) -> Dropped:
        """A DROP; for a replacement, the drop and then the new definition registered."""
        dropped = self.drop(statement.name, kind=statement.kind, if_exists=statement.if_exists)
        if statement.replaced_by is None:
            return dropped
        self.register(statement.replaced_by)
        return dropped.model_copy(update={"replaced_by": statement.replaced_by})

    def _finish_drop(self, name: str, action: str) -> RemovedData:
        """Unregister `name` and remove its data, in an order a crash cannot spoil: the entry
        is set aside first (copied to `<name>.dropping`, then removed: the name is then free,
        and nothing can run it), the data goes, the set-aside entry last; `drop` or
        `register` of the name finishes the job. No rename, so object stores do the same."""
        entry, pending = _entry_name(name), _pending_name(name)
        with removal_lock(self.root, name, action):
            stored = self._entries.read_text(entry)
            if stored is not None:
                self._entries.write_text(pending, stored)
                self._entries.delete(entry)
            removed = remove_view_data(self.root, name)
            self._entries.delete(pending)
        return removed

    def _parse(self, script: str) -> list[Statement]:
        """A script's statements, checked against the registrations that load; those that do
        not (and drops a crash interrupted) may only be dropped."""
        specs: dict[str, Spec] = {}
        unloaded = _stems(self._entries, _DROPPING)
        for name in _stems(self._entries, _ENTRY):
            entry = _loaded(self._entries.read_text(_entry_name(name)) or "")
            if entry is None:
                unloaded.append(name)
            else:
                specs[name] = entry.spec
        statements = parse_statements(script, catalog=specs, droppable=unloaded)
        for statement in statements:  # a replacement's too: it must not drop, then fail
            table = statement.replaced_by if isinstance(statement, DropStatement) else statement
            if isinstance(table, TableSpec):
                self._check_stored_types(table)
        return statements

    def _check_stored_types(self, spec: TableSpec) -> None:
        """Refuse declared types that would change the values an existing Delta table holds
        (`chronolake.catalog.stored_types`); a table with no data yet may declare any."""
        stored = stored_schema(self.table_path(spec))
        if stored is not None:
            check_stored_types(spec, stored)

    def _stored_queries(self) -> dict[str, str]:
        """Every registered view's query, from the stored JSON (no spec validation)."""
        queries = {}
        for name in _stems(self._entries, _ENTRY):
            raw = _raw_entry(self._entries.read_text(_entry_name(name)) or "")
            view = raw.get("view") if raw.get("kind") == "view" else None
            query = view.get("query") if isinstance(view, dict) else None
            if isinstance(query, str):
                queries[name] = query
        return queries

    def _registered_names(self) -> list[str]:
        return _stems(self._entries, _ENTRY)

    def _entry(self, name: str) -> CatalogEntry:
        stored = self._entries.read_text(_entry_name(name))
        if stored is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownNameError(f"unknown table or view {name!r}; registered: {known}")
        return _load(self._entries, name.lower(), stored)

    def specs(self) -> dict[str, Spec]:
        """Every registered spec by (lower-case) name."""
        return {name: entry.spec for name, entry in load_entries(self.root).items()}


def load_entries(root: LocationLike) -> dict[str, CatalogEntry]:
    """The catalog entries of a lake without a Spark session (for Dagster definitions)."""
    entries = _entries(root)
    return {
        name: _load(entries, name, entries.read_text(_entry_name(name)) or "")
        for name in _stems(entries, _ENTRY)
    }


def _registrations_read(query: str, specs: dict[str, Spec]) -> dict[str, str]:
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


def _entries(root: LocationLike) -> Storage:
    """The folder of a lake's catalog entries: `<name>.json` each, `<name>.dropping` while a
    drop removes it."""
    return Storage(catalog_dir(root))


def _entry_name(name: str) -> str:
    return f"{name.lower()}{_ENTRY}"


def _pending_name(name: str) -> str:
    return f"{name.lower()}{_DROPPING}"


def _stems(entries: Storage, suffix: str) -> list[str]:
    """The names of the entries whose documents end with `suffix`."""
    return [file.removesuffix(suffix) for file in entries.names() if file.endswith(suffix)]


def _load(entries: Storage, name: str, stored: str) -> CatalogEntry:
    """The entry `stored` of `name`; a `DefinitionError` saying how to remove it when it no
    longer loads (written by another chronolake version, or edited by hand)."""
    try:
        return CatalogEntry.read_json(stored, where=str(entries.path_of(_entry_name(name))))
    except ValidationError as error:
        kind = _raw_entry(stored).get("kind")
        keyword = kind.upper() if kind in ("table", "view") else "VIEW (or TABLE)"
        first = str(error).splitlines()[1:3]
        msg = (
            f"the registration of {name!r} ({entries.path_of(_entry_name(name))}) no longer "
            f"loads: {'; '.join(line.strip() for line in first)}; drop it with DROP {keyword} "
            f"{name} (a broken registration can always be dropped) and declare it again"
        )
        raise DefinitionError(msg) from None


def _loaded(stored: str) -> CatalogEntry | None:
    """The entry `stored`, or None when it no longer loads."""
    try:
        return CatalogEntry.read_json(stored, where="a catalog entry")
    except (ValidationError, DefinitionError):
        return None


def _kind_and_name(raw: dict[str, object], name: str) -> tuple[Kind | None, str]:
    """What a stored entry is and its name as declared, as far as its JSON still says."""
    kind = raw.get("kind")
    if kind != "table" and kind != "view":
        return None, name
    spec = raw.get(kind)
    declared = spec.get("name") if isinstance(spec, dict) else None
    return kind, declared if isinstance(declared, str) else name


def _raw_entry(stored: str) -> dict[str, object]:
    """The stored JSON of an entry as it is ({} when it is not a JSON object)."""
    try:
        raw = json.loads(stored)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}

