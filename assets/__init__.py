"""The reference platform's tables: DDL in `platform.sql`, assets built from it.

The DDL is parsed in memory, here, so that the jobs (`ops`) and the plain assets downstream
(`assets.daily_report`) read each table's partitions from the one declaration.
"""

from __future__ import annotations

from pathlib import Path

from chronolake.dagster import script_specs

PLATFORM_DDL = Path(__file__).with_name("platform.sql").read_text()
PLATFORM_SPECS = script_specs(PLATFORM_DDL)
