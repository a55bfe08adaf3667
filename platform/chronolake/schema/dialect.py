"""Flink SQL on sqlglot: the dialect, canonical text for specs, and the mapping to Spark.

Specs keep type names and expressions as canonical Flink SQL text so that a spec
built in Python (`"decimal(38,10)"`) equals one parsed from DDL (`DECIMAL(38, 10)`).
Spark evaluates every expression, so `to_spark_sql` translates Flink's semantics
(`TIMESTAMP(3)` has no time zone, `TIMESTAMP_LTZ(3)` has one) into Spark's names.

Example:
    >>> normalize_type("row<log_ts timestamp(3)>")
    'ROW<log_ts TIMESTAMP(3)>'
    >>> to_spark_sql("CAST(s AS TIMESTAMP(3)) - INTERVAL '5' SECOND")
    "CAST(s AS TIMESTAMP_NTZ) - INTERVAL '5' SECOND"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from sqlglot import exp, generator, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from chronolake.errors import DefinitionError

_TIME_UNITS = frozenset({"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"})
_DEFAULT_PRECISION = {exp.DType.TIMESTAMP: (6,), exp.DType.TIMESTAMPLTZ: (6,),
                      exp.DType.DECIMAL: (10, 0)}


class MetadataColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    """`METADATA [FROM 'key'] [VIRTUAL]` of a Flink column (FLIP-107)."""

    arg_types = {"this": False, "virtual": False}


class TableArgument(exp.Expression):
    """`TABLE t` as the argument of a window table function (`TUMBLE(TABLE t, ...)`), with
    SESSION's optional `PARTITION BY k` / `PARTITION BY (k1, k2)` (`partition`: the columns)."""

    arg_types = {"this": True, "partition": False}


_WINDOW_PARAMETERS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
}
"""Flink's parameter names of the window functions (`TUMBLE(DATA => TABLE t, ...)`)."""


def _window_tvf_parser(name: str) -> Callable[[Flink.Parser], exp.Expr]:
    return lambda self: self._parse_window_tvf(name)


