"""Spark SQL whose tables are DataFrames, with nothing left registered in the session.

An operator answers a view's SELECT by running it over frames it computed (a join's probe
rows and matches, say). Temporary views would do it, but a view lives as long as the session
and pins the rows of the frame it names: in a run of many ticks every tick's held rows, in a
shared Spark Connect server every run's. Spark's own SQL formatter references the frames
instead (classic Spark drops the views it makes once the query is analyzed; Connect sends the
frames' plans with the query).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from pyspark.sql import DataFrame


def table_name(role: str) -> str:
    """A fresh table name for a frame in `query_over`'s SQL: no user's name or text has it."""
    return f"__cl_{role}_{uuid.uuid4().hex[:12]}"


def query_over(sql: str, frames: Mapping[str, DataFrame]) -> DataFrame:
    """`sql` run with each table named by a key of `frames` (made by `table_name`) reading
    that frame."""
    text = sql.replace("{", "{{").replace("}", "}}")  # the rest is literal text
    for name in frames:
        text = text.replace(name, "{" + name + "}")
    spark = next(iter(frames.values())).sparkSession
    return spark.sql(text, None, **frames)  # no `args`: every keyword is a frame
