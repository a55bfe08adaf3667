"""The rank range of a Top-N: the ranks its WHERE keeps, read as Flink's planner reads them
(`RankUtil.extractRankRange`, `FlinkLogicalRankRule`).

`rownum <= N` keeps ranks 1..N, `rownum < N` 1..N-1, `rownum = N` the Nth only, and a
lower with an upper bound the ranks between; each compares the rank alone with a whole
number, on either side, ANDed with the query's other conditions (kept as they are). A
lower bound alone, more bounds, or a bound that is not a constant is not a Top-N.
"""

from __future__ import annotations

from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import canonical_sql

_COMPARISONS = (exp.EQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE,
}


def rank_range(
    condition: exp.Expr | None, rank: str
) -> tuple[int, int, exp.Expr | None]:
    """(first rank, last rank, the other conditions) from the outer WHERE, as Flink's
    `RankUtil.extractRankRange` reads it: constant bounds on the rank alone, ANDed."""
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else (
        [condition] if condition is not None else []
    )
    written = canonical_sql(condition) if condition is not None else "(none)"
    bounds: list[tuple[str, int]] = []
    rest: list[exp.Expr] = []
    for conjunct in conjuncts:
        bound = _bound(conjunct, rank)
        if bound is not None:
            bounds.append(bound)
        elif any(is_rank_column(c, rank) for c in conjunct.find_all(exp.Column)):
            msg = (
                f"WHERE {written}: {canonical_sql(conjunct)} is not a "
                f"window Top-N bound; compare {rank} alone with a constant, e.g. {rank} <= 3, "
                f"{rank} < 4 or {rank} = 1, and AND it with other conditions"
            )
            raise DefinitionError(msg)
        else:
            rest.append(conjunct)
    sides = sorted(side for side, _ in bounds)
    values = dict(bounds)
    if sides == ["both"]:
        start = end = values["both"]
    elif sides == ["upper"]:
        start, end = 1, values["upper"]
    elif sides == ["lower", "upper"]:
        start, end = values["lower"], values["upper"]
    elif sides == ["lower"]:
        msg = (
            f"WHERE {written}: Rank end is not specified. Currently rank only support TopN, "
            f"which means the rank end must be specified: add AND {rank} <= N"
        )
        raise DefinitionError(msg)
    else:
        msg = (
            f"WHERE {written}: a window Top-N keeps the rows whose {rank} is at most N; "
            f"write WHERE {rank} <= N (or {rank} < N, {rank} = N, or one lower and one "
            "upper bound)"
        )
        raise DefinitionError(msg)
    if end <= 0:
        msg = (
            f"WHERE {written}: Rank end should not less than zero, but now is {end}; "
            f"keep at least the first row, e.g. {rank} <= 1"
        )
        raise DefinitionError(msg)
    remaining = None
    for conjunct in rest:
        remaining = conjunct.copy() if remaining is None else exp.and_(remaining, conjunct.copy())
    return start, end, remaining


def _bound(conjunct: exp.Expr, rank: str) -> tuple[str, int] | None:
    """("upper" | "lower" | "both", value) of `rank <op> constant` (either side), else None."""
    if not isinstance(conjunct, _COMPARISONS):
        return None
    operator: type[exp.Expr] = type(conjunct)  # a comparison's, possibly mirrored
    left, right = conjunct.this, conjunct.expression
    if is_rank_column(right, rank) and not is_rank_column(left, rank):
        left, right, operator = right, left, _MIRRORED[operator]
    if not is_rank_column(left, rank) or any(
        is_rank_column(c, rank) for c in right.find_all(exp.Column)
    ):
        return None
    value = _integer(right)
    if value is None:
        msg = (
            f"{canonical_sql(conjunct)}: Rank strategy with a bound that is not a constant is "
            f"not supported on window rank currently; compare {rank} with a whole number, "
            f"e.g. {rank} <= 3"
        )
        raise DefinitionError(msg)
    if operator is exp.EQ:
        return "both", value
    if operator in (exp.LT, exp.LTE):
        return "upper", value - 1 if operator is exp.LT else value
    return "lower", value + 1 if operator is exp.GT else value


def is_rank_column(node: exp.Expr, rank: str) -> bool:
    """Whether `node` is the rank column itself."""
    return isinstance(node, exp.Column) and node.name.lower() == rank.lower()


def _integer(node: exp.Expr) -> int | None:
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not (isinstance(literal, exp.Literal) and literal.is_int):
        return None
    return -int(literal.name) if negative else int(literal.name)
