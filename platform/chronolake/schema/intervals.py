"""A day-time `INTERVAL 'n' UNIT` literal in milliseconds: how window sizes, interval-join
bounds and watermark delays are written. Each caller says itself what it refuses."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

UNIT_MS = {"MILLISECOND": 1, "SECOND": 1_000, "MINUTE": 60_000, "HOUR": 3_600_000,
           "DAY": 86_400_000}
"""The units of a day-time interval (plural forms too: `INTERVAL '10' MINUTES`)."""


def interval_millis(interval: exp.Interval) -> Decimal | None:
    """The interval's exact length in milliseconds, of either sign (`INTERVAL '-5' SECOND`),
    possibly fractional; None when its unit is not one of `UNIT_MS` or its value is not a
    number literal."""
    unit = interval.args.get("unit")
    name = unit.name.upper().removesuffix("S") if isinstance(unit, exp.Var) else ""
    value, sign = interval.this, 1
    if isinstance(value, exp.Neg):
        value, sign = value.this, -1
    if name not in UNIT_MS or not isinstance(value, exp.Literal):
        return None
    try:
        millis = sign * Decimal(value.name) * UNIT_MS[name]
    except InvalidOperation:
        return None
    return millis if millis.is_finite() else None


def whole_millis(millis: Decimal | None) -> int | None:
    """`millis` when it is a whole number of milliseconds, else None."""
    if millis is None or millis != millis.to_integral_value():
        return None
    return int(millis)
