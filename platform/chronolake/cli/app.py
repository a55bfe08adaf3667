"""The `chronolake` command: run SQL scripts against a lake (or an interactive SQL shell,
`chronolake.cli.shell`), build, feed and run the demo platform, and show where every view
stands and how far its time partitions are complete.

Errors end a command with exit code 1 and a few lines (`report_error`): chronolake's own as
they are, an error Spark raises as one line (`chronolake.spark.errors`) with its full text in
a log file under `<lake>/_chronolake/logs/` (or on the console with `--verbose`); the shell
shows them the same way and goes on. Ctrl-C ends any command with exit code 130 and one line
saying what the lake holds.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys
import tempfile
import traceback
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from chronolake.errors import ChronolakeError, SourceError
from chronolake.lake.layout import LOGS_ROOT, SYSTEM_ROOT, has_catalog, holds_lake
from chronolake.lake.storage import STORAGE_ERRORS, Storage
from chronolake.location import Location, LocationLike, as_location
from chronolake.runtime.source_checks import OverwritePolicy

if TYPE_CHECKING:
    from chronolake.catalog import Catalog

KEPT_LOGS = 20
_INSTANTS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S",
             "%Y-%m-%d %H:%M:%S"]
"""How `restate` reads an instant (UTC, as watermarks are)."""
"""Spark error logs kept per lake; older ones are removed when a new one is written."""


@dataclass
class _Step:
    """What the running command is doing: named when Spark fails or the user interrupts."""

    lake: LocationLike | None = None
    verbose: bool = False
    doing: str = "the command"
    interrupted: str = "interrupted; the lake is as it was before this command"


class _LakeRoot(click.ParamType):
    """A lake root: a folder, or an object store URI (`s3://bucket/lake`)."""

    name = "folder|uri"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Location:
        return as_location(str(value))


def _step() -> _Step:
    """The running command's step (one per process: click's `meta` is shared by contexts)."""
    meta = click.get_current_context().meta
    return meta.setdefault("chronolake.step", _Step())


class _Commands(click.Group):
    """chronolake's commands: "did you mean" for a mistyped one, and the one error boundary."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except BaseException as error:
            if _interrupted(error):
                click.echo(_step().interrupted, err=True)
                ctx.exit(130)
            if not report_error(error, _step()):
                raise  # a bug: its traceback is what a report needs
            ctx.exit(1)


def report_error(error: BaseException, step: _Step) -> bool:
    """Print `error` in a few lines on stderr, as every command and the SQL shell show it:
    chronolake's own as it is, an unreachable lake in a line, Spark's in a line with its
    full text in a log (`_report_spark_error`). False, printing nothing, for any other error:
    a bug, whose traceback is what a report needs."""
    if isinstance(error, ChronolakeError):
        click.echo(f"error: {error}", err=True)
    elif isinstance(error, STORAGE_ERRORS):
        first = (str(error).splitlines() or [type(error).__name__])[0]
        click.echo(
            f"error: the lake at {step.lake} could not be read or written: {first}; "
            "check --lake, and for an object store its settings (credentials, "
            "AWS_REGION, AWS_ENDPOINT_URL)", err=True,
        )
    else:
        from chronolake.spark.errors import is_spark_error

        if not is_spark_error(error):
            return False
        _report_spark_error(error, step)
    return True