class Flink(Dialect):
    """Apache Flink's SQL (Calcite-based): backtick identifiers, `ROW<...>`, time attributes."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE
    SUPPORTS_USER_DEFINED_TYPES = False

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'"]
        IDENTIFIERS = ["`"]
        STRING_ESCAPES = ["'"]
        KEYWORDS = {
            **tokens.Tokenizer.KEYWORDS,
            "BYTES": TokenType.VARBINARY,
            "ROW": TokenType.STRUCT,
            "STRING": TokenType.TEXT,
        }

    class Parser(parser.Parser):
        WRAPPED_TRANSFORM_COLUMN_CONSTRAINT = False  # parse `c TYPE AS expr` to refuse it clearly
        NO_PAREN_FUNCTIONS = {
            **parser.Parser.NO_PAREN_FUNCTIONS,
            TokenType.LOCALTIMESTAMP: exp.Localtimestamp,
        }
        FUNCTIONS = {**parser.Parser.FUNCTIONS, "ROW": exp.Struct.from_arg_list}
        FUNC_TOKENS = {*parser.Parser.FUNC_TOKENS, TokenType.SESSION}  # SESSION(TABLE t, ...)
        FUNCTION_PARSERS = {
            **parser.Parser.FUNCTION_PARSERS,
            **{name: _window_tvf_parser(name) for name in ("TUMBLE", "HOP", "CUMULATE", "SESSION")},
        }
        CONSTRAINT_PARSERS = {
            **parser.Parser.CONSTRAINT_PARSERS,
            "METADATA": lambda self: self._parse_metadata(),
            "WATERMARK": lambda self: self._parse_watermark(),
        }
        SCHEMA_UNNAMED_CONSTRAINTS = {*parser.Parser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}
        ANSWERED_COMMANDS = ("SHOW", "EXPLAIN")
        """Statements sqlglot keeps as a Command and chronolake answers itself
        (`chronolake.sql.inspection`): no warning that their syntax is unsupported."""
        PRIMARY_PARSERS = {
            **parser.Parser.PRIMARY_PARSERS,
            TokenType.STRING: lambda self, token: self._parse_string_or_bare_interval(token),
        }

        _bare_intervals = False

        def _warn_unsupported(self) -> None:
            if self._tokens and self._tokens[0].text.upper() in self.ANSWERED_COMMANDS:
                return
            super()._warn_unsupported()

        def _parse_metadata(self) -> MetadataColumnConstraint:
            key = self._parse_string() if self._match(TokenType.FROM) else None
            virtual = self._match_text_seq("VIRTUAL")
            return self.expression(MetadataColumnConstraint(this=key, virtual=virtual))

        def _parse_watermark(self) -> exp.WatermarkColumnConstraint:
            if not self._match(TokenType.FOR):
                self.raise_error("Expecting FOR after WATERMARK (WATERMARK FOR col AS expr)")
            rowtime = self._parse_column()
            if not self._match(TokenType.ALIAS):
                self.raise_error("Expecting AS <watermark strategy expression>")
            # FLIP-66 writes `rowtime - '5' SECOND`; accept that shorthand here only.
            self._bare_intervals = True
            try:
                strategy = self._parse_disjunction()
            finally:
                self._bare_intervals = False
            return self.expression(exp.WatermarkColumnConstraint(this=rowtime, expression=strategy))

        def _parse_string_or_bare_interval(self, token: tokens.Token) -> exp.Expr:
            literal = exp.Literal.string(token.text)
            after_interval = self._index >= 2 and (
                self._tokens[self._index - 2].token_type is TokenType.INTERVAL
            )
            if (self._bare_intervals and not after_interval and self._curr
                    and self._curr.text.upper() in _TIME_UNITS):
                unit = self._curr.text.upper()
                self._advance()
                return exp.Interval(this=literal, unit=exp.var(unit))
            return self.expression(literal, token=token)

        def _parse_window_tvf(self, name: str) -> exp.Anonymous:
            def argument() -> exp.Expr | None:
                if self._next and self._next.token_type == TokenType.FARROW:  # NAME => value
                    key = exp.var(self._curr.text.upper()) if self._curr else None
                    self._advance(2)
                    return self.expression(exp.Kwarg(this=key, expression=argument()))
                if self._match(TokenType.TABLE):
                    return self.expression(TableArgument(
                        this=self._parse_table_parts(), partition=self._parse_table_partition()
                    ))
                return self._parse_lambda()

            arguments = self._window_arguments(name, self._parse_csv(argument))
            return self.expression(exp.Anonymous(this=name, expressions=arguments))

        def _parse_table_partition(self) -> Sequence[exp.Expr | None] | None:
            """Calcite's `PARTITION BY k` or `PARTITION BY (k1, k2)` after `TABLE t` (`[None]`
            when no column follows a bare `PARTITION BY`)."""
            if not self._match(TokenType.PARTITION_BY):
                return None
            if self._match(TokenType.L_PAREN):
                columns = self._parse_csv(self._parse_column)
                self._match_r_paren()
                return columns
            column = self._parse_column()
            if column is None:
                self.raise_error("Expecting a column")  # shown as: expected 'a column', found …
            return [column]

        def _window_arguments(self, name: str, arguments: list[exp.Expr]) -> list[exp.Expr]:
            """Named arguments (`SIZE => INTERVAL '1' HOUR`) put in Flink's parameter order, so
            that the planner reads one form; every argument is named, or none."""
            named = [arg for arg in arguments if isinstance(arg, exp.Kwarg)]
            if not named:
                return arguments
            parameters = _WINDOW_PARAMETERS[name]
            form = f"{name}({', '.join(f'{p} => ...' for p in parameters)})"
            if len(named) < len(arguments):
                self.raise_error(f"{name}: name every argument or none, e.g. {form}")
            given: dict[str, exp.Expr] = {}
            for arg in named:
                key = arg.this.name
                if key not in parameters or key in given:
                    problem = "is named twice" if key in given else "is not a parameter"
                    self.raise_error(f"{name}: {key} {problem}; write {form}")
                given[key] = arg.expression
            missing = [p for p in parameters if p not in given and p != "OFFSET"]
            if missing:
                self.raise_error(f"{name}: {', '.join(missing)} missing; write {form}")
            return [given[p] for p in parameters if p in given]

        def _parse_primary_key(
            self, wrapped_optional: bool = False, in_props: bool = False,
            named_primary_key: bool = False,
        ) -> exp.PrimaryKeyColumnConstraint | exp.PrimaryKey:
            key = super()._parse_primary_key(
                wrapped_optional=wrapped_optional, in_props=in_props,
                named_primary_key=named_primary_key,
            )
            if self._match_text_seq("ENFORCED", advance=False):
                self.raise_error(
                    "PRIMARY KEY ... ENFORCED is not supported: chronolake does not own the "
                    "data, so write PRIMARY KEY (...) NOT ENFORCED"
                )
            return key

    class Generator(generator.Generator):
        TYPE_MAPPING = {
            **generator.Generator.TYPE_MAPPING,
            exp.DType.STRUCT: "ROW",
            exp.DType.TEXT: "STRING",
            exp.DType.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
            exp.DType.VARBINARY: "BYTES",
        }
        TRANSFORMS = {
            **generator.Generator.TRANSFORMS,
            exp.Struct: lambda self, e: self.func("ROW", *e.expressions),
            MetadataColumnConstraint: lambda self, e: " ".join(
                part for part in (
                    "METADATA",
                    f"FROM {self.sql(e, 'this')}" if e.this else "",
                    "VIRTUAL" if e.args.get("virtual") else "",
                ) if part
            ),
            TableArgument: lambda self, e: f"TABLE {self.sql(e, 'this')}" + (
                f" PARTITION BY ({self.expressions(e, key='partition', flat=True)})"
                if e.args.get("partition") else ""
            ),
        }

        def version_sql(self, expression: exp.Version) -> str:
            """SQL:2011's `FOR SYSTEM_TIME` clauses: `AS OF t`, `ALL`, `FROM a TO b`,
            `BETWEEN a AND b`, `CONTAINED IN (a, b)`."""
            kind = expression.text("kind")
            value = expression.expression
            if kind in ("FROM", "BETWEEN") and isinstance(value, exp.Tuple):
                low, high = (self.sql(bound) for bound in value.expressions)
                return f"FOR SYSTEM_TIME {kind} {low} {'TO' if kind == 'FROM' else 'AND'} {high}"
            return " ".join(filter(None, ("FOR SYSTEM_TIME", kind, self.sql(value))))


def parse_flink(text: str, *, what: str) -> list[exp.Expr]:
    """Parse statements (or one expression) as Flink SQL; syntax errors name line and column.

    `what` names the thing being parsed in the error, e.g. "DDL script" or "type".
    """
    try:
        return [node for node in Flink().parse(text) if node is not None]
    except ParseError as error:
        raise _syntax_error(error, text, what) from None
    except TokenError as error:
        raise _token_error(error, text, what) from None


def parse_expression(text: str, *, what: str = "expression") -> exp.Expr:
    """Parse exactly one Flink SQL expression or statement."""
    nodes = parse_flink(text, what=what)
    if len(nodes) != 1:
        msg = f"{what} {text!r}: expected one statement or expression, found {len(nodes)}"
        raise DefinitionError(msg)
    return nodes[0]


def canonical_sql(node: exp.Expr) -> str:
    """Stable Flink SQL text: identifiers quoted only where Flink needs it, keywords upper case."""
    node = node.copy()
    for identifier in node.find_all(exp.Identifier):
        identifier.set("quoted", not _is_plain_identifier(identifier.name))
    return node.sql(dialect=Flink)


@lru_cache(maxsize=4096)
def normalize_type(text: str) -> str:
    """Canonical Flink type text, e.g. 'decimal(38,10)' -> 'DECIMAL(38, 10)'.

    Default precisions are made explicit (`TIMESTAMP` is `TIMESTAMP(6)`, as in Flink).
    Unsupported types raise `DefinitionError`.
    """
    return canonical_sql(parse_type(text))


def parse_type(text: str) -> exp.DataType:
    """The sqlglot AST of a supported Flink type, with default precisions filled in."""
    try:
        data_type = exp.DataType.build(text, dialect=Flink)
    except (ParseError, TokenError, ValueError):
        data_type = None
    if data_type is None or data_type.is_type(exp.DType.USERDEFINED):
        msg = f"unsupported type {text!r}; supported types are {', '.join(_SUPPORTED_TYPES)}"
        raise DefinitionError(msg)
    for node in data_type.find_all(exp.DataType):
        if node.this not in SUPPORTED_KINDS and node.this is not exp.DType.STRUCT:
            msg = (
                f"unsupported type {node.sql(dialect=Flink)} in {text!r}; supported types are "
                f"{', '.join(_SUPPORTED_TYPES)}"
            )
            raise DefinitionError(msg)
        written = _ELEMENT_TYPES.get(node.this)
        if written and len(node.expressions) != written.count(",") + 1:
            msg = f"{node.this.value} in {text!r} needs its element types: write {written}"
            raise DefinitionError(msg)
        defaults = _DEFAULT_PRECISION.get(node.this)
        if defaults and not node.expressions:
            node.set("expressions", [exp.DataTypeParam(this=exp.Literal.number(p))
                                     for p in defaults])
    return data_type


@lru_cache(maxsize=4096)
def normalize_expression(text: str) -> str:
    """Canonical Flink SQL text of an expression or query (stable for equality)."""
    return canonical_sql(parse_expression(text))


@lru_cache(maxsize=4096)
def column_path(text: str) -> str:
    """Canonical dotted path of a column reference: `` `event`.`log_ts` `` -> 'event.log_ts'."""
    node = parse_expression(text, what="column path")
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        msg = f"{text!r} is not a column path; write a column name or a nested path like event.ts"
        raise DefinitionError(msg)
    return ".".join(part.name for part in node.parts)


@lru_cache(maxsize=4096)
def referenced_columns(expression: str) -> tuple[str, ...]:
    """The top-level columns an expression reads (`event.log_ts` reads `event`), in order."""
    columns = parse_expression(expression).find_all(exp.Column, bfs=False)
    heads = (c.parts[0].name for c in columns if not isinstance(c.this, exp.Star))
    return tuple(dict.fromkeys(heads))


@lru_cache(maxsize=4096)
def _is_call(expression: str, name: str) -> bool:
    node = parse_expression(expression)
    return isinstance(node, exp.Anonymous) and node.name.upper() == name and not node.expressions


_CALL_TYPES = {
    "PROCTIME": "TIMESTAMP_LTZ(3)",
    "SYSTEM_ROWTIME": "TIMESTAMP(3)",
    "TO_TIMESTAMP": "TIMESTAMP(3)",
    "TO_TIMESTAMP_LTZ": "TIMESTAMP_LTZ(3)",
}


@lru_cache(maxsize=4096)
def expression_type(expression: str) -> str | None:
    """The Flink type of a CAST or a time function call; None when only Spark can tell."""
    node = parse_expression(expression)
    if isinstance(node, exp.Cast):
        return canonical_sql(parse_type(node.to.sql(dialect=Flink)))
    if isinstance(node, exp.Anonymous):
        return _CALL_TYPES.get(node.name.upper())
    return None


def is_proctime_call(expression: str) -> bool:
    """True for `PROCTIME()`, the processing-time attribute."""
    return _is_call(expression, "PROCTIME")


def is_system_rowtime_call(expression: str) -> bool:
    """True for `SYSTEM_ROWTIME()`: the rowtime the source attaches (FLIP-66)."""
    return _is_call(expression, "SYSTEM_ROWTIME")


def is_system_watermark_call(expression: str) -> bool:
    """True for `SYSTEM_WATERMARK()`: keep the source's own watermarks (FLIP-66)."""
    return _is_call(expression, "SYSTEM_WATERMARK")


