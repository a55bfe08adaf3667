"""A view's tables and columns, resolved against the catalog when the view is declared.

A typo in a view (`FROM ordres`, `o.amonut`) fails at `CREATE VIEW`, naming the view,
the unknown name and the closest known one, instead of at the view's first run. No
Spark is needed: sqlglot's `qualify` attributes each column to a relation of its
scope, using a schema built from the catalog: a table's declared columns (physical,
computed and metadata), a view's output columns (resolved the same way), and a window
table function's input columns plus `window_start`, `window_end` and `window_time`.

Only names that are definitely unknown are refused. A relation whose columns cannot
be known (a table function, a view with an unnamed SELECT item) makes its scope's
unqualified columns unchecked; Spark still checks them when the view runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from contextlib import suppress

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from chronolake.errors import DefinitionError, UnknownNameError
from chronolake.schema.dialect import Flink, TableArgument, expression_type
from chronolake.schema.spec import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    TableSpec,
    ViewSpec,
)
from chronolake.schema.windows import WINDOW_END, WINDOW_START, WINDOW_TIME
from chronolake.sql._names import relation_name
from chronolake.sql.history import (
    COMMITTED_AT,
    COMMITTED_AT_TYPE,
    VALID_FROM,
    VALID_TO,
    reads_history,
    versioned,
    written_read,
)
from chronolake.sql.query import parse_query

Catalog = Mapping[str, TableSpec | ViewSpec]
# A relation's columns: lower-cased name -> (name as declared, Flink type or UNKNOWN).
Columns = dict[str, tuple[str, str]]

_WINDOW_FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
_UNNAMED = "chronolake_unnamed"  # meta flag: a SELECT item whose output name only Spark knows
_UNKNOWN_TYPE = "UNKNOWN"
# sqlglot reads the unit of TIMESTAMPDIFF(SECOND, a, b) and the like as a column.
_TIME_UNITS = frozenset({
    "year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond",
    "microsecond", "nanosecond", "dow", "doy", "epoch", "isodow", "isoyear", "century",
    "decade", "millennium",
})
_LISTED = 12  # names listed when no close match is found


def resolve_view(name: str, query: exp.Query, catalog: Catalog) -> None:
    """Raise `DefinitionError` when view `name` reads a table or column that does not exist."""
    _Resolver(catalog).resolve(name, query)


class _Resolver:
    """Resolves queries over one catalog, remembering each view's output columns."""

    def __init__(self, catalog: Catalog) -> None:
        self.specs = {key.lower(): spec for key, spec in catalog.items()}
        self.outputs: dict[str, Columns | None] = {}

    def resolve(self, view: str, query: exp.Query) -> Columns | None:
        """The output columns of `query` (None when not all are known); raises on unknown names."""
        return _Query(self, view, query).resolve()

    def columns_of(self, name: str) -> Columns | None:
        """The columns a registered table or view exposes; None when they cannot be known."""
        spec = self.specs.get(name.lower())
        if isinstance(spec, TableSpec):
            return {c.name.lower(): (c.name, _column_type(c)) for c in spec.columns}
        if spec is None:
            return None
        key = spec.name.lower()
        if key not in self.outputs:
            self.outputs[key] = None  # a view that reads itself resolves to "not known"
            with suppress(DefinitionError):  # a view broken since declared: columns not known
                self.outputs[key] = self.resolve(spec.name, parse_query(spec.query))
        return self.outputs[key]


