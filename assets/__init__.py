"""The reference platform's tables: DDL in `platform.sql`, assets built from it."""