@lru_cache(maxsize=4096)
def is_timestamp_type(type_text: str) -> bool:
    """True for `TIMESTAMP(p)` and `TIMESTAMP_LTZ(p)` of any precision."""
    return parse_type(type_text).this in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPLTZ)


@lru_cache(maxsize=4096)
def timestamp_precision(type_text: str) -> int | None:
    """The precision p of `TIMESTAMP(p)` / `TIMESTAMP_LTZ(p)`, None for other types."""
    data_type = parse_type(type_text)
    if data_type.this not in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPLTZ):
        return None
    return int(data_type.expressions[0].name)


@lru_cache(maxsize=4096)
def row_field_type(type_text: str, field: str) -> str | None:
    """The canonical type of `field` inside a `ROW<...>` type; None if there is none."""
    data_type = parse_type(type_text)
    if not data_type.is_type(exp.DType.STRUCT):
        return None
    for column in data_type.expressions:
        if column.name.lower() == field.lower():
            return canonical_sql(column.args["kind"])
    return None


SUPPORTED_KINDS = frozenset({
    exp.DType.TEXT,
    exp.DType.VARCHAR,
    exp.DType.CHAR,
    exp.DType.BOOLEAN,
    exp.DType.TINYINT,
    exp.DType.SMALLINT,
    exp.DType.INT,
    exp.DType.BIGINT,
    exp.DType.FLOAT,
    exp.DType.DOUBLE,
    exp.DType.DECIMAL,
    exp.DType.DATE,
    exp.DType.TIMESTAMP,
    exp.DType.TIMESTAMPLTZ,
    exp.DType.VARBINARY,
    exp.DType.BINARY,
    exp.DType.ARRAY,
    exp.DType.MAP,
})
"""The Flink types a declaration may use (besides ROW): each has a Spark type in
`chronolake.spark.types`."""
_ELEMENT_TYPES = {exp.DType.ARRAY: "ARRAY<t>", exp.DType.MAP: "MAP<k, v>"}
"""The collection types, which are declared with their element types, as each is written."""
_SUPPORTED_TYPES = (
    "STRING", "VARCHAR(n)", "CHAR(n)", "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT",
    "FLOAT", "DOUBLE", "DECIMAL(p, s)", "DATE", "TIMESTAMP(p)", "TIMESTAMP_LTZ(p)", "BYTES",
    "ARRAY<t>", "MAP<k, v>", "ROW<name t, ...>",
)
_SOURCE_ONLY_CALLS = ("SYSTEM_ROWTIME", "SYSTEM_WATERMARK", "SOURCE_WATERMARK")


