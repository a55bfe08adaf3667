"""Table and view specs, the single source of truth for a declared table.

A spec is what `CREATE TABLE` / `CREATE VIEW` parse into and what Python users
build directly; the two are equal for the same table. Type names and
expressions are kept as canonical Flink SQL text (see `chronolake.schema.dialect`), so
specs compare, hash and serialise as plain data.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from chronolake.errors import DefinitionError
from chronolake.schema._expression_types import expression_type_over
from chronolake.schema.dialect import (
    column_path,
    expression_type,
    is_proctime_call,
    is_system_rowtime_call,
    is_system_watermark_call,
    is_timestamp_type,
    normalize_expression,
    normalize_type,
    referenced_columns,
    row_field_type,
    timestamp_precision,
)
from chronolake.schema.options import DeltaOptions
from chronolake.schema.time_options import TimeOptions

WATERMARK_PROPERTY_PREFIX = "schema.watermark"



def catalog_name(name: str) -> str:
    """`name`, refused unless it can name the view's folders under `_chronolake/` (the lake's
    layout uses it as a path component): no `/`, `\\` or NUL, not starting with a dot."""
    if not name or name.startswith(".") or any(c in name for c in "/\\\0"):
        msg = (
            f"{name!r} cannot name a table or view: a name may not be empty, start with '.', "
            "or hold '/', '\\' or NUL; choose a plain name (letters, digits, '_')"
        )
        raise DefinitionError(msg)
    return name

class TableKind(StrEnum):
    """FLIP-132: a table with primary key and rowtime is versioned, any other regular."""

    VERSIONED = "versioned"
    REGULAR = "regular"


class MetadataKey(StrEnum):
    """Metadata a Delta changelog carries per row."""

    COMMIT_TIMESTAMP = "commit_timestamp"
    COMMIT_VERSION = "commit_version"


class KeepRow(StrEnum):
    """Which row of each key a deduplication view keeps (ORDER BY t DESC keeps the last)."""

    FIRST = "first"
    LAST = "last"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PhysicalColumn(_Frozen):
    """A column stored in the Delta table."""

    kind: Literal["physical"] = "physical"
    name: str = Field(..., description="Column name.")
    type: str = Field(..., description="Flink type, e.g. 'TIMESTAMP(3)' or 'DECIMAL(38, 10)'.")

    _type = field_validator("type")(classmethod(lambda cls, v: normalize_type(v)))


class ComputedColumn(_Frozen):
    """`name AS expression`: evaluated by Spark SQL on read; `PROCTIME()` is processing time."""

    kind: Literal["computed"] = "computed"
    name: str = Field(..., description="Column name.")
    expression: str = Field(..., description="Flink SQL expression over the other columns.")

    _expression = field_validator("expression")(
        classmethod(lambda cls, v: normalize_expression(v))
    )

    @property
    def is_proctime(self) -> bool:
        """True for `PROCTIME()`, the processing-time attribute."""
        return is_proctime_call(self.expression)

    @property
    def is_system_rowtime(self) -> bool:
        """True for `SYSTEM_ROWTIME()`, the rowtime the source attaches."""
        return is_system_rowtime_call(self.expression)


class MetadataColumn(_Frozen):
    """`name TYPE METADATA FROM 'key' VIRTUAL`: a value of the changelog, not of the row."""

    kind: Literal["metadata"] = "metadata"
    name: str = Field(..., description="Column name.")
    type: str = Field(..., description="Flink type of the metadata value.")
    key: MetadataKey = Field(..., description="commit_timestamp or commit_version.")
    virtual: bool = Field(True, description="Read-only (VIRTUAL); the only supported mode.")

    _type = field_validator("type")(classmethod(lambda cls, v: normalize_type(v)))

    @model_validator(mode="after")
    def _type_fits_key(self) -> MetadataColumn:
        fits = (is_timestamp_type(self.type) if self.key is MetadataKey.COMMIT_TIMESTAMP
                else self.type == "BIGINT")
        if not fits:
            expected = ("TIMESTAMP_LTZ(3)" if self.key is MetadataKey.COMMIT_TIMESTAMP
                        else "BIGINT")
            msg = (
                f"metadata column {self.name!r}: '{self.key}' is read as {expected}, not "
                f"{self.type}; declare `{self.name} {expected} METADATA FROM '{self.key}' VIRTUAL`"
            )
            raise DefinitionError(msg)
        return self


Column = Annotated[PhysicalColumn | ComputedColumn | MetadataColumn, Field(discriminator="kind")]


class WatermarkSpec(_Frozen):
    """`WATERMARK FOR rowtime AS expression` (FLIP-66).

    `rowtime` is a column path (`order_time` or nested `event.log_ts`);
    `expression` is the strategy evaluated on every row; `datatype` is the
    type of the rowtime attribute.
    """

    rowtime: str = Field(..., description="Rowtime column path, e.g. 'event.log_ts'.")
    expression: str = Field(..., description="Watermark strategy expression.")
    datatype: str = Field(
        "TIMESTAMP(3)",
        description="Type of the rowtime attribute; a TableSpec fills it from the column.",
    )

    _rowtime = field_validator("rowtime")(classmethod(lambda cls, v: column_path(v)))
    _expression = field_validator("expression")(
        classmethod(lambda cls, v: normalize_expression(v))
    )
    _datatype = field_validator("datatype")(classmethod(lambda cls, v: normalize_type(v)))

    def to_properties(self, index: int = 0) -> dict[str, str]:
        """The FLIP-66 property form, e.g. `schema.watermark.0.rowtime`."""
        prefix = f"{WATERMARK_PROPERTY_PREFIX}.{index}"
        return {
            f"{prefix}.rowtime": self.rowtime,
            f"{prefix}.strategy.expression": self.expression,
            f"{prefix}.strategy.datatype": self.datatype,
        }

    @classmethod
    def from_properties(cls, properties: dict[str, str], index: int = 0) -> WatermarkSpec | None:
        """Read back what `to_properties` wrote; None when no watermark is stored."""
        prefix = f"{WATERMARK_PROPERTY_PREFIX}.{index}"
        if f"{prefix}.rowtime" not in properties:
            return None
        return cls(
            rowtime=properties[f"{prefix}.rowtime"],
            expression=properties[f"{prefix}.strategy.expression"],
            datatype=properties[f"{prefix}.strategy.datatype"],
        )


class TableSpec(_Frozen):
    """A table over a Delta location: columns, time attributes, key and options.

    Example:
        >>> TableSpec(
        ...     name="orders",
        ...     columns=[PhysicalColumn(name="order_time", type="TIMESTAMP(3)")],
        ...     watermark=WatermarkSpec(rowtime="order_time",
        ...                             expression="order_time - INTERVAL '5' SECOND"),
        ...     options=DeltaOptions(path="orders"),
        ... )
    """

    name: str = Field(..., description="Table name in the catalog.")
    _name = field_validator("name")(classmethod(lambda cls, v: catalog_name(v)))
    columns: tuple[Column, ...] = Field(..., description="Physical, computed and metadata columns.")
    watermark: WatermarkSpec | None = Field(None, description="The rowtime attribute, if any.")
    primary_key: tuple[str, ...] = Field((), description="PRIMARY KEY (...) NOT ENFORCED.")
    options: DeltaOptions = Field(..., description="Connector options (WITH ...).")
    time: TimeOptions = Field(
        default_factory=TimeOptions,
        description="Time partitions and freshness (WITH 'partition.time.*', 'freshness.*').",
    )
    derived: bool = Field(
        False,
        description="The output of a derived view read as a source: its watermark is the one "
        "each commit recorded, never re-derived from the data.",
    )
    through_view: ThroughView | None = Field(
        None,
        description="Set for a plain view (a projection or filter of one table) read as an "
        "operator's input: the changes of `through_view.source` pass through its SELECT.",
    )

    @property
    def kind(self) -> TableKind:
        versioned = bool(self.primary_key) and self.watermark is not None
        return TableKind.VERSIONED if versioned else TableKind.REGULAR

    @property
    def rowtime(self) -> str | None:
        return self.watermark.rowtime if self.watermark else None

    @property
    def changelog_table(self) -> TableSpec:
        """The table whose commits this one reads: itself, or a plain view's source."""
        return self if self.through_view is None else self.through_view.source.changelog_table

    @property
    def proctime(self) -> str | None:
        """The `PROCTIME()` column, if the table declares one."""
        return next(
            (c.name for c in self.columns if isinstance(c, ComputedColumn) and c.is_proctime),
            None,
        )

    @property
    def physical_columns(self) -> tuple[PhysicalColumn, ...]:
        return tuple(c for c in self.columns if isinstance(c, PhysicalColumn))

    def column(self, name: str) -> PhysicalColumn | ComputedColumn | MetadataColumn | None:
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    def properties(self) -> dict[str, str]:
        """Options plus the FLIP-66 watermark properties: the table as a property map."""
        properties = self.options.to_map() | self.time.to_map()
        if self.watermark:
            properties |= self.watermark.to_properties()
        return properties

    @field_validator("watermark")
    @classmethod
    def _resolve_watermark(
        cls, watermark: WatermarkSpec | None, info: ValidationInfo
    ) -> WatermarkSpec | None:
        """Check the rowtime attribute and take its datatype from the column it names."""
        if watermark is None or "columns" not in info.data:
            return watermark
        return _resolved_watermark(info.data["name"], info.data["columns"], watermark)

    @model_validator(mode="after")
    def _validate(self) -> TableSpec:
        names = [c.name.lower() for c in self.columns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise DefinitionError(
                f"table {self.name!r}: column(s) {', '.join(map(repr, duplicates))} declared "
                "more than once; give each column a unique name"
            )
        for key in self.primary_key:
            column = self.column(key)
            if column is None:
                raise DefinitionError(
                    f"table {self.name!r}: primary key column {key!r} does not exist; "
                    f"declare it or use one of: {', '.join(c.name for c in self.columns)}"
                )
            if not isinstance(column, PhysicalColumn):
                raise DefinitionError(
                    f"table {self.name!r}: primary key column {key!r} is a {column.kind} "
                    "column; a primary key may only use physical columns"
                )
        self._validate_references()
        return self

    def _validate_references(self) -> None:
        """Computed columns read physical and metadata columns only, as in Flink."""
        sources = {c.name.lower() for c in self.columns if not isinstance(c, ComputedColumn)}
        computed = {c.name.lower() for c in self.columns if isinstance(c, ComputedColumn)}
        for column in self.columns:
            if not isinstance(column, ComputedColumn):
                continue
            for name in referenced_columns(column.expression):
                if name.lower() in sources:
                    continue
                problem = ("is another computed column; computed columns may only read "
                           "physical and metadata columns" if name.lower() in computed
                           else "does not exist")
                usable = sorted(c.name for c in self.columns if c.name.lower() in sources)
                raise DefinitionError(
                    f"table {self.name!r}: computed column `{column.name} AS "
                    f"{column.expression}` reads {name!r}, which {problem}; use one of: "
                    f"{', '.join(usable)}"
                )


def _resolved_watermark(
    table: str, columns: tuple[PhysicalColumn | ComputedColumn | MetadataColumn, ...],
    watermark: WatermarkSpec,
) -> WatermarkSpec:
    prefix = f"table {table!r}: WATERMARK FOR {watermark.rowtime}"
    by_name = {c.name.lower(): c for c in columns}
    head, *nested = watermark.rowtime.split(".")
    column = by_name.get(head.lower())
    if column is None:
        raise DefinitionError(
            f"{prefix}: column {head!r} does not exist; use one of: "
            f"{', '.join(c.name for c in columns)}"
        )
    for name in referenced_columns(watermark.expression):
        if name.lower() not in by_name:
            raise DefinitionError(
                f"{prefix} AS {watermark.expression}: the strategy reads {name!r}, which does "
                f"not exist; use one of: {', '.join(c.name for c in columns)}"
            )
    rowtime_type = _rowtime_type(prefix, column, nested)
    if rowtime_type is not None:
        precision = timestamp_precision(rowtime_type)
        if precision is None or precision > 3:
            raise DefinitionError(
                f"{prefix}: the rowtime must be TIMESTAMP(p) or TIMESTAMP_LTZ(p) with p <= 3, "
                f"got {rowtime_type}; declare the column as TIMESTAMP(3), or cast it in a "
                f"computed column, e.g. `rt AS CAST({head} AS TIMESTAMP(3))`, and declare the "
                "watermark on rt"
            )
    system_rowtime = isinstance(column, ComputedColumn) and column.is_system_rowtime
    if is_system_watermark_call(watermark.expression) and not system_rowtime:
        raise DefinitionError(
            f"{prefix}: SYSTEM_WATERMARK() needs a rowtime derived with SYSTEM_ROWTIME(); "
            f"declare `{head} AS SYSTEM_ROWTIME()` or use a watermark expression over the column"
        )
    if rowtime_type is not None:
        _check_strategy_type(prefix, watermark, rowtime_type, columns)
    if rowtime_type is None or rowtime_type == watermark.datatype:
        return watermark
    if "datatype" in watermark.model_fields_set:
        raise DefinitionError(
            f"{prefix}: datatype {watermark.datatype} does not match the rowtime column's type "
            f"{rowtime_type}; leave datatype out, it is taken from the column"
        )
    return watermark.model_copy(update={"datatype": rowtime_type})


def _check_strategy_type(
    prefix: str, watermark: WatermarkSpec, rowtime_type: str,
    columns: tuple[PhysicalColumn | ComputedColumn | MetadataColumn, ...],
) -> None:
    """Flink's rule: the strategy returns TIMESTAMP(p) or TIMESTAMP_LTZ(p) with p <= 3, of the
    rowtime's kind (the precisions may differ); checked where its type can be told here."""
    types = {
        c.name: expression_type(c.expression) if isinstance(c, ComputedColumn) else c.type
        for c in columns
    }
    output = expression_type_over(watermark.expression, {n: t for n, t in types.items() if t})
    if output is None:
        return
    precision = timestamp_precision(output)
    if precision is not None and precision <= 3 and _root(output) == _root(rowtime_type):
        return
    raise DefinitionError(
        f"{prefix} AS {watermark.expression}: the watermark output type {output} is different "
        f"from the time field's type {rowtime_type}; the expression must return a "
        f"{_root(rowtime_type)}(p) with p <= 3, like its time field: e.g. WATERMARK FOR "
        f"{watermark.rowtime} AS {watermark.rowtime} - INTERVAL '5' SECOND, or CAST(... AS "
        f"{rowtime_type})"
    )


def _root(type_text: str) -> str:
    """A canonical type's name without parameters: `TIMESTAMP_LTZ(3)` -> `TIMESTAMP_LTZ`."""
    return type_text.split("(", 1)[0].split("<", 1)[0]


def _rowtime_type(
    prefix: str, column: PhysicalColumn | ComputedColumn | MetadataColumn, nested: list[str]
) -> str | None:
    """The rowtime's declared type; None when Spark computes it (checked on read)."""
    if isinstance(column, ComputedColumn):
        if column.is_proctime:
            raise DefinitionError(
                f"{prefix}: a PROCTIME() column cannot be a rowtime attribute; declare the "
                "watermark on an event time column of type TIMESTAMP(3) or TIMESTAMP_LTZ(3)"
            )
        if nested:
            raise DefinitionError(
                f"{prefix}: {column.name!r} is a computed column; a nested rowtime must be a "
                "field of a ROW column"
            )
        return expression_type(column.expression)
    rowtime_type = column.type
    for field in nested:
        field_type = row_field_type(rowtime_type, field)
        if field_type is None:
            raise DefinitionError(f"{prefix}: {rowtime_type} has no field {field!r}")
        rowtime_type = field_type
    return rowtime_type


class DeduplicationSpec(_Frozen):
    """`ROW_NUMBER() OVER (PARTITION BY key ORDER BY order_by DESC|ASC) = 1` over `source`."""

    source: str = Field(..., description="The table or view being deduplicated.")
    key: tuple[str, ...] = Field(..., description="PARTITION BY columns: the inferred key.")
    order_by: str = Field(..., description="The time attribute that orders each key's rows.")
    keep: KeepRow = Field(..., description="last (ORDER BY DESC) or first (ORDER BY ASC).")


class ViewKind(StrEnum):
    """How a view is computed: by which operator, or as a whole on read (`PLAIN`)."""

    TEMPORAL_JOIN = "temporal_join"
    WINDOW_AGGREGATE = "window_aggregate"
    DEDUPLICATION = "deduplication"
    INTERVAL_JOIN = "interval_join"
    HISTORY = "history"
    PLAIN = "plain"

    @property
    def written(self) -> str:
        """What a view of this kind has, as a person says it (`a temporal join`)."""
        return _WRITTEN[self]


_WRITTEN = {
    ViewKind.TEMPORAL_JOIN: "a temporal join",
    ViewKind.WINDOW_AGGREGATE: "a window aggregate or Top-N",
    ViewKind.DEDUPLICATION: "a deduplication",
    ViewKind.INTERVAL_JOIN: "an interval join",
    ViewKind.HISTORY: "a history (FOR SYSTEM_TIME ALL)",
    ViewKind.PLAIN: "no operator",
}
_OPERATED = [kind.written for kind in ViewKind if kind is not ViewKind.PLAIN]
OPERATOR_KINDS = f"{', '.join(_OPERATED[:-1])} or {_OPERATED[-1]}"
"""Every kind an operator runs, as prose: the one list that messages and docs name."""


class ViewSpec(_Frozen):
    """`CREATE VIEW name AS SELECT ...`, with the key and rowtime the query implies.

    A deduplication view (`ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC|ASC) = 1`)
    has the inferred key `k` and keeps `t`'s time attribute: it is versioned when
    `t` is a rowtime.
    """

    name: str = Field(..., description="View name in the catalog.")
    _name = field_validator("name")(classmethod(lambda cls, v: catalog_name(v)))
    query: str = Field(..., description="The SELECT, as canonical Flink SQL.")
    primary_key: tuple[str, ...] = Field((), description="Key inferred from the query.")
    rowtime: str | None = Field(None, description="Rowtime attribute the view keeps.")
    deduplication: DeduplicationSpec | None = Field(
        None, description="Set when the query is a ROW_NUMBER() = 1 deduplication."
    )
    updating: bool = Field(
        False,
        description="Whether a derived table's changes hold -U/+U/-D rows (else insert-only); "
        "see chronolake.sql.view_kinds.",
    )
    view_kind: ViewKind | None = Field(
        None,
        description="Its kind, told from its query once, when it is registered "
        "(`chronolake.sql.view_kinds`); None in a catalog written before it was recorded.",
    )
    time: TimeOptions = Field(
        default_factory=TimeOptions,
        description="Time partitions and freshness: `CREATE VIEW v WITH (...) AS SELECT`.",
    )

    _query = field_validator("query")(classmethod(lambda cls, v: normalize_expression(v)))

    @property
    def kind(self) -> TableKind:
        versioned = bool(self.primary_key) and self.rowtime is not None
        return TableKind.VERSIONED if versioned else TableKind.REGULAR


class ThroughView(_Frozen):
    """A plain view read as an operator's input, as Flink's Calc reads a changelog: each change
    of `source` goes through `query` (its WHERE drops it, its SELECT list computes the view's
    columns) and keeps its row kind, its arrival order and its source's watermark."""

    source: TableSpec = Field(..., description="The table (or derived table) the view reads.")
    query: str = Field(..., description="The view's SELECT over `source`.")


TableSpec.model_rebuild()
