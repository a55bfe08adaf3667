"""Where chronolake keeps what it writes in a lake: the one owner of the lake's layout.

Everything lives under `<lake>/_chronolake/`: the catalog, each derived table's
output (`views/<name>`, a Delta changelog table), its late-rows side table
(`late/<name>`), its state and checkpoints (`state/<name>`) and run locks.
"""

from __future__ import annotations

from pathlib import Path

SYSTEM_ROOT = Path("_chronolake")
CATALOG_ROOT = SYSTEM_ROOT / "catalog"
VIEWS_ROOT = SYSTEM_ROOT / "views"
STATE_ROOT = SYSTEM_ROOT / "state"
LATE_ROOT = SYSTEM_ROOT / "late"
LOCK_ROOT = SYSTEM_ROOT / "locks"


def output_path(root: Path, name: str) -> Path:
    """Where a view's rows are materialized: `_chronolake/views/<name>` under the lake."""
    return root / VIEWS_ROOT / name.lower()