def to_spark_sql(text: str) -> str:
    """Translate a Flink SQL expression or query into Spark SQL text.

    Types follow Flink's meaning: `TIMESTAMP(p)` -> `TIMESTAMP_NTZ`, `TIMESTAMP_LTZ(p)` ->
    `TIMESTAMP`, `ROW<...>` -> `STRUCT<...>`; functions: `PROCTIME()` ->
    `CURRENT_TIMESTAMP()`, `TO_TIMESTAMP(s[, fmt])` -> `TO_TIMESTAMP_NTZ(s[, fmt])`,
    `TO_TIMESTAMP_LTZ(n, 0|3)` -> `TIMESTAMP_SECONDS(n)` / `TIMESTAMP_MILLIS(n)`.
    """
    return spark_sql(parse_expression(text))


def spark_sql(node: exp.Expr) -> str:
    """Spark SQL text of a parsed Flink AST (see `to_spark_sql`)."""
    return node.copy().transform(_to_spark_node).sql(dialect="spark")


def _to_spark_node(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.DataType):
        return _to_spark_type(node)
    if isinstance(node, exp.Version):
        msg = (
            f"FOR SYSTEM_TIME AS OF {node.expression.sql(dialect=Flink)} is a temporal join, "
            "which has no Spark SQL form; plan it with chronolake.sql.query.temporal_joins"
        )
        raise DefinitionError(msg)
    if isinstance(node, TableArgument):
        msg = (
            f"window table function over TABLE {node.this.sql(dialect=Flink)} has no Spark SQL "
            "form; it is planned by chronolake's window operators"
        )
        raise DefinitionError(msg)
    if not isinstance(node, exp.Anonymous):
        return node
    name, args = node.name.upper(), node.expressions
    if name in _SOURCE_ONLY_CALLS:
        msg = (
            f"{name}() is provided by the source, not computed by Spark SQL; use it only in a "
            "table's DDL (rowtime AS SYSTEM_ROWTIME(), WATERMARK ... AS SYSTEM_WATERMARK())"
        )
        raise DefinitionError(msg)
    if name == "PROCTIME":
        return exp.CurrentTimestamp()
    if name == "TO_TIMESTAMP":
        return exp.Anonymous(this="TO_TIMESTAMP_NTZ", expressions=args)
    if name == "TO_TIMESTAMP_LTZ":
        return _to_timestamp_ltz(args)
    return node


