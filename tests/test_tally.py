"""A run's figures counted by the write that reads their frame (`chronolake.runtime.tally`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chronolake.runtime.tally import Tally


def _counts() -> dict:
    return {"rows": F.count(F.lit(1)), "even": F.count(F.when(F.col("id") % 2 == 0, 1))}


def _jobs(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


@pytest.mark.spark
def test_the_write_counts_them_with_no_job_of_their_own(spark: SparkSession, tmp_path: Path
                                                        ) -> None:
    tally = Tally(spark.range(11), _counts())
    tally.observed.write.parquet(str(tmp_path / "out"))
    jobs = _jobs(spark)
    assert tally.written(1) == {"rows": 11, "even": 6}
    assert _jobs(spark) == jobs


@pytest.mark.spark
@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", [None, 1])
def test_a_write_that_never_ran_is_counted_by_a_job(spark: SparkSession, version: int | None
                                                    ) -> None:
    """Skipped (a redone run's write, committed by the attempt before: no version), or
    credited with a version another commit made: the counts come from a job, never from a
    wait for a query that will not come."""
    tally = Tally(spark.range(7), _counts())
    assert tally.written(version) == {"rows": 7, "even": 4}
