"""Where a lake's documents are kept: one storage layer over a URI, local or an object store.

Everything chronolake writes outside Spark and delta-rs (catalog entries, intents,
checkpoints, leases, the error of a view's last run, the Delta commits it writes itself)
goes through `Storage`, which takes the lake's location as a folder or a URI (`file://`,
`s3://`, `gs://`, `az://`): the same code runs on a laptop's disk and on a bucket.

It stands on obstore, the Python binding of the `object_store` crate that delta-rs uses,
so one configuration serves both: an S3 lake is configured by the standard `AWS_*`
environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials, `AWS_ALLOW_HTTP`),
GCS and Azure by theirs, and nothing of it is coded here.

Two writes matter to the run protocol, and both are single operations on every store:
`write_text` replaces a document whole (a reader sees the old or the new), and
`create_text` creates one only if nothing is there yet (put-if-absent: a hard link on a
local disk, `If-None-Match: *` on S3), so of two writers of the same name exactly one
succeeds, with no lock between them and no rename.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import LocalStore, ObjectStore, from_url

from chronolake.lake.scratch import STAGING_PREFIX, sweep, writer_of
from chronolake.location import Location, LocationLike, as_location

STORAGE_ERRORS: tuple[type[Exception], ...] = (OSError, BaseError)
"""What a storage call raises when the store cannot be reached, or refuses the call."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object under a storage's root: its key, its size and when it was last written (ms
    since the epoch, by the store's clock)."""

    key: str
    size: int
    modified_ms: int


def missing(locations: Sequence[str]) -> set[str]:
    """Which of `locations` (files, as paths or URIs) hold nothing: a `stat` each on a local
    disk, one listing per folder on an object store (not a request per file)."""
    by_folder: dict[str, list[tuple[str, str]]] = {}
    for location in locations:
        folder, _, name = location.rstrip("/").rpartition("/")
        by_folder.setdefault(folder, []).append((location, name))
    absent: set[str] = set()
    for folder, entries in by_folder.items():
        where = as_location(folder)
        if where.is_local:
            absent |= {location for location, name in entries
                       if not (where.path / name).exists()}
            continue
        # Listed under the bucket: a store made from a URI decodes its `%XX`, which Spark's
        # partition folders hold (`dt=10%3A00`), and would list another folder.
        parsed = urlparse(where.text)
        present = set(Storage(f"{parsed.scheme}://{parsed.netloc}").names(parsed.path.strip("/")))
        absent |= {location for location, name in entries if name not in present}
    return absent


