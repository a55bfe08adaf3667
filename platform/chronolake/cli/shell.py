"""The interactive SQL shell of `chronolake sql` (no -f, no -e, a terminal): a prompt like
psql's over one lake.

A statement ends at a `;` outside quotes and comments; Enter before that continues it on
the next line. Tab completes statement keywords and the lake's table, view and column names.
The history is kept across sessions in `HISTORY`. Ctrl-C clears the line being typed, or
cancels the statement running; Ctrl-D on an empty line, `quit`, `exit` or `\\q` quits.

One Spark session serves the whole shell: it starts in the background as the shell opens,
so the prompt is there at once, and the first statement waits for it.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from pyspark.sql import SparkSession
from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError

from chronolake.catalog import Catalog
from chronolake.lake.storage import STORAGE_ERRORS
from chronolake.schema import TableSpec
from chronolake.schema.dialect import Flink, parse_expression

HISTORY = Path("~/.chronolake/sql_history")
"""Where the shell keeps the statements typed, across sessions (under the user's home)."""

PROMPT, CONTINUATION = "chronolake> ", "        -> "
QUIT = frozenset({"quit", "exit", "\\q"})

KEYWORDS = (
    "SELECT", "DISTINCT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "AS",
    "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "INNER JOIN", "CROSS JOIN", "ON", "USING",
    "UNION ALL", "UNION", "AND", "OR", "NOT", "IN", "IS NULL", "IS NOT NULL", "BETWEEN",
    "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "CAST", "COUNT", "SUM", "MIN", "MAX", "AVG",
    "OVER", "PARTITION BY", "ROW_NUMBER()", "INTERVAL", "FOR SYSTEM_TIME AS OF",
    "TUMBLE", "HOP", "CUMULATE", "SESSION", "TABLE", "DESCRIPTOR", "CURRENT_WATERMARK",
    "CREATE TABLE", "CREATE VIEW", "CREATE OR REPLACE VIEW", "DROP TABLE", "DROP VIEW",
    "IF EXISTS", "WITH", "WATERMARK FOR", "PRIMARY KEY", "NOT ENFORCED", "METADATA FROM",
    "VIRTUAL", "PROCTIME()", "SHOW TABLES", "SHOW VIEWS", "SHOW CREATE TABLE",
    "SHOW CREATE VIEW", "DESCRIBE", "EXPLAIN", "EXPLAIN CHANGELOG_MODE",
)
"""What Tab offers besides the lake's names: Flink SQL's clauses and chronolake's
statements."""

_WORD = re.compile(r"\w+")


def run_shell(
    catalog: Catalog, *, run: Callable[[str], None], report: Callable[[BaseException], bool]
) -> None:
    """Prompt for statements until the user quits; `run` runs one input's statements and
    shows their results, `report` shows an error they raise in the CLI's few lines (False
    for a bug: its traceback is printed). Either way the prompt goes on."""
    spark = _SparkStart(catalog)
    names = _LakeNames(catalog)
    HISTORY.expanduser().parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        PROMPT,
        history=FileHistory(str(HISTORY.expanduser())),
        multiline=True,
        key_bindings=_enter_ends_statements(),
        prompt_continuation=CONTINUATION,
        completer=_SqlCompleter(lambda: names.words),
        complete_while_typing=False,
    )
    click.echo(f"chronolake SQL on {catalog.root}: end statements with ';', quit with "
               "Ctrl-D or quit", err=True)
    with _ctrl_c_noted() as ctrl_c:
        while True:
            try:
                # A terminal's Ctrl-C is a key while prompting: prompt_toolkit leaves SIGINT be.
                text = session.prompt(handle_sigint=False)
            except KeyboardInterrupt:  # Ctrl-C while typing: the input is dropped, as in psql
                continue
            except EOFError:  # Ctrl-D on an empty line
                return
            if _quits(text):
                return
            if not text.strip():
                continue
            ctrl_c.clear()
            if not spark.ready(ctrl_c):
                click.echo("cancelled; Spark is still starting", err=True)
            elif (failed := spark.failed_start()) is not None:
                _show(failed, report)
            else:
                _run_cancellably(run, text, ctrl_c, cancel=spark.interrupt, report=report)
                names.refresh()


def statement_complete(text: str) -> bool:
    """Whether Enter after `text` runs it: it ends with a `;` outside quotes and comments
    (sqlglot's tokenizer tells), or it is a quit command."""
    if _quits(text) or not text.strip():
        return True
    try:
        tokens = Flink().tokenize(text)
    except SqlglotError:  # an open quote or comment: the statement goes on
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def _quits(text: str) -> bool:
    return text.strip().rstrip(";").strip().lower() in QUIT