def _to_timestamp_ltz(args: list[exp.Expr]) -> exp.Expr:
    precision = args[1].name if len(args) > 1 else "3"
    if precision not in ("0", "3"):
        msg = (
            f"TO_TIMESTAMP_LTZ(n, {precision}): precision must be 0 (epoch seconds) or 3 "
            "(epoch milliseconds)"
        )
        raise DefinitionError(msg)
    function = "TIMESTAMP_SECONDS" if precision == "0" else "TIMESTAMP_MILLIS"
    return exp.Anonymous(this=function, expressions=args[:1])


def _to_spark_type(data_type: exp.DataType) -> exp.DataType:
    kind = data_type.this
    if kind is exp.DType.TIMESTAMP:
        return exp.DataType(this=exp.DType.TIMESTAMPNTZ)
    if kind is exp.DType.TIMESTAMPLTZ:
        return exp.DataType(this=exp.DType.TIMESTAMP)
    if kind in (exp.DType.VARCHAR, exp.DType.CHAR):
        return exp.DataType(this=exp.DType.TEXT)
    if kind not in SUPPORTED_KINDS and kind is not exp.DType.STRUCT:
        msg = (
            f"type {data_type.sql(dialect=Flink)} has no Spark equivalent; use one of "
            f"{', '.join(_SUPPORTED_TYPES)}"
        )
        raise DefinitionError(msg)
    return data_type


