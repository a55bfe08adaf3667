-- The reference platform: declared once, shown in Dagster, queried with Flink SQL.

-- Orders arrive as a CDC changelog: new orders, corrections (updates) and cancellations
-- (deletes), keyed by order_id; their event time is order_time, at most 5 s out of order.
-- Orders and rates form a watermark alignment group (FLIP-217): in a catch-up run, read in
-- ticks of at most 5000 rows, neither source runs more than 10 minutes ahead of the other.
CREATE TABLE orders (
  order_id BIGINT,
  currency STRING,
  amount DECIMAL(10, 2),
  order_time TIMESTAMP(3),
  proc_time AS PROCTIME(),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH (
  'connector' = 'delta',
  'path' = 'orders',
  'changelog' = 'cdf',
  'scan.max-rows-per-tick' = '5000',
  'scan.watermark.alignment.group' = 'fx',
  'scan.watermark.alignment.max-drift' = '10 min',
  'freshness.max-lag' = '15 min'
);

-- Currency rates arrive as a CDC changelog (inserts, updates, deletes): a versioned table.
CREATE TABLE rates (
  currency STRING,
  rate DECIMAL(38, 10),
  currency_time TIMESTAMP(3),
  changelog_time TIMESTAMP_LTZ(3) METADATA FROM 'commit_timestamp' VIRTUAL,
  WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH (
  'connector' = 'delta',
  'path' = 'rates',
  'changelog' = 'cdf',
  'scan.max-rows-per-tick' = '5000',
  'scan.watermark.alignment.group' = 'fx',
  'scan.watermark.alignment.max-drift' = '10 min'
);

-- The same rates read as a hybrid source: the snapshot first, then the change data feed.
CREATE TABLE rates_hybrid (
  currency STRING,
  rate DECIMAL(38, 10),
  currency_time TIMESTAMP(3),
  PRIMARY KEY (currency) NOT ENFORCED
) WITH (
  'connector' = 'delta',
  'path' = 'rates',
  'changelog' = 'cdf',
  'scan.startup.mode' = 'snapshot-then-changelog'
);

-- The latest rate per currency, as a deduplication view (versioned: key currency).
CREATE VIEW latest_rates AS
SELECT currency, rate, currency_time
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rownum
  FROM rates
)
WHERE rownum = 1;

-- Each order with the rate valid at its order time (event-time temporal join, FLIP-132).
-- A derived table keyed by order_id: a corrected order updates its row (-U/+U), a cancelled
-- one retracts it (-D); each commit records the join's output watermark. Its watermark may
-- trail the clock by 15 minutes at most (the `watermark_freshness` check, `check_freshness`).
-- It is partitioned by the hour of order_time: an hour is complete once the watermark passes
-- its end, and Dagster records it then (`chronolake partitions orders_enriched`).
CREATE VIEW orders_enriched WITH (
  'partition.time.schedule' = 'hourly',
  'partition.time.start' = '2026-11-02 09:00',
  'freshness.max-lag' = '15 min'
) AS
SELECT o.order_id, o.currency, o.amount, o.order_time,
       r.rate, r.currency_time AS rate_time, o.amount * r.rate AS amount_usd
FROM orders AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;

-- Each order with the latest rate when it is processed; waits for the hybrid source's snapshot.
CREATE VIEW orders_enriched_latest AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS amount_usd
FROM orders AS o
JOIN rates_hybrid FOR SYSTEM_TIME AS OF o.proc_time AS r
ON o.currency = r.currency;

-- Orders and revenue per currency per 10 minutes of order time (event-time TUMBLE window):
-- each window is emitted once, by the run whose watermark passes its end. Partitioned by day
-- of window_start (UTC, from the demo data's first day): a day is recorded as materialized
-- once the watermark has passed its end, which is when the daily report reads it.
CREATE VIEW orders_per_currency WITH (
  'partition.time.schedule' = 'daily',
  'partition.time.start' = '2026-11-02'
) AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount) AS total_amount
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, currency;

-- The second hop: revenue in USD per currency per 15 minutes of order time, aggregated from
-- orders_enriched's change feed (its watermark is the one orders_enriched's commits record).
-- Corrections and cancellations that arrive before a window closes are applied to it.
CREATE VIEW revenue_per_currency AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount_usd) AS revenue_usd
FROM TABLE(TUMBLE(TABLE orders_enriched, DESCRIPTOR(order_time), INTERVAL '15' MINUTES))
GROUP BY window_start, window_end, currency;
