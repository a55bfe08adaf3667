"""Showing what one statement of a script, of `-e` or of the shell gave back."""

from __future__ import annotations

import json

import click
from pyspark.sql import DataFrame

from chronolake.catalog import Dropped
from chronolake.catalog.inspection import Shown
from chronolake.cli.output import print_jsonl, print_table
from chronolake.schema import TableSpec


def show_result(statement: str, result: object, output_format: str) -> None:
    """A query's rows on standard output; what a DDL statement did, as a comment on stderr."""
    if isinstance(result, DataFrame):
        (print_jsonl if output_format == "jsonl" else print_table)(result)
    elif isinstance(result, Shown):  # SHOW CREATE, EXPLAIN
        click.echo(json.dumps({"text": result.text}) if output_format == "jsonl" else result.text)
    elif isinstance(result, Dropped):
        click.echo(f"-- {result.describe()}", err=True)
    else:
        what = "table" if isinstance(result, TableSpec) else "view"
        click.echo(f"-- registered {what} {statement}", err=True)
