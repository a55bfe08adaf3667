"""The registry: what is declared in a lake, one JSON document per name, read once per write.

The entries live under `<lake>/_chronolake/catalog/` as `<name>.json` (`<name>.dropping`
while a drop removes the name), so a later process (the CLI, `dagster dev`, a scheduled run)
sees what an earlier one registered. A registry keeps each entry it loaded with the tag of
the document it came from (its ETag) and loads it again only when the tag changes: another
process's write is seen on the next read, and an unchanged entry is never validated twice.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from chronolake.catalog.entry import CatalogEntry, Spec
from chronolake.catalog.removal import RemovedData, removal_lock, remove_view_data
from chronolake.errors import DefinitionError, UnknownNameError
from chronolake.lake.layout import catalog_dir
from chronolake.lake.storage import Storage
from chronolake.location import Location, LocationLike, as_location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.existing import Kind
from chronolake.sql.operator_plan import StoredPlan

_ENTRY, _DROPPING = ".json", ".dropping"  # a registration; one a drop is removing


class Registry:
    """The catalog entries of the lake at `root`, cached by the tag of their documents.

    Example:
        >>> registry = Registry(Location("demo-lake"))
        >>> registry.specs()["orders"].name
        'orders'
    """

    def __init__(self, root: Location) -> None:
        self.root = root
        self._documents = Storage(catalog_dir(root))
        self._loaded: dict[str, tuple[str, CatalogEntry | None]] = {}

    # -- reading ---------------------------------------------------------------------------

    def entries(self) -> dict[str, CatalogEntry]:
        """Every entry by (lower-case) name; a `DefinitionError` names one that no longer
        loads and says how to remove it."""
        return {name: self._entry_or_refuse(name, tag)
                for name, tag in self._tagged(_ENTRY).items()}

    def specs(self) -> dict[str, Spec]:
        """Every registered spec by (lower-case) name."""
        return {name: entry.spec for name, entry in self.entries().items()}

    def entry(self, name: str) -> CatalogEntry:
        """The entry of `name` (case-insensitive); `UnknownNameError` when there is none."""
        tag = self._documents.tag(_entry_name(name))
        if tag is None:
            known = ", ".join(sorted(self.specs())) or "none"
            raise UnknownNameError(f"unknown table or view {name!r}; registered: {known}")
        return self._entry_or_refuse(name.lower(), tag)

    def loadable(self) -> tuple[dict[str, Spec], list[str]]:
        """The specs of the entries that load, and the names of those that do not (and of
        drops a crash interrupted): what a script is checked against."""
        specs: dict[str, Spec] = {}
        unloaded = list(self._tagged(_DROPPING))
        for name, tag in self._tagged(_ENTRY).items():
            entry = self._entry_if_loads(name, tag)
            if entry is None:
                unloaded.append(name)
            else:
                specs[name] = entry.spec
        return specs, unloaded

    def current(self, name: str) -> CatalogEntry | None:
        """The entry of `name` if it loads; None when there is none or it no longer loads."""
        tag = self._documents.tag(_entry_name(name))
        return None if tag is None else self._entry_if_loads(name.lower(), tag)

    def is_registered(self, name: str) -> bool:
        return self._documents.exists(_entry_name(name))

    def is_being_dropped(self, name: str) -> bool:
        return self._documents.exists(_pending_name(name))

    def names(self) -> list[str]:
        """The registered names, whether or not their entries load."""
        return list(self._tagged(_ENTRY))

    def stored_kind(self, name: str) -> tuple[Kind | None, str] | None:
        """What the stored JSON of `name` (or of its interrupted drop) says it is, and its
        name as declared; None when there is neither. Reads no spec, so it works for an
        entry that no longer loads."""
        stored = (self._documents.read_text(_entry_name(name))
                  or self._documents.read_text(_pending_name(name)))
        if stored is None:
            return None
        raw = _raw_entry(stored)
        kind = raw.get("kind")
        if kind != "table" and kind != "view":
            return None, name
        spec = raw.get(kind)
        declared = spec.get("name") if isinstance(spec, dict) else None
        return kind, declared if isinstance(declared, str) else name

    def stored_queries(self) -> dict[str, str]:
        """Every registered view's query, from the stored JSON (no spec validation)."""
        queries = {}
        for name in self._tagged(_ENTRY):
            raw = _raw_entry(self._documents.read_text(_entry_name(name)) or "")
            view = raw.get("view") if raw.get("kind") == "view" else None
            query = view.get("query") if isinstance(view, dict) else None
            if isinstance(query, str):
                queries[name] = query
        return queries

    # -- writing ---------------------------------------------------------------------------

    def write(self, spec: Spec, statement: str | None = None) -> Spec:
        """Register `spec` (replacing an entry of its name), with the DDL that declared it."""
        entry = CatalogEntry(
            kind="table" if isinstance(spec, TableSpec) else "view",
            table=spec if isinstance(spec, TableSpec) else None,
            view=spec if isinstance(spec, ViewSpec) else None,
            statement=statement,
        )
        self._documents.write_text(_entry_name(spec.name), entry.model_dump_json(indent=2))
        return spec

    def keep_plan(self, view: ViewSpec, stored: StoredPlan) -> None:
        """Keep `stored` in the entry of `view` for its later runs. Called by a run under the
        view's lock once it checked the registration, so never into a dropped view's entry."""
        entry = self.entry(view.name)
        if entry.spec == view and entry.plan != stored:
            kept = entry.model_copy(update={"plan": stored})
            self._documents.write_text(_entry_name(view.name), kept.model_dump_json(indent=2))

    def remove(self, name: str, action: str) -> RemovedData:
        """Unregister `name` and remove its data, in an order a crash cannot spoil: the entry
        is set aside first (copied to `<name>.dropping`, then removed: the name is then free,
        and nothing can run it), the data goes, the set-aside entry last; removing the name
        again finishes the job. No rename, so object stores do the same."""
        entry, pending = _entry_name(name), _pending_name(name)
        with removal_lock(self.root, name, action):
            stored = self._documents.read_text(entry)
            if stored is not None:
                self._documents.write_text(pending, stored)
                self._documents.delete(entry)
            removed = remove_view_data(self.root, name)
            self._documents.delete(pending)
        return removed

    # -- internals -------------------------------------------------------------------------

    def _tagged(self, suffix: str) -> dict[str, str]:
        """The names of the documents ending with `suffix`, with their tags."""
        return {file.removesuffix(suffix): tag
                for file, tag in self._documents.tags().items() if file.endswith(suffix)}

    def _entry_if_loads(self, name: str, tag: str) -> CatalogEntry | None:
        """The entry of `name` stored under `tag`, None when it no longer loads; loaded again
        only when the tag changed."""
        cached = self._loaded.get(name)
        if cached is None or cached[0] != tag:
            cached = tag, _loaded(self._documents.read_text(_entry_name(name)) or "")
            self._loaded[name] = cached
        return cached[1]

    def _entry_or_refuse(self, name: str, tag: str) -> CatalogEntry:
        """The entry of `name` stored under `tag`; a `DefinitionError` saying how to remove
        it when it no longer loads (written by another chronolake version, or edited by
        hand)."""
        entry = self._entry_if_loads(name, tag)
        if entry is not None:
            return entry
        stored = self._documents.read_text(_entry_name(name)) or ""
        where = str(self._documents.path_of(_entry_name(name)))
        try:
            return CatalogEntry.read_json(stored, where=where)
        except ValidationError as error:
            kind = _raw_entry(stored).get("kind")
            keyword = kind.upper() if kind in ("table", "view") else "VIEW (or TABLE)"
            first = str(error).splitlines()[1:3]
            msg = (
                f"the registration of {name!r} ({where}) no longer loads: "
                f"{'; '.join(line.strip() for line in first)}; drop it with DROP {keyword} "
                f"{name} (a broken registration can always be dropped) and declare it again"
            )
            raise DefinitionError(msg) from None


def _entry_name(name: str) -> str:
    return f"{name.lower()}{_ENTRY}"


def _pending_name(name: str) -> str:
    return f"{name.lower()}{_DROPPING}"


def _loaded(stored: str) -> CatalogEntry | None:
    """The entry `stored`, or None when it no longer loads."""
    try:
        return CatalogEntry.read_json(stored, where="a catalog entry")
    except (ValidationError, DefinitionError):
        return None


def _raw_entry(stored: str) -> dict[str, object]:
    """The stored JSON of an entry as it is ({} when it is not a JSON object)."""
    try:
        raw = json.loads(stored)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def load_entries(root: LocationLike) -> dict[str, CatalogEntry]:
    """The catalog entries of a lake, read without a Spark session (for Dagster definitions
    and the CLI's status)."""
    return Registry(as_location(root)).entries()