class Storage:
    """The documents under one location: keys are `/`-separated paths relative to it.

    Example:
        >>> storage = Storage("s3://bucket/lake")
        >>> storage.create_text("_chronolake/locks/orders.lock", "{...}")
        True
    """

    def __init__(self, root: LocationLike) -> None:
        self.location = as_location(root)

    def path_of(self, key: str) -> Location:
        """Where `key` is, for Spark and delta-rs."""
        return self.location / key

    def read_text(self, key: str) -> str | None:
        """The document at `key`, or None when there is none."""
        found = self.read_stamped(key)
        return None if found is None else found[0]

    def read_stamped(self, key: str) -> tuple[str, int] | None:
        """The document at `key` and when it was last written (ms since the epoch), or None
        when there is none."""
        found = self._get(key)
        return None if found is None else (found[0].decode(), found[1])

    def read_bytes(self, key: str) -> bytes | None:
        """The object at `key`, or None when there is none."""
        found = self._get(key)
        return None if found is None else found[0]

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes `start` (inclusive) to `end` (exclusive) of the object at `key`."""
        return bytes(obstore.get_range(self._store, key, start=start, end=end))

    def write_text(self, key: str, text: str) -> None:
        """Write the document at `key` whole, replacing what was there: a reader sees the
        old document or the new one."""
        self.write_bytes(key, text.encode())

    def write_bytes(self, key: str, data: bytes) -> None:
        """Write the object at `key` whole, replacing what was there."""
        self._sweep_beside(key)
        obstore.put(self._store, key, data)

    def move(self, key: str, to: str) -> None:
        """Move the object at `key` to `to` (a rename on a local disk; a copy, then a delete,
        on an object store: never a commit point, which a put-if-absent write is)."""
        obstore.rename(self._store, key, to)

    def sizes(self, prefix: str) -> dict[str, int]:
        """Every object under the folder `prefix` (at any depth), with its size in bytes."""
        return {stored.key: stored.size for stored in self.objects(prefix)}

    def objects(self, prefix: str = "") -> list[StoredObject]:
        """Every object under the folder `prefix` (the whole root by default), at any depth."""
        return [
            StoredObject(meta["path"], meta["size"],
                         int(meta["last_modified"].timestamp() * 1000))
            for meta in self._objects(prefix)
        ]

    def sweep(self, prefix: str = "") -> None:
        """Remove what killed writers left directly in the folder `prefix`: on a local disk
        every kind of scratch (`chronolake.lake.scratch`); on an object store, where an upload
        cut off leaves nothing, the staging folders of writers that are gone."""
        if self.location.is_local:
            sweep(self.location.path / prefix)
            return
        now = time.time()
        for name in self.folders(prefix):
            writer = writer_of(name)
            if name.startswith(STAGING_PREFIX) and writer is not None and writer.is_gone(now):
                self.delete_tree(f"{prefix}/{name}".strip("/"))

    def create_text(self, key: str, text: str) -> bool:
        """Create the document at `key` unless one exists (put-if-absent); whether this call
        created it."""
        self._sweep_beside(key)
        try:
            obstore.put(self._store, key, text.encode(), mode="create")
        except AlreadyExistsError:
            return False
        return True

    def exists(self, key: str) -> bool:
        """Whether a document is at `key`."""
        if not self._exists_locally():
            return False
        try:
            obstore.head(self._store, key)
        except FileNotFoundError:
            return False
        return True

    def holds(self, prefix: str) -> bool:
        """Whether anything is stored under the folder `prefix`."""
        return any(True for _ in self._objects(prefix))

    def delete(self, key: str) -> None:
        """Remove the document at `key`, if any."""
        if self.exists(key):
            obstore.delete(self._store, key)

    def delete_tree(self, prefix: str) -> None:
        """Remove the folder `prefix` and everything under it, if any."""
        if self.location.is_local:  # a folder's own entries go with it
            shutil.rmtree(self.location.path / prefix, ignore_errors=True)
            return
        keys = [meta["path"] for batch in obstore.list(self._store, prefix=f"{prefix}/")
                for meta in batch]
        if keys:
            obstore.delete(self._store, keys)

    def names(self, prefix: str = "") -> list[str]:
        """The names of the documents directly in the folder `prefix` (not below it)."""
        return sorted(PurePosixPath(meta["path"]).name for meta in self._listing(prefix)["objects"])

    def tags(self, prefix: str = "") -> dict[str, str]:
        """The names of the documents directly in the folder `prefix` (sorted), each with a
        tag that changes whenever it is written (its ETag; its size and time where the store
        has none)."""
        tagged = {PurePosixPath(meta["path"]).name: _tag(meta)
                  for meta in self._listing(prefix)["objects"]}
        return dict(sorted(tagged.items()))

    def tag(self, key: str) -> str | None:
        """The tag of the document at `key` (`tags`), or None when there is none."""
        if not self._exists_locally():
            return None
        try:
            return _tag(obstore.head(self._store, key))
        except FileNotFoundError:
            return None

    def folders(self, prefix: str = "") -> list[str]:
        """The names of the folders directly in the folder `prefix`."""
        return sorted(PurePosixPath(path).name for path in self._listing(prefix)["common_prefixes"])

    def __repr__(self) -> str:
        return f"Storage({self.location.text!r})"

    @cached_property
    def _store(self) -> ObjectStore:
        if self.location.is_local:
            return LocalStore(self.location.path, mkdir=True)
        return from_url(self.location.text)

    def _sweep_beside(self, key: str) -> None:
        """On a local disk, remove what killed writers left in `key`'s folder (`sweep`)."""
        if self.location.is_local:
            sweep((self.location.path / key).parent)

    def _get(self, key: str) -> tuple[bytes, int] | None:
        """The object at `key` and when it was last written (ms since the epoch). A local
        file is read directly: a Delta log is read a file per version, and this is twice as
        fast as obstore's local store."""
        try:
            if self.location.is_local:
                with (self.location.path / key).open("rb") as file:
                    return file.read(), int(os.fstat(file.fileno()).st_mtime * 1000)
            found = obstore.get(self._store, key)
            return bytes(found.bytes()), int(found.meta["last_modified"].timestamp() * 1000)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def _exists_locally(self) -> bool:
        """False for a local folder that does not exist yet (which reading must not create);
        an object store is always there."""
        return not self.location.is_local or self.location.path.is_dir()

    def _listing(self, prefix: str) -> obstore.ListResult:
        if not self._exists_locally():
            return {"objects": [], "common_prefixes": []}
        return obstore.list_with_delimiter(self._store, prefix or None)

    def _objects(self, prefix: str) -> Iterator[obstore.ObjectMeta]:
        if not self._exists_locally():
            return
        for batch in obstore.list(self._store, prefix=f"{prefix}/" if prefix else None,
                                  chunk_size=1):
            yield from batch


def _tag(meta: obstore.ObjectMeta) -> str:
    return meta["e_tag"] or f"{meta['size']}@{meta['last_modified'].isoformat()}"
