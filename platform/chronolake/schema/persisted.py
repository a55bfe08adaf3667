"""The documents chronolake keeps under `_chronolake/` carry the format they were written in.

A lake outlives the release that wrote it. Each kind of document (a catalog entry, a
checkpoint, a run's intent, a run's last failure) states its `FORMAT`, and every document
it writes records it. Reading one upgrades it in memory one format at a time (`UPGRADES`),
and the next write stores the current format: a user's lake survives each release that
changes a format. Documents written before formats were recorded read as format 0. A
document from a newer release is refused, by name, rather than misread.

Stored plans keep their own `format`: a plan of another format is bound anew, not upgraded
(`chronolake.sql.operator_plan`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, computed_field

from chronolake.errors import DefinitionError

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]

UNRECORDED_FORMAT = 0
"""The format of a document written before formats were recorded."""


class Persisted(BaseModel):
    """A document under `_chronolake/`: written with `model_dump_json`, read with `read_json`."""

    FORMAT: ClassVar[int] = 1
    UPGRADES: ClassVar[Mapping[int, Upgrade]] = {}
    """From format n to n + 1, for each n below `FORMAT` whose layout changed; a format
    without an entry reads as the next one unchanged (format 0 to 1 only added `format`)."""

    @computed_field(description="The format this document is written in.")  # type: ignore[prop-decorator]
    @property
    def format(self) -> int:
        return self.FORMAT

    @classmethod
    def read_json(cls, text: str, *, where: str) -> Self:
        """The document `text` (at `where`, for the error), upgraded to the current format."""
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if not isinstance(document, dict):  # not a document at all: pydantic says what is wrong
            return cls.model_validate_json(text)
        written = document.pop("format", UNRECORDED_FORMAT)
        if not isinstance(written, int):
            msg = (f"{where} names its format {written!r}, not a number: it was edited by hand "
                   f"or damaged; set its \"format\" back to a number ({cls.FORMAT} for this "
                   "release) or remove the key")
            raise DefinitionError(msg)
        if written > cls.FORMAT:
            msg = (f"{where} is written in format {written!r} of a {cls.__name__}, newer than "
                   f"the {cls.FORMAT} this release of chronolake reads; upgrade chronolake "
                   "(pip install -U chronolake) to read this lake")
            raise DefinitionError(msg)
        for step in range(written, cls.FORMAT):
            document = cls.UPGRADES.get(step, _unchanged)(document)
        return cls.model_validate(document)


def _unchanged(document: dict[str, Any]) -> dict[str, Any]:
    return document
