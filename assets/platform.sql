-- The reference platform: declared once, shown in Dagster, queried with Flink SQL.

-- Orders land append-only; their event time is order_time, at most 5 s out of order.
CREATE TABLE orders (
  order_id BIGINT,
  currency STRING,
  amount DECIMAL(10, 2),
  order_time TIMESTAMP(3),
  proc_time AS PROCTIME(),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH (
  'connector' = 'delta',
  'path' = 'orders',
  'changelog' = 'append'
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
  'changelog' = 'cdf'
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
