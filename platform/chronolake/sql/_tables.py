"""`CREATE TABLE` (Flink syntax) to `TableSpec`."""

from __future__ import annotations

from pydantic import ValidationError
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import (
    ComputedColumn,
    DeltaOptions,
    MetadataColumn,
    MetadataKey,
    PhysicalColumn,
    TableSpec,
    WatermarkSpec,
)
from chronolake.schema.dialect import Flink, MetadataColumnConstraint, canonical_sql, normalize_type
from chronolake.schema.time_options import TimeOptions
from chronolake.sql._names import relation_name
from chronolake.sql.time_partitions import partitioned_on

Column = PhysicalColumn | ComputedColumn | MetadataColumn
# Constraints Flink accepts on a column that change nothing for a Delta source.
_IGNORED_CONSTRAINTS = (exp.NotNullColumnConstraint, exp.CommentColumnConstraint)


def table_spec(create: exp.Create) -> TableSpec:
    """The spec a `CREATE TABLE` declares; every problem raises `DefinitionError`."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        name = relation_name(schema) if isinstance(schema, exp.Table) else "?"
        msg = (
            f"table {name!r}: CREATE TABLE needs a column list, e.g. CREATE TABLE {name} "
            "(id BIGINT, ts TIMESTAMP(3)) WITH ('path' = '...'); CREATE TABLE ... AS / LIKE "
            "are not supported"
        )
        raise DefinitionError(msg)
    name = relation_name(schema.this)
    columns: list[Column] = []
    watermarks: list[WatermarkSpec] = []
    keys: list[tuple[str, ...]] = []
    for element in schema.expressions:
        if isinstance(element, exp.ColumnDef):
            column, column_key = _column(name, element)
            columns.append(column)
            keys.extend([column_key] if column_key else [])
        elif isinstance(element, exp.WatermarkColumnConstraint):
            watermarks.append(WatermarkSpec(
                rowtime=canonical_sql(element.this),
                expression=canonical_sql(element.expression),
            ))
        else:
            keys.append(_table_key(name, element))
    if len(watermarks) > 1:
        msg = (
            f"table {name!r}: {len(watermarks)} WATERMARK clauses; a table has at most one "
            "rowtime attribute, keep one WATERMARK FOR ... AS ..."
        )
        raise DefinitionError(msg)
    if len(keys) > 1:
        msg = f"table {name!r}: more than one PRIMARY KEY; declare a single PRIMARY KEY (a, b)"
        raise DefinitionError(msg)
    time, connector = TimeOptions.split(with_options(create, f"table {name!r}"),
                                        owner=f"table {name!r}")
    try:
        spec = TableSpec(
            name=name,
            columns=tuple(columns),
            watermark=watermarks[0] if watermarks else None,
            primary_key=keys[0] if keys else (),
            options=DeltaOptions.from_map(connector, table=name),
            time=time,
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise DefinitionError(f"table {name!r}: {problems}") from None
    return spec.model_copy(update={"time": partitioned_on(spec, time)})


def _column(table: str, definition: exp.ColumnDef) -> tuple[Column, tuple[str, ...] | None]:
    name = definition.name
    prefix = f"table {table!r}, column {name!r}"
    kinds = [c.args["kind"] for c in definition.args.get("constraints") or []]
    key = None
    computed = metadata = None
    for kind in kinds:
        if isinstance(kind, exp.ComputedColumnConstraint):
            computed = kind
        elif isinstance(kind, MetadataColumnConstraint):
            metadata = kind
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            _require_not_enforced(table, kind, f"{name} ... PRIMARY KEY")
            key = (name,)
        elif not isinstance(kind, _IGNORED_CONSTRAINTS):
            msg = (
                f"{prefix}: {canonical_sql(kind)} is not supported; a column is `name TYPE`, "
                "`name AS expression` or `name TYPE METADATA [FROM 'key'] VIRTUAL`"
            )
            raise DefinitionError(msg)
    data_type = definition.args.get("kind")
    if computed is not None:
        if data_type is not None:
            msg = (
                f"{prefix}: a computed column has no declared type; write `{name} AS "
                f"{canonical_sql(computed.this)}` (for changelog metadata write `{name} "
                "TIMESTAMP_LTZ(3) METADATA FROM 'commit_timestamp' VIRTUAL`)"
            )
            raise DefinitionError(msg)
        return ComputedColumn(name=name, expression=canonical_sql(computed.this)), key
    if data_type is None:
        msg = f"{prefix}: the column needs a type, e.g. `{name} STRING`, or `{name} AS <expr>`"
        raise DefinitionError(msg)
    type_text = _type_text(prefix, data_type)
    if metadata is not None:
        return _metadata_column(prefix, name, type_text, metadata), key
    return PhysicalColumn(name=name, type=type_text), key


def _type_text(prefix: str, data_type: exp.DataType) -> str:
    try:
        return normalize_type(data_type.sql(dialect=Flink))
    except DefinitionError as error:
        raise DefinitionError(f"{prefix}: {error}") from None


def _metadata_column(
    prefix: str, name: str, type_text: str, metadata: MetadataColumnConstraint
) -> MetadataColumn:
    key = metadata.this.name if metadata.this else name
    known = [k.value for k in MetadataKey]
    if key not in known:
        msg = (
            f"{prefix}: unknown metadata key {key!r}; a Delta changelog provides "
            f"{', '.join(map(repr, known))}, e.g. METADATA FROM 'commit_timestamp' VIRTUAL"
        )
        raise DefinitionError(msg)
    if not metadata.args.get("virtual"):
        msg = (
            f"{prefix}: metadata columns are read-only here; add VIRTUAL, e.g. "
            f"`{name} {type_text} METADATA FROM '{key}' VIRTUAL`"
        )
        raise DefinitionError(msg)
    return MetadataColumn(name=name, type=type_text, key=MetadataKey(key))


def _table_key(table: str, element: exp.Expr) -> tuple[str, ...]:
    """A table-level `[CONSTRAINT name] PRIMARY KEY (a, b) NOT ENFORCED`."""
    constraint = element
    if isinstance(element, exp.Constraint) and len(element.expressions) == 1:
        constraint = element.expressions[0]
    if not isinstance(constraint, exp.PrimaryKey):
        msg = (
            f"table {table!r}: {canonical_sql(element)} is not supported; a table declares "
            "columns, at most one WATERMARK FOR ... AS ... and one PRIMARY KEY (...) NOT ENFORCED"
        )
        raise DefinitionError(msg)
    columns = tuple(part.name for part in constraint.expressions)
    _require_not_enforced(table, constraint, f"PRIMARY KEY ({', '.join(columns)})")
    return columns


def _require_not_enforced(table: str, key: exp.Expr, written: str) -> None:
    options = {str(option).upper() for option in key.args.get("options") or []}
    if "NOT ENFORCED" not in options:
        msg = (
            f"table {table!r}: {written} must be declared NOT ENFORCED (chronolake, like Flink, "
            f"does not own the data); write {written} NOT ENFORCED"
        )
        raise DefinitionError(msg)


def with_options(create: exp.Create, owner: str) -> dict[str, str]:
    """The `WITH ('key' = 'value', ...)` map of a CREATE; `owner` names it in errors."""
    options: dict[str, str] = {}
    properties = create.args.get("properties")
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.TemporaryProperty):
            continue
        if not isinstance(prop, exp.Property) or not _is_string(prop.this):
            msg = (
                f"{owner}: {canonical_sql(prop)} is not supported; the only clause after "
                "the name or column list is WITH ('key' = 'value', ...)"
            )
            raise DefinitionError(msg)
        key = prop.this
        value: exp.Expr = prop.args["value"]  # the parser requires one: 'key' = value
        if not _is_string(value):
            msg = (
                f"{owner}: option {key.name!r} = {canonical_sql(value)}: values are "
                f"quoted strings, e.g. '{key.name}' = '...'"
            )
            raise DefinitionError(msg)
        options[key.name] = value.name
    return options


def _is_string(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Literal) and node.is_string
