"""Table and view specs, the single source of truth for a declared table.

A spec is what `CREATE TABLE` / `CREATE VIEW` parse into and what Python users
build directly; the two are equal for the same table. Type names and
expressions are kept as canonical Flink SQL text (see `chronolake.dialect`), so
specs compare, hash and serialise as plain data.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chronolake.dialect import (
    is_proctime_call,
    is_system_rowtime_call,
    is_system_watermark_call,
    is_timestamp_type,
    normalize_expression,
    normalize_type,
    row_field_type,
)
from chronolake.errors import DefinitionError
from chronolake.schema.options import DeltaOptions

WATERMARK_PROPERTY_PREFIX = "schema.watermark"


class TableKind(StrEnum):
    """FLIP-132: a table with primary key and rowtime is versioned, any other regular."""

    VERSIONED = "versioned"
    REGULAR = "regular"


class MetadataKey(StrEnum):
    """Metadata a Delta changelog carries per row."""

    COMMIT_TIMESTAMP = "commit_timestamp"
    COMMIT_VERSION = "commit_version"


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
        return is_proctime_call(self.expression)


class MetadataColumn(_Frozen):
    """`name TYPE METADATA FROM 'key' VIRTUAL`: a value of the changelog, not of the row."""

    kind: Literal["metadata"] = "metadata"
    name: str = Field(..., description="Column name.")
    type: str = Field(..., description="Flink type of the metadata value.")
    key: MetadataKey = Field(..., description="commit_timestamp or commit_version.")
    virtual: bool = Field(True, description="Read-only (VIRTUAL); the only supported mode.")

    _type = field_validator("type")(classmethod(lambda cls, v: normalize_type(v)))


Column = Annotated[PhysicalColumn | ComputedColumn | MetadataColumn, Field(discriminator="kind")]


class WatermarkSpec(_Frozen):
    """`WATERMARK FOR rowtime AS expression` (FLIP-66).

    `rowtime` is a column path (`order_time` or nested `event.log_ts`);
    `expression` is the strategy evaluated on every row; `datatype` is the
    type of the rowtime attribute.
    """

    rowtime: str = Field(..., description="Rowtime column path, e.g. 'event.log_ts'.")
    expression: str = Field(..., description="Watermark strategy expression.")
    datatype: str = Field("TIMESTAMP(3)", description="Type of the rowtime attribute.")

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
    columns: tuple[Column, ...] = Field(..., description="Physical, computed and metadata columns.")
    watermark: WatermarkSpec | None = Field(None, description="The rowtime attribute, if any.")
    primary_key: tuple[str, ...] = Field((), description="PRIMARY KEY (...) NOT ENFORCED.")
    options: DeltaOptions = Field(..., description="Connector options (WITH ...).")

    @property
    def kind(self) -> TableKind:
        versioned = bool(self.primary_key) and self.watermark is not None
        return TableKind.VERSIONED if versioned else TableKind.REGULAR

    @property
    def rowtime(self) -> str | None:
        return self.watermark.rowtime if self.watermark else None

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
        properties = self.options.to_map()
        if self.watermark:
            properties |= self.watermark.to_properties()
        return properties

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
            if self.column(key) is None:
                raise DefinitionError(
                    f"table {self.name!r}: primary key column {key!r} does not exist; "
                    f"declare it or use one of: {', '.join(c.name for c in self.columns)}"
                )
        if self.watermark:
            self._validate_watermark(self.watermark)
        return self

    def _validate_watermark(self, watermark: WatermarkSpec) -> None:
        head, *nested = watermark.rowtime.split(".")
        column = self.column(head)
        if column is None:
            raise DefinitionError(
                f"table {self.name!r}: WATERMARK FOR {watermark.rowtime}: column {head!r} does "
                f"not exist; use one of: {', '.join(c.name for c in self.columns)}"
            )
        if isinstance(column, ComputedColumn):
            if column.is_proctime:
                raise DefinitionError(
                    f"table {self.name!r}: WATERMARK FOR {watermark.rowtime}: a PROCTIME() "
                    "column cannot be a rowtime attribute; declare the watermark on an event "
                    "time column of type TIMESTAMP(3) or TIMESTAMP_LTZ(3)"
                )
            rowtime_type = None  # evaluated by Spark; its type is checked on read
        else:
            rowtime_type = column.type
            for field in nested:
                rowtime_type = row_field_type(rowtime_type, field)
                if rowtime_type is None:
                    raise DefinitionError(
                        f"table {self.name!r}: WATERMARK FOR {watermark.rowtime}: "
                        f"{head!r} has no nested field {field!r}"
                    )
        if rowtime_type is not None and not is_timestamp_type(rowtime_type):
            raise DefinitionError(
                f"table {self.name!r}: WATERMARK FOR {watermark.rowtime}: the rowtime must be "
                f"TIMESTAMP(3) or TIMESTAMP_LTZ(3), got {rowtime_type}; cast it in a computed "
                f"column, e.g. `rt AS CAST({head} AS TIMESTAMP(3))`, and declare the watermark on rt"
            )
        if is_system_watermark_call(watermark.expression) and not (
            isinstance(column, ComputedColumn) and is_system_rowtime_call(column.expression)
        ):
            raise DefinitionError(
                f"table {self.name!r}: SYSTEM_WATERMARK() needs a rowtime derived with "
                f"SYSTEM_ROWTIME(); declare `{head} AS SYSTEM_ROWTIME()` or use a watermark "
                "expression over the column"
            )


class ViewSpec(_Frozen):
    """`CREATE VIEW name AS SELECT ...`, with the key and rowtime the query implies.

    A deduplication view (`ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC) = 1`)
    has the inferred key `k` and keeps `t`'s time attribute: it is versioned when
    `t` is a rowtime.
    """

    name: str = Field(..., description="View name in the catalog.")
    query: str = Field(..., description="The SELECT, as canonical Flink SQL.")
    primary_key: tuple[str, ...] = Field((), description="Key inferred from the query.")
    rowtime: str | None = Field(None, description="Rowtime attribute the view keeps.")

    _query = field_validator("query")(classmethod(lambda cls, v: normalize_expression(v)))

    @property
    def kind(self) -> TableKind:
        versioned = bool(self.primary_key) and self.rowtime is not None
        return TableKind.VERSIONED if versioned else TableKind.REGULAR
