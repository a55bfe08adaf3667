"""The chronolake half of the time-SQL differential check: Delta tables, DDL, runs.

Each lake becomes a folder with one append-only Delta table per input table, declared
through `chronolake.catalog.Catalog` with its watermark delay, and the case's query as the
view `derived`; after each round lands (one commit per table), one
`DerivedTable(catalog, "derived").run()`. After each run the view's whole output table and
late-rows side table are read back (a few rows: metadata-sized, plain Python is fine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
from _cases import BASE, BASE_MS
from _time_cases import Arrival, Lake
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.lake.layout import late_path, output_path
from chronolake.location import LocationLike
from chronolake.runtime.derived import DerivedTable

VIEW = "derived"
_SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64()),
                     ("ts", pa.timestamp("ms"))])
_TABLE = """CREATE TABLE {name} (
  id BIGINT, k STRING, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND
) WITH ('path' = '{name}', 'changelog' = 'append');
"""


@dataclass
class Runs:
    """What chronolake did with one lake: per run, the whole output so far (rows as dicts
    over the family's columns, times in ms after BASE), late-side-table rows and watermark."""

    outputs: list[list[dict[str, object]]] = field(default_factory=list)
    late: list[int] = field(default_factory=list)
    watermarks: list[int | None] = field(default_factory=list)
    error: str | None = None


def ddl(lake: Lake) -> str:
    tables = "".join(_TABLE.format(name=name, delay=lake.delays[name])
                     for name in lake.family.tables)
    return f"{tables}CREATE VIEW {VIEW} AS\n{lake.query()};\n"


def run_lake(lake: Lake, root: Path, spark: SparkSession) -> Runs:
    """Land every round of `lake` (flush included) under `root`, running the view after each;
    an exception (a refused query, a failed run) ends the lake with `error` set."""
    runs = Runs()
    try:
        for name in lake.family.tables:
            write_deltalake(str(root / name), _SCHEMA.empty_table(), mode="append")
        catalog = Catalog(root, spark)
        list(catalog.run_script(ddl(lake)))
        view = DerivedTable(catalog, VIEW)
        for arrived in lake.all_rounds():
            _land(root, arrived, lake.family.tables)
            result = view.run()
            runs.outputs.append(_read(output_path(root, VIEW), lake))
            runs.late.append(len(_read(late_path(root, VIEW), None)))
            runs.watermarks.append(None if result.watermark_ms is None
                                   else result.watermark_ms - BASE_MS)
    except Exception as error:  # noqa: BLE001 - the lake's outcome, reported as a mismatch
        runs.error = f"{type(error).__name__}: {str(error).strip()[:600]}"
    return runs


def _land(root: Path, arrived: tuple[Arrival, ...], tables: tuple[str, ...]) -> None:
    for name in tables:
        rows = [{"id": a.id, "k": a.k, "v": a.v, "ts": _at(a.t)} for a in arrived
                if a.table == name]
        if rows:
            write_deltalake(str(root / name), pa.Table.from_pylist(rows, schema=_SCHEMA),
                            mode="append")


def _read(path: LocationLike, lake: Lake | None) -> list[dict[str, object]]:
    if not DeltaTable.is_deltatable(str(path)):
        return []
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    if lake is None:
        return rows
    return [{column: _plain(row[column]) for column in lake.family.columns} for row in rows]


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return round((value - BASE).total_seconds() * 1000)
    return value


def _at(t: int) -> datetime:
    return BASE + timedelta(milliseconds=t)
