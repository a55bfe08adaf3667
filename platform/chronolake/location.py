"""Where a lake, a table or a document is: a folder on this machine's disk or an object
store's URI, resolved once.

Every tier names places (the Spark session's lake, the lake's tables, the catalog's
documents), so the type lives below them all; `chronolake.lake.storage` reads and writes
what is there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

LOCAL_SCHEME = "file"

@dataclass(frozen=True, slots=True)
class Location:
    """Where a lake, a table or a document is, resolved once: an absolute folder on this
    machine's disk, or an object store's URI. Spark and delta-rs are handed `str()` of it;
    only a local one has a `path`, so a URI never reaches code that would read it as a
    folder.

    Example:
        >>> as_location("s3://bucket/lake/") / "_chronolake/views/orders"
        Location('s3://bucket/lake/_chronolake/views/orders')
    """

    text: str
    """An absolute local path (no scheme), or a URI without a trailing `/`."""

    @property
    def is_local(self) -> bool:
        """Whether this is a folder or a file on this machine's disk."""
        return "://" not in self.text

    @property
    def path(self) -> Path:
        """The local path: only a local location has one."""
        if not self.is_local:
            raise TypeError(f"{self.text} is an object store's URI, not a local path")
        return Path(self.text)

    @property
    def uri(self) -> str:
        """The location as a URI (`file:///…` for a local one), as Dagster shows it."""
        return self.path.as_uri() if self.is_local else self.text

    @property
    def name(self) -> str:
        """The last segment: a table's or a document's own name."""
        return PurePosixPath(self.text).name

    def __truediv__(self, key: str) -> Location:
        """`key` (a `/`-separated path) under this location."""
        if self.is_local:
            return Location(str(self.path / key))
        return Location(f"{self.text}/{key.strip('/')}")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Location({self.text!r})"


LocationLike = str | os.PathLike[str] | Location
"""A location as a user or a caller gives it: a folder, a `file://` URI, an object store's URI."""


def as_location(given: LocationLike) -> Location:
    """A location resolved: a local folder (a plain path or a `file://` URI) made absolute,
    an object store's URI kept as it is, without its trailing `/`."""
    if isinstance(given, Location):
        return given
    text = os.fspath(given)
    parsed = urlparse(text)
    if parsed.scheme == LOCAL_SCHEME:
        return Location(str(Path(unquote(parsed.path)).absolute()))
    if "://" not in text or len(parsed.scheme) == 1:  # `lakes:v2` and `C:\…` are folders
        return Location(str(Path(text).absolute()))
    return Location(text.rstrip("/"))


def joined_under(root: LocationLike, path: LocationLike) -> Location:
    """`path` resolved against the lake location `root`: itself when it is a URI or an
    absolute folder, else under the root (a folder resolved, as Spark and delta-rs are handed
    absolute paths; a URI joined with `/`, never turned into a local path)."""
    if isinstance(path, Location):
        return path
    text = os.fspath(path)
    own = as_location(text)
    if not own.is_local or Path(text).is_absolute() or text.startswith("file:"):
        return own
    base = as_location(root)
    return Location(str((base.path / text).resolve())) if base.is_local else base / text
