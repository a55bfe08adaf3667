"""PROVISIONAL: the Flink SQL dialect on sqlglot (being replaced by the DDL parser work)."""

from __future__ import annotations

import re


def normalize_type(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip()).upper()


def normalize_expression(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip())


def is_proctime_call(expression: str) -> bool:
    return expression.strip().upper() == "PROCTIME()"


def is_system_rowtime_call(expression: str) -> bool:
    return expression.strip().upper() == "SYSTEM_ROWTIME()"


def is_system_watermark_call(expression: str) -> bool:
    return expression.strip().upper() == "SYSTEM_WATERMARK()"


def is_timestamp_type(type_text: str) -> bool:
    return type_text.upper().startswith(("TIMESTAMP", "TIMESTAMP_LTZ"))


def row_field_type(type_text: str, field: str) -> str | None:
    return None