class _Query:
    """One query being resolved: lower-cased names, relations renamed to schema entries."""

    def __init__(self, resolver: _Resolver, view: str, query: exp.Query) -> None:
        self.resolver = resolver
        self.view = view
        self.written: dict[str, str] = {}  # lower-cased name -> as first written
        for identifier in query.find_all(exp.Identifier):
            self.written.setdefault(identifier.name.lower(), identifier.name)
        self.tree = query.copy()
        for identifier in self.tree.find_all(exp.Identifier):
            identifier.set("this", identifier.name.lower())  # Spark's names ignore case
        self.schema: dict[str, Columns] = {}
        self.shown: dict[str, str] = {}  # schema entry -> how the query names the relation

    def resolve(self) -> Columns | None:
        self._check_tables()
        self._replace_window_functions()
        self._replace_tables()
        for select in self.tree.find_all(exp.Select):
            for item in select.expressions:
                if not isinstance(item, exp.Alias | exp.Column | exp.Star):
                    item.meta[_UNNAMED] = True
        try:
            schema = MappingSchema(
                {entry: {column: kind for column, (_, kind) in columns.items()}
                 for entry, columns in self.schema.items()},
                dialect=Flink, normalize=False,
            )
            qualified = qualify(
                self.tree, dialect=Flink, schema=schema, validate_qualify_columns=False,
                allow_partial_qualification=True, quote_identifiers=False,
            )
            scopes = traverse_scope(qualified)
        except SqlglotError:
            return None  # a construct sqlglot cannot follow: Spark checks the view on its run
        for scope in scopes:
            for column in scope.columns:
                self._check_column(column, scope)
        return self._outputs(qualified)

    # -- relations ------------------------------------------------------------------------

    def _check_tables(self) -> None:
        ctes = {cte.alias_or_name for cte in self.tree.find_all(exp.CTE)}
        for table in self.tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                continue
            name = relation_name(table)
            if name in ctes or name in self.resolver.specs:
                continue
            known = sorted(spec.name for spec in self.resolver.specs.values())
            raise UnknownNameError(
                f"view {self.view!r} reads unknown table {self._shown(name)!r}; declare it first "
                f"(CREATE TABLE {self._shown(name)} ...) or fix the name: "
                f"{_hint(self._shown(name), known)}"
            )

    def _replace_window_functions(self) -> None:
        """`TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), ...))` reads as a relation: t's columns and
        the window's; its DESCRIPTOR column must be one of t's."""
        for relation in list(self.tree.find_all(exp.Table)):
            call = _window_call(relation)
            if call is None:
                continue
            source = relation_name(call.expressions[0].this)
            columns = self.resolver.columns_of(source)
            if columns is not None:
                self._check_descriptor(call, source, columns)
                windows = {c: (c, "TIMESTAMP(3)") for c in (WINDOW_START, WINDOW_END, WINDOW_TIME)}
                columns = {**columns, **windows}
            written = f"{call.name.upper()}(TABLE {self._shown(source)}, ...)"
            alias = relation.alias or call.expressions[0].this.name
            self._replace(relation, columns, written, alias)

    def _check_descriptor(self, call: exp.Anonymous, source: str, columns: Columns) -> None:
        descriptor = call.expressions[1] if len(call.expressions) > 1 else None
        if not isinstance(descriptor, exp.Anonymous) or descriptor.name.upper() != "DESCRIPTOR":
            return
        for column in descriptor.find_all(exp.Column):
            head = column.parts[0].name
            if head in columns:
                continue
            raise DefinitionError(
                f"view {self.view!r} reads unknown column {self._shown(head)!r} of "
                f"{self._shown(source)!r} in {call.name.upper()}(TABLE {self._shown(source)}, "
                f"DESCRIPTOR({self._shown(head)}), ...); "
                f"{_hint(self._shown(head), _names(columns))}"
            )

    def _replace_tables(self) -> None:
        """Catalog tables and views become flat schema entries (`db.t` would need a nested
        schema); an unaliased one keeps its name as its alias, so `orders.amount` resolves."""
        ctes = {cte.alias_or_name for cte in self.tree.find_all(exp.CTE)}
        for table in list(self.tree.find_all(exp.Table)):
            name = relation_name(table)
            if not isinstance(table.this, exp.Identifier) or name in self.shown:
                continue
            if name in ctes and not table.db:
                continue
            columns = self.resolver.columns_of(name)
            if reads_history(table):
                columns = self._with_history(table, name, columns)
            self._replace(table, columns, self._shown(name), table.alias or table.name)

    def _with_history(self, table: exp.Table, name: str, columns: Columns | None
                      ) -> Columns | None:
        """A history read's columns: the table's and its validity (`chronolake.sql.history`);
        a table without versions is refused here."""
        spec = self.resolver.specs.get(name)
        if spec is None or columns is None:
            return columns
        how = versioned(spec, f"view {self.view!r} reads {written_read(table)}")
        time_type = columns.get(how.time.lower(), (how.time, _UNKNOWN_TYPE))[1]
        return {
            **columns,
            VALID_FROM: (VALID_FROM, time_type),
            VALID_TO: (VALID_TO, time_type),
            COMMITTED_AT: (COMMITTED_AT, COMMITTED_AT_TYPE),
        }

    def _replace(
        self, relation: exp.Table, columns: Columns | None, shown: str, alias: str
    ) -> None:
        entry = f"_chronolake_relation_{len(self.shown)}"
        self.shown[entry] = shown
        if columns is not None:
            self.schema[entry] = columns
        relation.set("this", exp.to_identifier(entry))
        relation.set("db", None)
        relation.set("catalog", None)
        relation.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))

    # -- columns --------------------------------------------------------------------------

    def _check_column(self, column: exp.Column, scope: Scope) -> None:
        if isinstance(column.this, exp.Star) or column.find_ancestor(exp.Lambda):
            return
        visible = _visible_sources(scope)
        columns = {alias: self._source_columns(source) for alias, source in visible.items()}
        name, qualifier = column.name, column.table
        if column.args.get("db") is not None:
            return  # `t.row_column.field`: a nested field, not checked here
        if qualifier and qualifier in columns:
            known = columns[qualifier]
            if known is not None and name not in known:
                self._unknown_column(f"{qualifier}.{name}", name, {qualifier: known},
                                     visible)
            return
        if None in columns.values() or any(
            (qualifier or name) in known for known in columns.values() if known is not None
        ):
            return  # a column of a relation we cannot see into, or a field of a ROW column
        if qualifier:
            aliases = sorted(self._shown(alias) for alias in visible)
            raise DefinitionError(
                f"view {self.view!r} reads {self._shown(qualifier)}.{self._shown(name)}, but "
                f"no relation in its FROM clause is named {self._shown(qualifier)!r}; "
                f"{_hint(self._shown(qualifier), aliases)}"
            )
        if name in _TIME_UNITS or name in _other_outputs(scope, column):
            return
        self._unknown_column(name, name, columns, visible)

    def _unknown_column(
        self, written: str, name: str, columns: Mapping[str, Columns | None],
        visible: Mapping[str, exp.Expr | Scope],
    ) -> None:
        candidates = [n for known in columns.values() if known for n in _names(known)]
        lines = [
            f"view {self.view!r} reads unknown column {self._shown_path(written)!r}; "
            f"{_hint(self._shown(name), list(dict.fromkeys(candidates)), listing=False)}",
        ]
        for alias, known in columns.items():
            if known is not None:
                relation = self._relation_words(alias, visible[alias])
                lines.append(f"{relation} has: {_listing(_names(known))}")
        raise DefinitionError("\n".join(lines))

    def _source_columns(self, source: exp.Expr | Scope) -> Columns | None:
        if isinstance(source, Scope):
            return self._outputs(source.expression)
        if isinstance(source, exp.Table):
            return self.schema.get(source.name)
        return None

    def _outputs(self, query: exp.Expr) -> Columns | None:
        """A query's output columns after `qualify`; None when one is unnamed or unexpanded."""
        while isinstance(query, exp.SetOperation):
            query = query.left  # a UNION's columns are named by its first SELECT
        if not isinstance(query, exp.Select):
            return None
        outputs: Columns = {}
        for item in query.expressions:
            value = item.this if isinstance(item, exp.Alias) else item
            if item.is_star or value.meta.get(_UNNAMED) or not item.alias_or_name:
                return None
            outputs[item.alias_or_name] = (self._shown(item.alias_or_name), _UNKNOWN_TYPE)
        return outputs

    # -- names as written -----------------------------------------------------------------

    def _shown(self, name: str) -> str:
        return self.shown.get(name) or self.written.get(name, name)

    def _shown_path(self, path: str) -> str:
        return ".".join(self._shown(part) for part in path.split("."))

    def _relation_words(self, alias: str, source: exp.Expr | Scope) -> str:
        if isinstance(source, exp.Table) and source.name in self.shown:
            relation = self.shown[source.name]
            return relation if relation == self._shown(alias) else (
                f"{self._shown(alias)} ({relation})"
            )
        return f"subquery {alias}" if alias in self.written else "the subquery"


