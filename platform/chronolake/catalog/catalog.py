"""The catalog: tables and views declared once, persisted in the lake, queried with SQL.

`Catalog` is the face a user holds: it runs DDL scripts against the lake's `Registry`,
answers queries through a `QuerySession`, and binds a derived table's operator plan
against what `chronolake.catalog.inputs` resolves its query's names to.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession

from chronolake.catalog.complete_as_of import AsOf
from chronolake.catalog.entry import CatalogEntry, Dropped, Spec
from chronolake.catalog.inputs import operator_inputs, registrations_read
from chronolake.catalog.inspection import Shown, answer
from chronolake.catalog.query import QuerySession
from chronolake.catalog.registry import Registry
from chronolake.catalog.removal import has_view_data
from chronolake.catalog.stored_types import check_stored_types
from chronolake.errors import DefinitionError
from chronolake.lake import LakeBackend, backend_for
from chronolake.lake.layout import table_location
from chronolake.lake.tables import stored_schema
from chronolake.location import Location, LocationLike, as_location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.spark.session import local_spark_session
from chronolake.spark.stack import BackendChoice, chosen_backend
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
from chronolake.sql.inspection import InspectionStatement
from chronolake.sql.operator_plan import StoredPlan, bind_plan, refuse_plain
from chronolake.sql.time_partitions import partitioned_on


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
        self.registry = Registry(self.root)
        self._spark = spark
        self._backend_kind = chosen_backend(backend)

    @cached_property
    def spark(self) -> SparkSession:
        """The Spark session; created on first use, so declaring tables needs no JVM."""
        return self._spark or local_spark_session(lake=self.root, backend=self._backend_kind)

    @cached_property
    def backend(self) -> LakeBackend:
        return backend_for(self.spark, self._backend_kind)

    @cached_property
    def queries(self) -> QuerySession:
        """Queries over this lake's tables and views, answered as Spark frames."""
        return QuerySession(self.spark, self.backend, self.registry)

    # -- declaring -------------------------------------------------------------------------

    def execute(self, statement: str) -> Spec | Dropped | DataFrame | Shown:
        """Run one statement: DDL registers a table or view (a DROP returns what it removed); a
        query returns its DataFrame."""
        results = list(self.run_script(statement))
        if len(results) != 1:
            raise DefinitionError(
                f"execute() takes exactly one statement, got {len(results)}; "
                "use run_script() for a script"
            )
        return results[0][1]

    def run_script(self, script: str, *, complete_as_of: AsOf | None = None
                   ) -> Iterator[tuple[str, Spec | Dropped | DataFrame | Shown]]:
        """Run a script's statements in order, yielding (statement text, result) for each:
        the spec registered, what a DROP removed, a query's rows (read complete as of
        `complete_as_of` when given: `sql`), or what SHOW, DESCRIBE or EXPLAIN shows
        (`chronolake.catalog.inspection`: a small DataFrame, or `Shown` text).

        The whole script is checked first, so an error anywhere (a syntax error, an unknown
        name, a DROP of a table views read) changes nothing.
        """
        for statement in self._parse(script):
            if isinstance(statement, QueryStatement):
                yield statement.sql, self.sql(statement.sql, complete_as_of=complete_as_of)
            elif isinstance(statement, DropStatement):
                yield statement.name, self._drop_statement(statement)
            elif isinstance(statement, InspectionStatement):
                yield _inspected(statement), answer(self, statement)
            else:
                yield statement.name, self.register(statement)

    def declare(self, script: str) -> list[Spec]:
        """Apply a DDL script's CREATE and DROP statements (no Spark needed) and return the
        specs registered; queries are refused."""
        statements = self._parse(script)
        queries = [_inspected(s) for s in statements
                   if isinstance(s, QueryStatement | InspectionStatement)]
        if queries:
            raise DefinitionError(
                f"declare() takes CREATE / DROP TABLE / VIEW only, got a query: "
                f"{queries[0][:60]!r}; run queries and SHOW / DESCRIBE / EXPLAIN with "
                "run_script()"
            )
        registered = []
        for statement in statements:
            if isinstance(statement, DropStatement):
                replaced_by = self._drop_statement(statement).replaced_by
                registered += [replaced_by] if replaced_by else []
            elif isinstance(statement, TableSpec | ViewSpec):
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
        spec = spec.model_copy(update={"time": partitioned_on(spec, spec.time)})  # as DDL does
        if isinstance(spec, TableSpec):
            self._check_stored_types(spec)
        if self.registry.is_registered(spec.name):
            current = self.registry.current(spec.name)
            if current is not None and current.spec == spec:
                return spec
            if current is not None and same_definition(current.spec, spec):
                return self.registry.write(spec)  # what chronolake derives, refreshed
            if not replace:
                raise taken_error(spec.name, current.kind if current else None, kind)
            self.drop(spec.name, kind=kind)
        elif self.registry.is_being_dropped(spec.name) or has_view_data(self.root, spec.name):
            self.registry.remove(spec.name, f"register {kind} {spec.name!r}")
        return self.registry.write(spec, statement_text)

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
        stored = self.registry.stored_kind(name)
        if stored is None:
            if if_exists:
                return Dropped(name=name, kind=kind, existed=False)
            raise unknown_error(name, kind, self.registry.names())
        actual, shown = stored
        if kind is not None and actual is not None and actual != kind:
            raise wrong_kind_error(shown, actual, f"DROP {kind.upper()}")
        if self.registry.is_registered(name):
            readers = readers_of(name, self.registry.stored_queries())
            if readers:
                raise readers_error(shown, actual or kind or "view", readers)
        action = f"drop {actual or 'registration'} {shown!r}"
        return Dropped(name=shown, kind=actual, removed=self.registry.remove(name, action))

    # -- reading ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered table and view names, sorted."""
        return sorted(self.specs())

    def specs(self) -> dict[str, Spec]:
        """Every registered spec by (lower-case) name."""
        return self.registry.specs()

    def spec(self, name: str) -> Spec:
        """The spec registered under `name` (case-insensitive)."""
        return self.registry.entry(name).spec

    def entry(self, name: str) -> CatalogEntry:
        return self.registry.entry(name)

    def table_path(self, spec: TableSpec) -> Location:
        """Where a table's Delta data lives: its `path` option, relative to the lake root."""
        return table_location(self.root, spec.options.path)

    def table(self, name: str) -> DataFrame:
        """The current contents of a table or view, with computed and metadata columns applied.

        A changelog table reads as its materialized state at the latest version
        (inserts, updates and deletes applied).
        """
        return self.sql(f"SELECT * FROM {name}")

    def sql(self, query: str, *, complete_as_of: AsOf | None = None) -> DataFrame:
        """A Flink SQL query over registered tables and views, as a Spark DataFrame
        (`QuerySession.sql`: inputs read as bounded).

        `complete_as_of` (`'2026-11-02 10:00'`, UTC, or a datetime) reads the lake as it was
        complete as of then, reproducibly: each derived table at the first version whose
        watermark reached it, each source at the version those versions consumed; tables
        without a watermark, or not there yet, are refused by name
        (`chronolake.catalog.complete_as_of`).

        Example:
            >>> catalog.sql("SELECT * FROM per_window", complete_as_of="2026-11-02 10:00")
        """
        return self.queries.sql(query, complete_as_of=complete_as_of)

    def changelog(self, name: str, start_version: int = 0, end_version: int | None = None
                  ) -> DataFrame:
        """A table's changes between two versions, with declared and system columns."""
        return self.queries.changelog(name, start_version, end_version)

    def versions(self, name: str) -> DataFrame:
        """The version events of a versioned table or deduplication view, in arrival order."""
        return self.queries.versions(name)

    # -- operator plans --------------------------------------------------------------------

    def operator_inputs(self, query: str) -> dict[str, Spec]:
        """What an operator running `query` reads each name as (`inputs.operator_inputs`)."""
        return self._operator_inputs(query, self.specs())

    def operator_plan(self, view: ViewSpec) -> StoredPlan:
        """The operator plan of derived table `view`: the one its entry keeps while every
        registration it was bound against is unchanged, else bound now (`keep_plan` keeps it)."""
        entries = self.registry.entries()
        specs = {name: entry.spec for name, entry in entries.items()}
        entry = entries.get(view.name.lower())
        stored = entry.plan if entry is not None and entry.spec == view else None
        if stored is not None and stored.holds_for(specs):
            return stored
        refuse_plain(view)  # before its inputs are bound: one of them may not have run yet
        return StoredPlan(
            bound_against=registrations_read(view.query, specs),
            plan=bind_plan(view, self._operator_inputs(view.query, specs)),
        )

    def _operator_inputs(self, query: str, specs: dict[str, Spec]) -> dict[str, Spec]:
        return operator_inputs(query, specs, self, lambda text: self.sql(text).schema)

    def keep_plan(self, view: ViewSpec, stored: StoredPlan) -> None:
        """Keep `stored` in the entry of `view` for its later runs (`Registry.keep_plan`)."""
        self.registry.keep_plan(view, stored)

    # -- internals -------------------------------------------------------------------------

    def _drop_statement(self, statement: DropStatement) -> Dropped:
        """A DROP; for a replacement, the drop and then the new definition registered."""
        dropped = self.drop(statement.name, kind=statement.kind, if_exists=statement.if_exists)
        if statement.replaced_by is None:
            return dropped
        self.register(statement.replaced_by)
        return dropped.model_copy(update={"replaced_by": statement.replaced_by})

    def _parse(self, script: str) -> list[Statement]:
        """A script's statements, checked against the registrations that load; those that do
        not (and drops a crash interrupted) may only be dropped."""
        specs, unloaded = self.registry.loadable()
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


def _inspected(statement: QueryStatement | InspectionStatement) -> str:
    """A query's or an inspection's text, as `run_script` yields it."""
    return statement.sql if isinstance(statement, QueryStatement) else statement.written
