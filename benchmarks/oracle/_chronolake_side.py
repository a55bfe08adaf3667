"""The chronolake half of the differential check: real Delta tables, DDL, incremental runs.

Each lake becomes a folder with a probe table (append) and a build table (an op-column
changelog, or a table with the change data feed written by real INSERT/UPDATE/DELETE
commits), declared through `chronolake.catalog.Catalog`; after each round lands, one
`DerivedTable(catalog, "joined").run()`. What each run emitted is read back from the view's
output table (a few rows: metadata-sized, so plain Python here is fine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from _cases import CONDITION, Changelog, Event, Lake, Probe, at, changelog_rows
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable

_PROBE = pa.schema([("id", pa.int64()), ("k", pa.string()), ("ts", pa.timestamp("us"))])
_BUILD = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("us"))])
_OPS = pa.schema([*_BUILD, ("op", pa.string())])

_DDL = """
CREATE TABLE probe (
  id BIGINT, k STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '{probe_delay}' SECOND
) WITH ('path' = 'probe', 'changelog' = 'append');
CREATE TABLE build (
  k STRING, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '{build_delay}' SECOND,
  PRIMARY KEY (k) NOT ENFORCED
) WITH ('path' = 'build', {changelog});
CREATE VIEW joined AS
{query};
"""


def query(lake: Lake) -> str:
    """The temporal join, the same SQL text Flink runs (apart from Flink's case column)."""
    condition = f" AND {CONDITION}" if lake.config.condition else ""
    return (f"SELECT p.id, b.v FROM probe AS p {'LEFT ' if lake.config.left else ''}JOIN build "
            f"FOR SYSTEM_TIME AS OF p.ts AS b ON p.k = b.k{condition}")


@dataclass
class LakeRuns:
    """What chronolake did with one lake: per run, the probe rows and the build changelog
    arrived so far (what Flink is given) and the rows the run emitted."""

    probe: list[list[Probe]] = field(default_factory=list)
    build: list[list[Event]] = field(default_factory=list)
    emitted: list[dict[int, int | None]] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    watermarks: list[int | None] = field(default_factory=list)
    bounded: dict[int, int | None] = field(default_factory=dict)
    error: str | None = None


def run_lake(lake: Lake, root: Path, spark: SparkSession) -> LakeRuns:
    """Land every round of `lake` under `root`, run the view after each, then the batch query."""
    config = lake.config
    cdf = config.changelog is Changelog.CDF
    write_deltalake(str(root / "probe"), _PROBE.empty_table(), mode="append")
    write_deltalake(str(root / "build"), (_BUILD if cdf else _OPS).empty_table(), mode="append",
                    configuration={"delta.enableChangeDataFeed": "true"} if cdf else None)
    changelog = ("'changelog' = 'cdf'" if cdf else
                 "'changelog' = 'op-column', 'changelog.op-column' = 'op'")
    catalog = Catalog(root, spark)
    list(catalog.run_script(_DDL.format(probe_delay=config.probe_delay,
                                        build_delay=config.build_delay,
                                        changelog=changelog, query=query(lake))))
    view = DerivedTable(catalog, "joined")
    runs = LakeRuns()
    table: dict[str, tuple[int, int]] = {}
    probe: list[Probe] = []
    build: list[Event] = []
    seen: dict[int, int | None] = {}
    for index in range(lake.n_rounds):
        arrived = lake.round(index)
        rows = changelog_rows(arrived.build, config.changelog, table)
        _land(root, arrived.probe, rows, cdf=cdf)
        probe += arrived.probe
        build += rows
        result = view.run()
        counts: dict[int, int] = {}
        emitted: dict[int, int | None] = {}
        for id_, value in _output(root):
            counts[id_] = counts.get(id_, 0) + 1
            if id_ not in seen:
                emitted[id_] = value
        runs.duplicates += [i for i, n in counts.items() if n > 1 and i not in runs.duplicates]
        seen.update(emitted)
        runs.probe.append(list(probe))
        runs.build.append(list(build))
        runs.emitted.append(emitted)
        runs.watermarks.append(result.watermark_ms)
    # The batch query: bounded inputs, final watermark +inf (a handful of rows: collect is fine).
    runs.bounded = {row[0]: row[1] for row in catalog.sql(query(lake)).collect()}
    return runs


def _land(root: Path, probe: tuple[Probe, ...], rows: list[Event], *, cdf: bool) -> None:
    """One probe commit; build: one commit of op rows, or one commit per CDF operation."""
    if probe:
        write_deltalake(str(root / "probe"), pa.Table.from_pylist(
            [{"id": p.id, "k": p.key, "ts": at(p.t)} for p in probe], schema=_PROBE),
            mode="append")
    if not cdf:
        if rows:
            write_deltalake(str(root / "build"), pa.Table.from_pylist(
                [{"k": e.key, "v": e.value, "ts": at(e.t), "op": e.kind} for e in rows],
                schema=_OPS), mode="append")
        return
    path = str(root / "build")
    for row in rows:
        predicate = f"k = '{row.key}'"
        if row.kind == "+I":
            write_deltalake(path, pa.Table.from_pylist(
                [{"k": row.key, "v": row.value, "ts": at(row.t)}], schema=_BUILD), mode="append")
        elif row.kind == "+U":
            DeltaTable(path).update(predicate=predicate, updates={
                "v": str(row.value), "ts": f"CAST('{at(row.t).isoformat(sep=' ')}' AS TIMESTAMP)"})
        elif row.kind == "-D":
            DeltaTable(path).delete(predicate)


def _output(root: Path) -> list[tuple[int, int | None]]:
    path = output_path(root, "joined")
    if not DeltaTable.is_deltatable(str(path)):
        return []
    return [(row["id"], row["v"]) for row in DeltaTable(str(path)).to_pyarrow_table().to_pylist()]