def _window_call(relation: exp.Table) -> exp.Anonymous | None:
    """The window function of `TABLE(TUMBLE(TABLE t, ...))` in a FROM clause, if it is one."""
    outer = relation.this
    if not (isinstance(outer, exp.Anonymous) and outer.name.upper() == "TABLE"
            and len(outer.expressions) == 1):
        return None
    call = outer.expressions[0]
    if not (isinstance(call, exp.Anonymous) and call.name.upper() in _WINDOW_FUNCTIONS
            and call.expressions and isinstance(call.expressions[0], TableArgument)):
        return None
    return call


def _visible_sources(scope: Scope) -> dict[str, exp.Expr | Scope]:
    """The relations a column of `scope` may name: its own, and for a subquery in an
    expression (which may be correlated) those of the queries around it."""
    visible: dict[str, exp.Expr | Scope] = {}
    current: Scope | None = scope
    while current is not None:
        for alias, source in current.sources.items():
            visible.setdefault(alias, source)
        current = current.parent if current.is_subquery or current.is_udtf else None
    return visible


def _other_outputs(scope: Scope, column: exp.Column) -> set[str]:
    """The SELECT's output names that `column` may use: in GROUP BY, HAVING and ORDER BY,
    and (Spark's lateral aliases) in another SELECT item than the one naming it."""
    select = scope.expression
    if not isinstance(select, exp.Select):
        return set()
    own = next((item for item in select.expressions if column in item.find_all(exp.Column)),
               None)
    return {item.alias_or_name for item in select.expressions if item is not own}


def _column_type(column: PhysicalColumn | ComputedColumn | MetadataColumn) -> str:
    if isinstance(column, ComputedColumn):
        return expression_type(column.expression) or _UNKNOWN_TYPE
    return column.type


def _names(columns: Columns) -> list[str]:
    return [declared for declared, _ in columns.values()]


def _hint(name: str, known: list[str], *, listing: bool = True) -> str:
    """`did you mean 'x'?`, or the known names when none is close."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    if close:
        return f"did you mean {by_lower[close[0]]!r}?"
    if not listing:
        return "no known name is close"
    return f"known: {_listing(known)}" if known else "none is declared yet"


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _LISTED else "")

