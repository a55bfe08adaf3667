"""The Spark tier: the sessions chronolake starts (local or Spark Connect) with the jars and
settings its stack needs, Spark's errors in a few lines, SQL over frames, and the mapping
between Flink's types and Spark's. Below the lake: nothing here knows a table."""
