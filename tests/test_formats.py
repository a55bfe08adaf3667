"""A lake outlives the release that wrote it: the documents under `_chronolake/` carry their
format, older ones are upgraded as they are read, newer ones refused by name.

`tests/data/lake_before_formats/` is a lake written by the release before formats were
recorded (`build_tiny_lake`, then one run of three derived tables): its catalog entries,
checkpoints and intents have no `format`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _crash import add_batch, build_tiny_lake, delta_rows, same_rows
from pyspark.sql import SparkSession

from chronolake import Catalog, DefinitionError
from chronolake.catalog import CatalogEntry
from chronolake.catalog.checkpoint import Checkpoint, CheckpointStore
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus
from chronolake.schema.persisted import Persisted
from chronolake.schema.time_options import TimeOptions

WRITTEN_BEFORE_FORMATS = Path(__file__).with_name("data") / "lake_before_formats"
VIEWS = ("latest_rates", "orders_enriched", "orders_per_currency")


def test_a_lake_written_before_formats_reads_runs_on_and_is_written_in_todays_formats(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake, reference = tmp_path / "lake", tmp_path / "reference"
    shutil.copytree(WRITTEN_BEFORE_FORMATS, lake)
    catalog = build_tiny_lake(reference, spark)
    for view in VIEWS:
        assert DerivedTable(catalog, view).run().status is RunStatus.COMMITTED
    # that release had no time options: today's DDL declares partitions and freshness
    untimed = {name: spec.model_copy(update={"time": TimeOptions()})
               for name, spec in Catalog(reference, spark).specs().items()}
    assert Catalog(lake, spark).specs() == untimed

    for root in (lake, reference):
        add_batch(root, 1)
        for view in VIEWS:
            result = DerivedTable(Catalog(root, spark), view).run()
            assert (result.status, result.run) == (RunStatus.COMMITTED, 2), (root, view)
    for view in VIEWS:
        assert same_rows(delta_rows(spark, output_path(lake, view)),
                         delta_rows(spark, output_path(reference, view))), view
        state = CheckpointStore.of(lake, view)
        written = json.loads(state.storage.read_text("checkpoint-00000002.json") or "{}")
        assert written["format"] == Checkpoint.FORMAT
        assert state.latest().run == 2


def test_a_document_of_a_newer_format_is_refused_naming_it() -> None:
    stored = json.dumps({"format": CatalogEntry.FORMAT + 1, "kind": "table"})
    with pytest.raises(DefinitionError, match=(
            r"^lake/_chronolake/catalog/t.json is written in format 2 of a CatalogEntry, newer "
            r"than the 1 this release of chronolake reads; upgrade chronolake")):
        CatalogEntry.read_json(stored, where="lake/_chronolake/catalog/t.json")


def test_each_upgrade_runs_once_in_order_from_the_format_written() -> None:
    class Note(Persisted):
        FORMAT = 3
        UPGRADES = {0: lambda d: {**d, "text": d.pop("body")},
                    2: lambda d: {**d, "text": d["text"].upper()}}
        text: str

    assert Note.read_json('{"body": "hi"}', where="n").text == "HI"
    assert Note.read_json('{"format": 2, "text": "hi"}', where="n").text == "HI"
    assert Note.read_json('{"format": 3, "text": "hi"}', where="n").text == "hi"
    assert json.loads(Note(text="x").model_dump_json())["format"] == 3


def test_a_format_that_is_not_a_number_is_refused_as_damaged() -> None:
    with pytest.raises(DefinitionError, match=r"^w names its format 'x', not a number: it was "
                       r"edited by hand or damaged"):
        CatalogEntry.read_json('{"format": "x", "kind": "table"}', where="w")