def _is_plain_identifier(name: str) -> bool:
    return bool(exp.SAFE_IDENTIFIER_RE.match(name)) and (
        name.upper() not in Flink.Tokenizer.KEYWORDS
    )


def _syntax_error(error: ParseError, text: str, what: str) -> DefinitionError:
    detail = error.errors[0] if error.errors else {}
    near = detail.get("highlight")
    line = detail.get("line") or 1
    # sqlglot reports the column where the offending token ends; point at its start.
    column = max((detail.get("col") or 1) - len(near or "x") + 1, 1)
    expected = _expectation(str(detail.get("description") or error))
    found = f", found {near!r}" if near else ", found the end of the text"
    return DefinitionError(
        f"{what}: syntax error at line {line}, column {column}: {expected}{found}\n"
        f"{_pointer(text, line, column)}\nfix the statement at the marked position"
    )


def _expectation(description: str) -> str:
    """sqlglot's error description, phrased as what was expected."""
    if description.startswith("Expecting "):
        return f"expected {description.removeprefix('Expecting ')!r}"
    missing = re.match(r"Required keyword: '\w+' missing for <class '[\w.]*\.(\w+)'>", description)
    if missing:
        return f"incomplete {missing.group(1).upper()}: expected an expression"
    if description.startswith("Invalid expression / Unexpected token"):
        return "expected an expression or clause"
    return description


def _token_error(error: TokenError, text: str, what: str) -> DefinitionError:
    cause = str(error.__cause__ or error)
    match = re.search(r"Missing (\S+) from \d+:(\d+)", cause)
    offset = int(match.group(2)) if match else (error.start or 0)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    delimiter = f"a closing {match.group(1)}" if match else "a valid token"
    return DefinitionError(
        f"{what}: syntax error at line {line}, column {column}: expected {delimiter}\n"
        f"{_pointer(text, line, column)}\nclose the quote that starts at the marked position"
    )


def _pointer(text: str, line: int, column: int) -> str:
    source = text.splitlines()[line - 1] if text.splitlines() else ""
    return f"  {source}\n  {' ' * max(column - 1, 0)}^"