def _interrupted(error: BaseException | None) -> bool:
    """Whether `error` is Ctrl-C (Python's, or Dagster's inside a run) or was raised while
    one was being handled (cleanup code can fail on a Spark call the interrupt cut off)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt) or (
            type(error).__name__ == "DagsterExecutionInterruptedError"
        ):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="chronolake", prog_name="chronolake", message="%(prog)s %(version)s"
)
def main() -> None:
    """chronolake: Flink-grade time semantics for PySpark + Delta Lake, run by Dagster."""


VERBOSE_OPTION = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="When Spark fails, print its full error (plan and stack) too, not only its summary "
    "and the log file holding it.",
)


@main.command()
@click.option(
    "--lake",
    type=_LakeRoot(),
    required=True,
    help="Lake root, a folder or a URI (s3://bucket/lake): table paths in DDL are relative to "
    "it; the catalog lives in its _chronolake/ folder. A script that declares tables may start "
    "a new lake here.",
)
@click.option(
    "-f",
    "--file",
    "script",
    type=click.File("r"),
    default=None,
    help="SQL script of CREATE TABLE / CREATE VIEW statements and queries, run in order "
    "('-' reads standard input).",
)
@click.option(
    "-e",
    "--execute",
    "statements_text",
    metavar="SQL",
    default=None,
    help="The SQL to run, given here instead of in a file (-f): one statement or several, "
    "separated by ';'.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "jsonl"]),
    default="table",
    show_default=True,
    help="How query rows are printed: a table for people, or one JSON object per row "
    "(timestamps as 'YYYY-MM-DD HH:MM:SS[.fff]', decimals as strings).",
)
@click.option(
    "--complete-as-of",
    metavar="TIME",
    default=None,
    help="Read the lake as it was complete as of TIME ('YYYY-MM-DD HH:MM[:SS[.fff]]', UTC), "
    "reproducibly: each derived table at the first version whose watermark reached TIME, "
    "each source at the version those versions consumed; a table without a watermark, or "
    "not there yet, is refused by name.",
)
@VERBOSE_OPTION
def sql(
    lake: LocationLike,
    script: TextIO | None,  # click.File("r"): a file opened for reading, or stdin
    statements_text: str | None,
    output_format: str,
    complete_as_of: str | None,
    verbose: bool,
) -> None:
    """Run a SQL script (-f) or statements (-e) against a lake and print each query's rows;
    with neither, an interactive shell when standard input is a terminal (like psql), else
    the script read from standard input."""
    from chronolake.catalog import Catalog

    step = _step()
    step.lake, step.verbose = lake, verbose
    if script is not None and statements_text is not None:
        msg = ("expected the SQL in a file (-f FILE, '-' for standard input) or on the command "
               "line (-e SQL), found both")
        raise click.UsageError(msg)
    if complete_as_of is not None:
        from chronolake.catalog.complete_as_of import as_of_millis

        try:
            as_of_millis(complete_as_of)
        except ChronolakeError as error:
            raise click.BadParameter(str(error), param_hint="'--complete-as-of'") from None
    _quiet_spark_logs()
    catalog = Catalog(lake)
    if script is None and statements_text is None and sys.stdin.isatty():
        from chronolake.cli.shell import run_shell

        run_shell(
            catalog,
            run=lambda text: _run_sql(catalog, text, "the input", step, output_format,
                                      complete_as_of),
            report=lambda error: report_error(error, step),
        )
        return
    if statements_text is None:
        script = script or sys.stdin
        source = "standard input" if script.name in ("-", "<stdin>") else script.name
        statements_text = script.read()
    else:
        source = "the SQL given with -e"
    _run_sql(catalog, statements_text, source, step, output_format, complete_as_of)


def _run_sql(catalog: Catalog, text: str, source: str, step: _Step, output_format: str,
             complete_as_of: str | None) -> None:
    """Run `text`'s statements in order and show each one's result (`show_result`), naming
    the statement running in `step` for an error or Ctrl-C to say."""
    from sqlglot import exp

    from chronolake.cli.results import show_result
    from chronolake.schema.dialect import Flink, parse_flink

    statements = parse_flink(text, what="SQL script")
    if not holds_lake(catalog.root) and not any(isinstance(s, exp.Create) for s in statements):
        msg = (
            f"no lake at {step.lake}: it holds no chronolake catalog ({SYSTEM_ROOT}/) and no "
            "Delta table, and this script declares none; check --lake, or start a lake there "
            "with a script that declares its tables (CREATE TABLE ... WITH ('path' = ...))"
        )
        raise SourceError(msg)
    results = catalog.run_script(text, complete_as_of=complete_as_of)
    for number, node in enumerate(statements, start=1):
        shown = _shorten(node.sql(dialect=Flink, comments=False))
        step.doing = f"statement {number} of {source} ({shown})"
        removing = isinstance(node, exp.Drop) or bool(node.args.get("replace"))
        step.interrupted = (
            _Step.interrupted if number == 1 and not removing else
            f"interrupted at statement {number} of {source}"
            + ("; the statements before it took effect" if number > 1 else "")
            + ("; a DROP or CREATE OR REPLACE cut short is finished by running it again"
               if removing else "")
        )
        item = next(results, None)
        if item is None:
            break
        show_result(*item, output_format)


LAKE_OPTION = click.option(
    "--lake",
    type=_LakeRoot(),
    default="demo-lake",
    show_default=True,
    help="Lake root, a folder or a URI (s3://bucket/lake): the Delta tables, and chronolake's "
    "catalog and state in _chronolake/.",
)


@main.command()
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Repository root holding assets/, resources/ and ops/ (the reference platform).",
)
@click.option(
    "--lake",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to build the demo lake (default: <project>/demo-lake).",
)
def demo(project: Path, lake: Path | None) -> None:
    """Build the demo lake and materialize the reference platform once, through Dagster."""
    from chronolake.demo.run import run_demo

    lake = (lake or project / "demo-lake").resolve()
    step = _step()
    step.lake, step.doing = lake, "building the demo"
    step.interrupted = (
        f"interrupted; the demo lake at {lake} may be partly built: run `chronolake demo` again "
        "to build it afresh"
    )
    run_demo(project.resolve(), lake)


@main.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["--help"]})
@click.argument("dagster_options", nargs=-1, type=click.UNPROCESSED)
def dev(dagster_options: tuple[str, ...]) -> None:
    """Start Dagster's UI (`dagster dev -w workspace.yaml`, with DAGSTER_OPTIONS passed on)
    and a warm Spark engine its runs share: a local Spark Connect server, started first and
    stopped with it, so that a run starts no JVM of its own.

    With CHRONOLAKE_SPARK_REMOTE or CHRONOLAKE_SPARK_MASTER set, the runs use that Spark and
    no server is started.
    """
    from chronolake.spark.connect_server import REMOTE_ENV, run_beside_a_server

    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "dev", "-w", "workspace.yaml", *dagster_options]
    if os.environ.get(REMOTE_ENV) or os.environ.get("CHRONOLAKE_SPARK_MASTER"):
        os.execv(command[0], command)
    home = Path(os.environ.get("DAGSTER_HOME") or tempfile.gettempdir())
    # The reference platform's lake (resources/): a bucket's makes the server load S3A.
    lake = os.environ.get("CHRONOLAKE_LAKE")
    sys.exit(run_beside_a_server(command, home / "spark-connect-server.log", lake=lake))


@main.command()
@LAKE_OPTION
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed of the new data's random choices (default: the orders table's version, so a "
    "tour feeds the same orders every time).",
)
def feed(lake: LocationLike, seed: int | None) -> None:
    """Feed the demo lake new data: new orders, a correction, a cancellation, a rate change.

    Then `chronolake run` a view (or materialize it in Dagster) to see them go through.
    """
    from chronolake.cli.output import print_feed
    from chronolake.demo.lake import feed_demo_lake
    from chronolake.lake.tables import is_table, table_version

    step = _step()
    step.lake, step.doing = lake, "feeding the demo lake"
    step.interrupted = (
        "interrupted; the demo lake may have part of this feed (each change is a whole Delta "
        "commit): run `chronolake feed` again for more"
    )
    tables = {name: as_location(lake) / name for name in ("orders", "rates")}
    if not all(is_table(path) for path in tables.values()):
        msg = (
            f"no demo lake at {lake}: expected the Delta tables orders/ and rates/ there; build "
            f"it with `chronolake demo --lake {lake}`, or pass the demo lake's --lake"
        )
        raise SourceError(msg)
    before = {name: table_version(path) for name, path in tables.items()}
    after = feed_demo_lake(lake, seed=before["orders"] if seed is None else seed)
    print_feed(tables, before, after)


@main.command()
@click.argument("tables", metavar="TABLE...", nargs=-1, required=True)
@LAKE_OPTION
@click.option(
    "--full-refresh",
    is_flag=True,
    help="Rebuild each TABLE from scratch: every input commit is read again and the output, late "
    "rows and state are replaced (same exactly-once protocol as any run).",
)
@click.option(
    "--on-source-overwrite",
    type=click.Choice([p.value for p in OverwritePolicy]),
    default=OverwritePolicy.FAIL.value,
    show_default=True,
    help="When a source was rewritten by OVERWRITE since the last run: stop with an error "
    "(fail), or rebuild this table from scratch (full-refresh).",
)
@click.option(
    "--with-upstream",
    is_flag=True,
    help="Before each TABLE, run the derived tables it reads (directly or through views) that "
    "have new commits in their inputs, in dependency order.",
)
@VERBOSE_OPTION
def run(
    tables: tuple[str, ...], lake: LocationLike, full_refresh: bool, on_source_overwrite: str,
    with_upstream: bool,
    verbose: bool,
) -> None:
    """Bring the views TABLE... up to date, in the order given: read new commits, emit, commit
    exactly once. One Spark session serves them all."""
    from chronolake.catalog import Catalog
    from chronolake.cli.output import print_run
    from chronolake.runtime.chain import behind, upstream_derived
    from chronolake.runtime.views import materialize_view

    step = _step()
    step.lake, step.verbose = lake, verbose
    _quiet_spark_logs()
    _require_lake(lake)
    policy = OverwritePolicy(on_source_overwrite)
    catalog = Catalog(lake)
    named = {table.lower() for table in tables}
    done: list[str] = []
    for table in tables:
        step.doing = f"checking the inputs of {table}"
        upstream = upstream_derived(catalog, table)
        late = behind(catalog, [name for name in upstream if name not in done])
        if late and not with_upstream:
            click.echo(
                f"note: {', '.join(late)} (read by {table}) have new commits in their inputs "
                f"that they have not run on yet; {table} reads what they have committed: run "
                "them first, or pass --with-upstream",
                err=True,
            )
        for name in (late if with_upstream else []) + [table]:
            if name.lower() in done:  # already run by this command, as another's upstream
                continue
            step.doing = f"the run of {name}"
            step.interrupted = (
                f"interrupted; the run of {name} did not finish, and its next run completes it "
                "exactly once (nothing lost, nothing written twice)"
                + (f"; {', '.join(done)} ran to the end" if done else "")
            )
            with _spinner(f"running {name}"):
                result = materialize_view(
                    catalog, name, full_refresh=full_refresh and name.lower() in named,
                    on_source_overwrite=policy,
                )
            print_run(result)
            done.append(name.lower())


@main.command()
@click.argument("table")
@LAKE_OPTION
@click.option("--from", "start", type=click.DateTime(_INSTANTS), required=True,
              help="The range's start (UTC, inclusive), e.g. 2026-11-02T09:00.")
@click.option("--to", "end", type=click.DateTime(_INSTANTS), required=True,
              help="The range's end (UTC, exclusive).")
@VERBOSE_OPTION
def restate(table: str, lake: LocationLike, start: datetime, end: datetime,
            verbose: bool) -> None:
    """After source TABLE's rows with event time in [--from, --to) were rewritten (an OVERWRITE
    or replaceWhere within the range, or a delete and reinsert of it), recompute what depends
    on them in the views that read TABLE and commit only the differences, as -U/+U/-D
    changes, each view exactly once. A rewrite outside the range is refused, naming its rows'
    times; nothing is written then."""
    from chronolake.catalog import Catalog
    from chronolake.cli.output import print_run
    from chronolake.runtime.restate_plan import run_restatement
    from chronolake.watermarks.millis import utc_millis

    step = _step()
    step.lake, step.verbose = lake, verbose
    _quiet_spark_logs()
    _require_lake(lake)
    step.doing = f"the restatement of {table}"
    step.interrupted = (
        f"interrupted; the restatement of {table} did not finish: run the same command again "
        "to finish it exactly once (nothing lost, nothing written twice)"
    )
    with _spinner(f"restating {table}"):
        results = run_restatement(Catalog(lake), table, start_ms=utc_millis(start),
                                  end_ms=utc_millis(end))
    for result in results:
        print_run(result)
    if not results:
        click.echo(f"{table}: no view that reads it has run yet; nothing to restate")


@main.command()
@LAKE_OPTION
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A table for people (fits 80 columns), or one JSON object per table and view, one "
    "per line (times in ISO 8601, UTC).",
)
def status(lake: LocationLike, output_format: str) -> None:
    """Show every table and view: kind, rowtime, watermark (a source's too) and its lag, pending
    rows, last run and, when it failed, its error."""
    from chronolake.cli.output import print_status, print_status_json
    from chronolake.cli.status import lake_status
    from chronolake.spark.stack import backend_in_use

    _step().lake = lake
    _require_lake(lake)
    rows = lake_status(lake)
    if output_format == "json":
        print_status_json(rows)
    else:
        print_status(rows, backend_in_use())


@main.command()
@click.argument("name")
@LAKE_OPTION
@click.option("--last", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many of the latest complete partitions with rows or changes to list.")
@click.option("--all", "show_all", is_flag=True, help="List every one of them.")
def partitions(name: str, lake: LocationLike, last: int, show_all: bool) -> None:
    """Show where the time partitions of table or view NAME stand: its watermark, which
    partitions it completed and which one is next, and the rows, late rows and last changes
    of each complete partition, as its commits stamped them (read from Delta logs, no
    Spark). Dagster records the same partitions as materialized."""
    from chronolake.cli.output import print_partitions
    from chronolake.cli.partitions import partitions_report

    _step().lake = lake
    _require_lake(lake)
    report = partitions_report(lake, name)
    print_partitions(report, last=None if show_all else last)


def _require_lake(lake: LocationLike) -> None:
    if not holds_lake(lake):
        msg = (
            f"no lake at {lake}: it holds no chronolake catalog ({SYSTEM_ROOT}/) and no Delta "
            "table; check --lake (`chronolake sql --lake PATH -f ddl.sql` starts a lake)"
        )
        raise SourceError(msg)


def _report_spark_error(error: BaseException, step: _Step) -> None:
    """Spark's error in a line, its full text in a log file (and with --verbose, here)."""
    from chronolake.spark.errors import spark_error_line

    full = "".join(traceback.format_exception(error))
    log = _write_log(step.lake, f"{' '.join(sys.argv)}\n{step.doing} failed\n\n{full}")
    if step.verbose:
        click.echo(full, err=True)
    click.echo(f"error: Spark failed in {step.doing}:\n  {spark_error_line(error)}", err=True)
    hint = "" if step.verbose else " (or rerun with --verbose)"
    click.echo(f"  Spark's full error: {log}{hint}", err=True)


def _write_log(lake: LocationLike | None, text: str) -> Location:
    """Write a log under the lake's `_chronolake/logs/` (a temporary folder when there is no
    lake, so that a failure creates no lake), keeping the newest `KEPT_LOGS`."""
    name = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{os.getpid()}.log"
    local = Storage(Path(tempfile.gettempdir()) / "chronolake-logs")
    try:
        logs = local
        if lake and has_catalog(lake):
            logs = Storage(as_location(lake) / LOGS_ROOT.as_posix())
        logs.write_text(name, text)
    except STORAGE_ERRORS:  # the lake is out of reach: the error it explains still is shown
        logs = local
        logs.write_text(name, text)
    for old in sorted(n for n in logs.names() if n.endswith(".log"))[:-KEPT_LOGS]:
        logs.delete(old)
    return logs.path_of(name)


def _quiet_spark_logs() -> None:
    """Leave errors and Ctrl-C to the CLI's few lines: PySpark logs every analysis error it
    raises as a JSON line on stderr, and py4j logs each call a Ctrl-C interrupts (PySpark's
    SIGINT handler makes one more) on the root logger, with a traceback."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True
    logging.getLogger().addFilter(lambda record: "py4j" not in Path(record.pathname).parts)


def _shorten(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _spinner(description: str) -> AbstractContextManager[object]:
    """A spinner with elapsed time on standard error when it is a terminal (elsewhere it
    would leave an empty line), for work that takes a while."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return nullcontext()
    progress = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
        console=console, transient=True,
    )
    progress.add_task(description, total=None)
    return progress
