"""Where chronolake keeps what it writes in a lake: the one owner of the lake's layout.

Everything lives under `<lake>/_chronolake/`: the catalog, each derived table's
output (`views/<name>`, a Delta changelog table), its late-rows side table
(`late/<name>`), its state and checkpoints (`state/<name>`, with the error of its last
run when that run failed), run locks, and the CLI's logs of Spark's full errors (`logs/`).
"""

from __future__ import annotations

from pathlib import Path

from chronolake.lake.storage import Storage
from chronolake.location import Location, LocationLike, as_location, joined_under

SYSTEM_ROOT = Path("_chronolake")
CATALOG_ROOT = SYSTEM_ROOT / "catalog"
VIEWS_ROOT = SYSTEM_ROOT / "views"
STATE_ROOT = SYSTEM_ROOT / "state"
LATE_ROOT = SYSTEM_ROOT / "late"
LOCK_ROOT = SYSTEM_ROOT / "locks"
LOGS_ROOT = SYSTEM_ROOT / "logs"
LAST_ERROR_NAME = "last-error.json"


def table_location(root: LocationLike, path: LocationLike) -> Location:
    """Where a declared table's Delta data is: its `path` option, relative to the lake unless
    it is absolute (a folder or a URI of its own). The one resolver of table locations:
    everything that reads or writes a declared table asks it."""
    return joined_under(root, path)


def output_path(root: LocationLike, name: str) -> Location:
    """Where a view's rows are materialized: `_chronolake/views/<name>` under the lake."""
    return as_location(root) / _key(VIEWS_ROOT, name)


def last_error_path(root: LocationLike, name: str) -> Location:
    """Where the error of a view's last run is kept while that run is the latest failure:
    `_chronolake/state/<name>/last-error.json` (removed by its next successful run)."""
    return state_path(root, name) / LAST_ERROR_NAME


def history_path(root: LocationLike, name: str) -> Location:
    """Where an event-time temporal join keeps the build side's versions for late probe
    rows: `_chronolake/state/<name>/history`."""
    return state_path(root, name) / "history"


def holds_lake(root: LocationLike) -> bool:
    """Whether `root` holds a lake: chronolake's folder, or a Delta table at most two folders
    down (tables a script is about to declare)."""
    location = as_location(root)
    if location.is_local:
        folder = location.path
        if (folder / SYSTEM_ROOT).is_dir() or (folder / "_delta_log").is_dir():
            return True
        return any(folder.glob("*/_delta_log")) or any(folder.glob("*/*/_delta_log"))
    lake = Storage(location)
    if lake.holds(SYSTEM_ROOT.as_posix()) or lake.holds("_delta_log"):
        return True
    return any(lake.holds(f"{folder}/_delta_log")
               or any(lake.holds(f"{folder}/{inner}/_delta_log") for inner in lake.folders(folder))
               for folder in lake.folders())


def has_catalog(root: LocationLike) -> bool:
    """Whether `root` holds chronolake's folder (a lake that has been declared into)."""
    return Storage(root).holds(SYSTEM_ROOT.as_posix())


def late_path(root: LocationLike, name: str) -> Location:
    """Where a derived table's late rows go: `_chronolake/late/<name>`."""
    return as_location(root) / _key(LATE_ROOT, name)


def state_path(root: LocationLike, name: str) -> Location:
    """Where a derived table's state, checkpoints and intents live: `_chronolake/state/<name>`."""
    return as_location(root) / _key(STATE_ROOT, name)


def catalog_dir(root: LocationLike) -> Location:
    """Where the lake's catalog entries are: `_chronolake/catalog/`."""
    return as_location(root) / CATALOG_ROOT.as_posix()


def lock_dir(root: LocationLike) -> Location:
    """Where the run locks of a lake's derived tables are: `_chronolake/locks/`."""
    return as_location(root) / LOCK_ROOT.as_posix()


def view_data_keys(name: str) -> tuple[str, str, str]:
    """Everything chronolake writes for view `name` (output, late rows, state), which
    dropping the view removes: folders relative to the lake's root."""
    return _key(VIEWS_ROOT, name), _key(LATE_ROOT, name), _key(STATE_ROOT, name)


def _key(folder: Path, name: str) -> str:
    """Table `name`'s folder under one of chronolake's folders, relative to the lake."""
    return (folder / name.lower()).as_posix()
