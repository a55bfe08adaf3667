"""`CREATE VIEW` to `ViewSpec`: which views are deduplications, and what they keep.

FLIP-132: `SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t
DESC) AS rn FROM src) WHERE rn = 1` keeps the last row per `k`, `ORDER BY t ASC` the
first. Its key is `k`, and it keeps `t` as rowtime when `t` is `src`'s rowtime: a
versioned view either way, as in Flink (a keep-first view has one version per key,
its first row, valid from `t` on: `chronolake.joins.versions`). On a processing-time
order it has the key but no rowtime: a regular view. Any other view is regular,
without a key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import canonical_sql
from chronolake.schema.spec import DeduplicationSpec, KeepRow, TableSpec, ViewSpec
from chronolake.schema.time_options import TimeOptions, known_time_keys
from chronolake.sql._names import lookup, relation_name
from chronolake.sql._tables import with_options
from chronolake.sql.resolve import resolve_view
from chronolake.sql.time_partitions import partitioned_on
from chronolake.sql.view_kinds import check_current_watermark, derived_view, with_kind

Catalog = Mapping[str, TableSpec | ViewSpec]
_MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ, exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT,
}
_RANK_ONE = {(exp.EQ, 1), (exp.LTE, 1), (exp.LT, 2)}
# Maps a column name of a query's output to the source column it passes through (or None).
Origin = Callable[[str], str | None]


def view_spec(create: exp.Create, catalog: Catalog) -> ViewSpec:
    """The spec a `CREATE VIEW name AS SELECT ...` declares."""
    target = create.this
    if isinstance(target, exp.Schema):
        name = relation_name(target.this)
        msg = (
            f"view {name!r}: a column list after the view name is not supported; name the "
            "columns in the SELECT (expr AS name)"
        )
        raise DefinitionError(msg)
    name = relation_name(target)
    query = create.expression
    if not isinstance(query, exp.Query):
        msg = f"view {name!r}: expected CREATE VIEW {name} AS SELECT ..."
        raise DefinitionError(msg)
    resolve_view(name, query, catalog)
    time, rest = TimeOptions.split(with_options(create, f"view {name!r}"), owner=f"view {name!r}")
    if rest:
        msg = (f"view {name!r}: option(s) {', '.join(map(repr, sorted(rest)))} are a table's; "
               f"a view's WITH options are its time options: {', '.join(known_time_keys())}")
        raise DefinitionError(msg)
    spec = _spec(name, query, catalog)
    return spec.model_copy(update={"time": partitioned_on(spec, time)})


def _spec(name: str, query: exp.Query, catalog: Catalog) -> ViewSpec:
    deduplication = _deduplication(query, catalog)
    spec = ViewSpec(name=name, query=canonical_sql(query))
    if deduplication is None:
        spec = with_kind(spec)
        check_current_watermark(spec)
        return derived_view(spec, catalog)
    dedup, origin_to_output = deduplication
    check_current_watermark(with_kind(spec.model_copy(update={"deduplication": dedup})))
    key = tuple(origin_to_output(column) for column in dedup.key)
    if any(column is None for column in key):
        return with_kind(spec)  # the key is projected away: no unique key is left
    source = lookup(catalog, dedup.source, reader=f"view {name!r}")
    rowtime = None
    if _same(dedup.order_by, source.rowtime):
        rowtime = origin_to_output(dedup.order_by)
    return with_kind(spec.model_copy(update={
        "primary_key": key, "rowtime": rowtime, "deduplication": dedup,
        "updating": dedup.keep is KeepRow.LAST,  # keep-first never replaces a row
    }))


def _deduplication(
    query: exp.Query, catalog: Catalog
) -> tuple[DeduplicationSpec, Callable[[str], str | None]] | None:
    """The deduplication a query is, with a map from source columns to output names."""
    outer = query
    if not isinstance(outer, exp.Select):
        return None  # only a SELECT reads one relation (`_from`)
    inner = _from(outer)
    if not (isinstance(inner, exp.Subquery) and isinstance(inner.this, exp.Select)):
        return None
    inner = inner.this
    source = _from(inner)
    if _has_other_clauses(outer) or _has_other_clauses(inner) or not isinstance(
        source, exp.Table
    ):
        return None
    if isinstance(source.this, exp.Anonymous):
        return None  # TABLE(TUMBLE(...)): a window deduplication (chronolake.sql.window_rank)
    numbering = _row_number(inner)
    if numbering is None:
        return None
    rank_column, window = numbering
    if not _keeps_rank_one(outer.args.get("where"), rank_column):
        return None
    ordered = window.args["order"].expressions
    keys = window.args.get("partition_by") or []
    if len(ordered) != 1 or not all(isinstance(k, exp.Column) for k in [ordered[0].this, *keys]):
        return None
    source_name = relation_name(source)
    order_by = ordered[0].this.name
    if not _is_time_attribute(catalog, source_name, order_by):
        return None  # Top-1 by a value, not a deduplication
    dedup = DeduplicationSpec(
        source=source_name,
        key=tuple(k.name for k in keys),
        order_by=order_by,
        keep=KeepRow.LAST if ordered[0].args.get("desc") else KeepRow.FIRST,
    )
    inner_origin = _origin(inner, lambda column: column)
    outer_items = _projections(outer)

    def output_of(column: str) -> str | None:
        for output, origin in outer_items:
            if origin is not None and _same(inner_origin(origin), column):
                return output
        star = any(isinstance(p, exp.Star) for p in outer.expressions)
        return column if star and _same(inner_origin(column), column) else None

    return dedup, output_of


def _from(query: exp.Query) -> exp.Expr | None:
    """The single relation a SELECT reads, if it is one."""
    source = query.args.get("from_") if isinstance(query, exp.Select) else None
    return source.this if source else None


def _has_other_clauses(select: exp.Select) -> bool:
    return any(select.args.get(arg) for arg in ("joins", "group", "having", "qualify", "limit"))


def _row_number(inner: exp.Select) -> tuple[str, exp.Window] | None:
    """(alias, window) of the one `ROW_NUMBER() OVER (... ORDER BY ...) AS alias`."""
    found = [
        (projection.alias, projection.this)
        for projection in inner.expressions
        if isinstance(projection, exp.Alias)
        and isinstance(projection.this, exp.Window)
        and isinstance(projection.this.this, exp.RowNumber)
        and projection.this.args.get("order")
    ]
    return found[0] if len(found) == 1 else None


def _keeps_rank_one(where: exp.Where | None, rank_column: str) -> bool:
    """`rn = 1`, `rn <= 1` or `rn < 2` (either side), the filters Flink reads as rank 1."""
    condition = where.this if where else None
    if condition is None or type(condition) not in _MIRRORED:
        return False
    column, value, operator = condition.this, condition.expression, type(condition)
    if isinstance(value, exp.Column):  # 1 = rn, 1 >= rn, 2 > rn
        column, value, operator = value, column, _MIRRORED[operator]
    return (
        isinstance(column, exp.Column) and _same(column.name, rank_column)
        and isinstance(value, exp.Literal) and value.is_int
        and (operator, int(value.name)) in _RANK_ONE
    )


def _is_time_attribute(catalog: Catalog, source: str, column: str) -> bool:
    spec = lookup(catalog, source, reader="deduplication")
    proctime = spec.proctime if isinstance(spec, TableSpec) else None
    return _same(column, spec.rowtime) or _same(column, proctime)


def _projections(select: exp.Select) -> list[tuple[str, str | None]]:
    """(output name, the input column it passes through or None) for named projections."""
    items = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            continue
        value = projection.this if isinstance(projection, exp.Alias) else projection
        origin = value.name if isinstance(value, exp.Column) else None
        items.append((projection.alias_or_name, origin))
    return items


def _origin(select: exp.Select, below: Origin) -> Origin:
    """Where an output column of `select` comes from, following `below` for its input."""
    items = _projections(select)
    star = any(isinstance(p, exp.Star) for p in select.expressions)

    def origin(name: str) -> str | None:
        for output, source in items:
            if _same(output, name):
                return below(source) if source is not None else None
        return below(name) if star else None

    return origin


def _same(left: str | None, right: str | None) -> bool:
    return left is not None and right is not None and left.lower() == right.lower()
