"""The watermark a bounded-out-of-orderness strategy gives the largest rowtime seen, without
Spark.

Most sources declare `WATERMARK FOR t AS t - INTERVAL '5' SECOND` (or `AS t`): the watermark
is then the largest rowtime less a constant. A strategy of that shape is evaluated here on a
maximum read from metadata (`chronolake status` reads it from Delta's file statistics); any
other strategy needs Spark on the rows, and is not evaluated (None).
"""

from __future__ import annotations

from sqlglot import exp

from chronolake.schema import WatermarkSpec
from chronolake.schema.dialect import canonical_sql, parse_expression
from chronolake.schema.intervals import interval_millis, whole_millis


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
    """`INTERVAL 'n' UNIT` in whole milliseconds; None for anything else."""
    return whole_millis(interval_millis(node)) if isinstance(node, exp.Interval) else None
