"""The `chronolake` command: run SQL scripts against a lake, build and run the demo platform."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from chronolake.errors import ChronolakeError


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
    from chronolake.catalog import Catalog
    from chronolake.output import print_jsonl, print_table

    try:
        catalog = Catalog(lake)
        for statement, result in catalog.run_script(script.read()):
            if isinstance(result, _dataframe_type()):
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


def _dataframe_type() -> type:
    from pyspark.sql import DataFrame

    return DataFrame
