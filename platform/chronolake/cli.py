"""The `chronolake` command: run SQL scripts against a lake, build and run the demo platform."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from chronolake.errors import ChronolakeError
from chronolake.runtime.source_checks import OverwritePolicy


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """chronolake: Flink-grade time semantics for PySpark + Delta Lake, run by Dagster."""


@main.command()
@click.option(
    "--lake",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Lake root folder: table paths in DDL are relative to it; the catalog lives in its "
    "_chronolake/ folder.",
)
@click.option(
    "-f",
    "--file",
    "script",
    type=click.File("r"),
    required=True,
    help="SQL script of CREATE TABLE / CREATE VIEW statements and queries, run in order "
    "('-' reads standard input).",
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
def sql(lake: Path, script: click.utils.LazyFile, output_format: str) -> None:
    """Run a SQL script against a lake and print each query's rows."""
    from pyspark.sql import DataFrame

    from chronolake.catalog import Catalog
    from chronolake.output import print_jsonl, print_table

    try:
        catalog = Catalog(lake)
        for statement, result in catalog.run_script(script.read()):
            if isinstance(result, DataFrame):
                (print_jsonl if output_format == "jsonl" else print_table)(result)
            else:
                click.echo(f"-- registered {type(result).__name__} {statement}", err=True)
    except ChronolakeError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)


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
    from chronolake.demo_run import run_demo

    try:
        run_demo(project.resolve(), (lake or project / "demo-lake").resolve())
    except ChronolakeError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)



LAKE_OPTION = click.option(
    "--lake",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("demo-lake"),
    show_default=True,
    help="Lake root folder: the Delta tables, and chronolake's catalog and state in _chronolake/.",
)


@main.command()
@click.argument("table")
@LAKE_OPTION
@click.option(
    "--full-refresh",
    is_flag=True,
    help="Rebuild the table from scratch: every input commit is read again and the output, late "
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
    help="First run the derived tables TABLE reads (directly or through views) that have new "
    "commits in their inputs, in dependency order.",
)
def run(
    table: str, lake: Path, full_refresh: bool, on_source_overwrite: str, with_upstream: bool
) -> None:
    """Bring the view TABLE up to date: read new commits, emit, commit exactly once."""
    from chronolake.catalog import Catalog
    from chronolake.output import print_run
    from chronolake.runtime.chain import behind, upstream_derived
    from chronolake.runtime.views import materialize_view

    policy = OverwritePolicy(on_source_overwrite)
    try:
        catalog = Catalog(lake)
        late = behind(catalog, upstream_derived(catalog, table))
        if late and not with_upstream:
            click.echo(
                f"note: {', '.join(late)} (read by {table}) have new commits in their inputs "
                f"that they have not run on yet; {table} reads what they have committed: run "
                "them first, or pass --with-upstream",
                err=True,
            )
        for name in (late if with_upstream else []) + [table]:
            with _spinner(f"running {name}"):
                result = materialize_view(
                    catalog, name, full_refresh=full_refresh and name == table,
                    on_source_overwrite=policy,
                )
            print_run(result)
    except ChronolakeError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)


@main.command()
@LAKE_OPTION
def status(lake: Path) -> None:
    """Show every table and view: kind, rowtime, watermark, pending rows, last run."""
    from chronolake.output import print_status
    from chronolake.status import lake_status

    try:
        print_status(lake_status(lake))
    except ChronolakeError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)


def _spinner(description: str) -> Progress:
    """A spinner with elapsed time on standard error, for work that takes a while."""
    progress = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    progress.add_task(description, total=None)
    return progress
