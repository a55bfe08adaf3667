"""The two CDC tables the pipeline tests build on: orders keyed by order_id, rates by currency,
each watermarked at its own time (no delay), so a test controls every watermark exactly."""

ORDERS_AND_RATES = """
CREATE TABLE orders (
  order_id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('path' = 'orders', 'changelog' = 'cdf');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf');
"""
