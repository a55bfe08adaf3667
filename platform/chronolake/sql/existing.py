"""Names already in the catalog: who reads them, and the errors that refuse a CREATE or DROP.

One set of rules for a script checked before it runs (`ddl.parse_statements`) and for the
catalog that applies it (`Catalog.register`, `Catalog.drop`):

- a name is one table or one view; `CREATE` of a taken name is a no-op when the definition
  is the same (`same_definition`), else refused unless it says `OR REPLACE`;
- a table or view that other views read (directly, in their FROM or JOIN) cannot be
  dropped or replaced by a different definition until they are dropped: their output and
  state were built on what it is now.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Literal

from chronolake.errors import DefinitionError, NameTakenError, UnknownNameError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.query import referenced_tables

Kind = Literal["table", "view"]


def same_definition(current: TableSpec | ViewSpec, new: TableSpec | ViewSpec) -> bool:
    """Whether declaring `new` over `current` changes nothing the user wrote: the same spec,
    or a view with the same query. What chronolake derives from a view's query (its kind,
    time attribute, deduplication) may differ between its versions; re-declaring refreshes
    that, and never resets the view's output and state."""
    if current == new:
        return True
    return (isinstance(current, ViewSpec) and isinstance(new, ViewSpec)
            and current.name == new.name and current.query == new.query)


def readers_of(name: str, queries: Mapping[str, str]) -> list[str]:
    """The views among `queries` (view name -> its query) that read `name` directly, sorted.

    A query that no longer parses reads nothing we can tell (it belongs to a broken
    registration, which can be dropped on its own).
    """
    readers = []
    for view, query in queries.items():
        if view.lower() == name.lower():
            continue
        try:
            tables = referenced_tables(query)
        except DefinitionError:
            continue
        if name.lower() in {table.lower() for table in tables}:
            readers.append(view)
    return sorted(readers)


def readers_error(name: str, kind: Kind, readers: list[str], *, replacing: bool = False
                  ) -> DefinitionError:
    """`name` cannot be dropped (or replaced) while `readers` read it."""
    many = len(readers) > 1
    them = "them" if many else "it"
    views = f"view{'s' if many else ''} {', '.join(readers)} read{'' if many else 's'} it"
    drops = "; ".join(f"DROP VIEW {reader}" for reader in readers)
    if replacing:
        msg = (
            f"cannot replace {kind} {name} with a different definition: {views}, with output "
            f"and state built on the current one; drop {them} first ({drops}), replace {name}, "
            f"then create {them} again"
        )
    else:
        msg = f"cannot drop {kind} {name}: {views}; drop {them} first ({drops})"
    return DefinitionError(msg)


def unknown_error(
    name: str, kind: Kind | None, known: Iterable[str], *, statement: str | None = None
) -> UnknownNameError:
    """DROP (or `statement`, e.g. `DESCRIBE`) of a name nothing is registered under, with the
    closest registered name."""
    names = sorted(set(known))
    what = kind or "table or view"
    close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"registered: {', '.join(names) or 'none'}"
    if statement is not None:
        return UnknownNameError(
            f"{statement} {name}: no {what} {name!r} is registered; {hint} (SHOW TABLES lists "
            "them)"
        )
    keyword = (kind or "view").upper()
    msg = (
        f"cannot drop {what} {name!r}: no such {what} is registered; {hint} "
        f"(DROP {keyword} IF EXISTS {name} does nothing when it is absent)"
    )
    return UnknownNameError(msg)


def wrong_kind_error(name: str, actual: Kind, statement: str) -> DefinitionError:
    """`DROP TABLE` of a view, `DROP VIEW` or `CREATE OR REPLACE VIEW` of a table, ..."""
    msg = (
        f"{statement} {name}: {name!r} is a {actual}, not a "
        f"{'view' if actual == 'table' else 'table'}; remove it with DROP {actual.upper()} {name}"
    )
    return DefinitionError(msg)


def taken_error(name: str, existing: Kind | None, kind: Kind) -> NameTakenError:
    """CREATE of a name registered with another definition (`existing` None: a registration
    that no longer loads)."""
    keyword = kind.upper()
    if existing is not None and existing != kind:
        msg = f"{name!r} is already a {existing}; drop it first (DROP {existing.upper()} {name})"
        return NameTakenError(msg)
    what = (f"{kind} {name!r} already exists with a different definition" if existing else
            f"{name!r} is registered, but its registration no longer loads")
    resets = ", which resets its output and state," if kind == "view" else ""
    msg = (
        f"{what}; use CREATE OR REPLACE {keyword} (replace=True in Python){resets} or "
        f"DROP {keyword} {name} first"
    )
    return NameTakenError(msg)