def _enter_ends_statements() -> KeyBindings:
    """Enter runs the input once it is a complete statement, else starts a new line."""
    bindings = KeyBindings()

    @bindings.add("enter")
    def _(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if statement_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    return bindings


@contextmanager
def _ctrl_c_noted() -> Iterator[threading.Event]:
    """Meanwhile Ctrl-C (SIGINT) sets the event yielded, for the shell to cancel what runs,
    instead of raising KeyboardInterrupt wherever the shell happens to be."""
    noted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.set())
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_cancellably(
    run: Callable[[str], None], text: str, ctrl_c: threading.Event, *,
    cancel: Callable[[], None], report: Callable[[BaseException], bool],
) -> None:
    """`run(text)` in a thread of its own, so that Ctrl-C cancels it (`cancel`) and the
    shell waits for it to stop before it prompts again, saying so in a line."""
    failed: list[BaseException] = []

    def attempt() -> None:
        try:
            run(text)
        except BaseException as error:  # shown by the shell's thread, which goes on
            failed.append(error)

    worker = threading.Thread(target=attempt, name="chronolake-statement", daemon=True)
    worker.start()
    cancelled = False
    while worker.is_alive():
        worker.join(timeout=1 if cancelled else 0.1)
        if worker.is_alive() and (cancelled or ctrl_c.is_set()):
            cancelled = True
            cancel()  # again each second: a job the statement started after the last goes too
    if cancelled:
        click.echo("cancelled", err=True)
    elif failed:
        _show(failed[0], report)


def _show(error: BaseException, report: Callable[[BaseException], bool]) -> None:
    """An error in the CLI's few lines, or a bug's traceback; the shell goes on either way."""
    if not report(error):
        traceback.print_exception(error, file=sys.stderr)


class _SparkStart:
    """The shell's Spark session, started in a background thread as the shell opens."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._session: SparkSession | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._session = self._catalog.spark  # created on first use, and kept
        except BaseException as error:  # raised to the first statement, which shows it
            self._failed = error

    def ready(self, ctrl_c: threading.Event) -> bool:
        """Whether the start has ended, waiting for it (and saying so) unless Ctrl-C comes
        first."""
        if self._thread.is_alive():
            click.echo("starting Spark…", err=True)
            while self._thread.is_alive() and not ctrl_c.is_set():
                self._thread.join(timeout=0.1)
        return not self._thread.is_alive()

    def failed_start(self) -> BaseException | None:
        """Why the start failed, told once: the next statement starts Spark itself."""
        failed, self._failed = self._failed, None
        return failed

    def interrupt(self) -> None:
        """Cancel what the session is running (Spark's jobs of any thread)."""
        if self._session is not None:
            self._session.interruptAll()


class _LakeNames:
    """The lake's table and view names and their columns, read from the catalog (no Spark)
    when the shell opens and again after each input, which may have declared or dropped."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.words: list[str] = []
        self.refresh()

    def refresh(self) -> None:
        try:
            specs, _ = self._catalog.registry.loadable()
        except STORAGE_ERRORS:  # the lake out of reach: statements will say so
            return
        columns: dict[str, None] = {}
        for spec in specs.values():
            for column in _columns(spec) if isinstance(spec, TableSpec) else _selects(spec.query):
                columns.setdefault(column)
        self.words = [spec.name for spec in specs.values()] + list(columns)


def _columns(table: TableSpec) -> Iterator[str]:
    return (column.name for column in table.columns)


def _selects(query: str) -> Iterator[str]:
    """The names a view's query selects (a `*` names none of its own)."""
    select = parse_expression(query, what="view query")
    names = select.named_selects if isinstance(select, exp.Query) else []
    return (name for name in names if name != "*")


class _SqlCompleter(Completer):
    """Completes the word before the cursor with a keyword (in the case it is typed in) or a
    name of the lake."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._names = names

    def get_completions(self, document: Document, complete_event: CompleteEvent
                        ) -> Iterator[Completion]:
        word = document.get_word_before_cursor(pattern=_WORD)
        if not word:
            return
        lowered = word.lower()
        keywords = (k.lower() if word.islower() else k for k in KEYWORDS)
        for candidate in dict.fromkeys([*self._names(), *keywords]):
            if candidate.lower().startswith(lowered) and candidate != word:
                yield Completion(candidate, start_position=-len(word))
