"""The watermark a bounded-out-of-orderness strategy gives the largest rowtime seen, without
Spark.

Most sources declare `WATERMARK FOR t AS t - INTERVAL '5' SECOND` (or `AS t`): the watermark
is then the largest rowtime less a constant. A strategy of that shape is evaluated here on a
maximum read from metadata (`chronolake status` reads it from Delta's file statistics); any
other strategy needs Spark on the rows, and is not evaluated (None).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from chronolake.schema import WatermarkSpec
from chronolake.schema.dialect import canonical_sql, parse_expression

_UNIT_MS = {"MILLISECOND": 1, "SECOND": 1_000, "MINUTE": 60_000, "HOUR": 3_600_000,
            "DAY": 86_400_000}


def bounded_watermark(watermark: WatermarkSpec, max_rowtime_ms: int) -> int | None:
    """The watermark (epoch ms) `watermark`'s strategy gives a source whose largest rowtime is
    `max_rowtime_ms`; None when the strategy is not the rowtime plus or minus constant
    intervals."""
    delay = _offset_ms(parse_expression(watermark.expression, what="watermark strategy"),
                       watermark.rowtime)
    return None if delay is None else max_rowtime_ms + delay


def _offset_ms(node: exp.Expr, rowtime: str) -> int | None:
    """What `node` adds to the rowtime (the rowtime read as 0); None for any other shape."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        return 0 if canonical_sql(node).replace("`", "").lower() == rowtime.lower() else None
    if isinstance(node, exp.Add | exp.Sub):
        base, interval = _offset_ms(node.this, rowtime), _interval_ms(node.expression)
        if base is None or interval is None:
            return None
        return base + interval if isinstance(node, exp.Add) else base - interval
    return None


def _interval_ms(node: exp.Expr) -> int | None:
    """`INTERVAL 'n' UNIT` in milliseconds; None for anything else."""
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    name = unit.name.upper().removesuffix("S") if isinstance(unit, exp.Var) else ""
    try:
        millis = Decimal(node.this.name) * _UNIT_MS[name]
    except (InvalidOperation, KeyError):
        return None
    return int(millis) if millis == millis.to_integral_value() else None
