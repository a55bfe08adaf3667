"""Where chronolake keeps what it writes in a lake: the one owner of the lake's layout.

Everything lives under `<lake>/_chronolake/`: the catalog, each derived table's
output (`views/<name>`, a Delta changelog table), its late-rows side table
(`late/<name>`), its state and checkpoints (`state/<name>`, with the error of its last
run when that run failed), run locks, and the CLI's logs of Spark's full errors (`logs/`).
"""

from __future__ import annotations

from pathlib import Path

from chronolake.lake.storage import Location, Storage, as_location, join, joined_under

SYSTEM_ROOT = Path("_chronolake")
CATALOG_ROOT = SYSTEM_ROOT / "catalog"
VIEWS_ROOT = SYSTEM_ROOT / "views"
STATE_ROOT = SYSTEM_ROOT / "state"
LATE_ROOT = SYSTEM_ROOT / "late"
LOCK_ROOT = SYSTEM_ROOT / "locks"
LOGS_ROOT = SYSTEM_ROOT / "logs"
LAST_ERROR_NAME = "last-error.json"


def table_location(root: Location, path: str | Path) -> str | Path:
    """Where a declared table's Delta data is: its `path` option, relative to the lake unless
    it is absolute (a folder or a URI of its own). The one resolver of table locations:
    everything that reads or writes a declared table asks it."""
    return joined_under(root, path)


def output_path(root: Location, name: str) -> str | Path:
    """Where a view's rows are materialized: `_chronolake/views/<name>` under the lake."""
    return join(root, _key(VIEWS_ROOT, name))


def last_error_path(root: Location, name: str) -> str | Path:
    """Where the error of a view's last run is kept while that run is the latest failure:
    `_chronolake/state/<name>/last-error.json` (removed by its next successful run)."""
    return join(state_path(root, name), LAST_ERROR_NAME)


def history_path(root: Location, name: str) -> str | Path:
    """Where an event-time temporal join keeps the build side's versions for late probe
    rows: `_chronolake/state/<name>/history`."""
    return join(state_path(root, name), "history")


def holds_lake(root: Location) -> bool:
    """Whether `root` holds a lake: chronolake's folder, or a Delta table at most two folders
    down (tables a script is about to declare)."""
    location = as_location(root)
    if isinstance(location, Path):
        if (location / SYSTEM_ROOT).is_dir() or (location / "_delta_log").is_dir():
            return True
        return any(location.glob("*/_delta_log")) or any(location.glob("*/*/_delta_log"))
    lake = Storage(location)
    if lake.holds(SYSTEM_ROOT.as_posix()) or lake.holds("_delta_log"):
        return True
    return any(lake.holds(f"{folder}/_delta_log")
               or any(lake.holds(f"{folder}/{inner}/_delta_log") for inner in lake.folders(folder))
               for folder in lake.folders())


def has_catalog(root: Location) -> bool:
    """Whether `root` holds chronolake's folder (a lake that has been declared into)."""
    return Storage(root).holds(SYSTEM_ROOT.as_posix())


def late_path(root: Location, name: str) -> str | Path:
    """Where a derived table's late rows go: `_chronolake/late/<name>`."""
    return join(root, _key(LATE_ROOT, name))


def state_path(root: Location, name: str) -> str | Path:
    """Where a derived table's state, checkpoints and intents live: `_chronolake/state/<name>`."""
    return join(root, _key(STATE_ROOT, name))


def catalog_dir(root: Location) -> str | Path:
    """Where the lake's catalog entries are: `_chronolake/catalog/`."""
    return join(root, CATALOG_ROOT.as_posix())


def lock_dir(root: Location) -> str | Path:
    """Where the run locks of a lake's derived tables are: `_chronolake/locks/`."""
    return join(root, LOCK_ROOT.as_posix())


def view_data_keys(name: str) -> tuple[str, str, str]:
    """Everything chronolake writes for view `name` (output, late rows, state), which
    dropping the view removes: folders relative to the lake's root."""
    return _key(VIEWS_ROOT, name), _key(LATE_ROOT, name), _key(STATE_ROOT, name)


def _key(folder: Path, name: str) -> str:
    """Table `name`'s folder under one of chronolake's folders, relative to the lake."""
    return (folder / name.lower()).as_posix()
