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
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import LocalStore, ObjectStore, from_url

from chronolake.lake.scratch import sweep

LOCAL_SCHEME = "file"
Location = str | os.PathLike[str]
"""A lake location: a local folder, or a URI."""
STORAGE_ERRORS: tuple[type[Exception], ...] = (OSError, BaseError)
"""What a storage call raises when the store cannot be reached, or refuses the call."""


def as_location(root: Location) -> str | Path:
    """A lake location as given: a `Path` for a local folder (a `file://` URI or a plain
    path), the URI itself for an object store."""
    text = os.fspath(root)
    parsed = urlparse(text)
    if parsed.scheme in ("", LOCAL_SCHEME) or len(parsed.scheme) == 1:  # `C:\…` is local
        return Path(parsed.path if parsed.scheme == LOCAL_SCHEME else text).absolute()
    return text.rstrip("/")


def join(location: Location, key: str) -> str | Path:
    """`key` (a `/`-separated path) under a lake location: a `Path` on a local disk, else a URI."""
    root = as_location(location)
    if isinstance(root, Path):
        return root / key
    return f"{root}/{key.strip('/')}"


class Storage:
    """The documents under one location: keys are `/`-separated paths relative to it.

    Example:
        >>> storage = Storage("s3://bucket/lake")
        >>> storage.create_text("_chronolake/locks/orders.lock", "{...}")
        True
    """

    def __init__(self, root: Location) -> None:
        self.location = as_location(root)

    def path_of(self, key: str) -> str | Path:
        """Where `key` is, for Spark and delta-rs: a `Path` on a local disk, else a URI."""
        return join(self.location, key)

    def read_text(self, key: str) -> str | None:
        """The document at `key`, or None when there is none."""
        if not self._exists_locally():
            return None
        try:
            return bytes(obstore.get(self._store, key).bytes()).decode()
        except FileNotFoundError:
            return None

    def write_text(self, key: str, text: str) -> None:
        """Write the document at `key` whole, replacing what was there: a reader sees the
        old document or the new one."""
        self._sweep_beside(key)
        obstore.put(self._store, key, text.encode())

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
        if isinstance(self.location, Path):  # a folder's own entries go with it
            shutil.rmtree(self.location / prefix, ignore_errors=True)
            return
        keys = [meta["path"] for batch in obstore.list(self._store, prefix=f"{prefix}/")
                for meta in batch]
        if keys:
            obstore.delete(self._store, keys)

    def names(self, prefix: str = "") -> list[str]:
        """The names of the documents directly in the folder `prefix` (not below it)."""
        return sorted(PurePosixPath(meta["path"]).name for meta in self._listing(prefix)["objects"])

    def folders(self, prefix: str = "") -> list[str]:
        """The names of the folders directly in the folder `prefix`."""
        return sorted(PurePosixPath(path).name for path in self._listing(prefix)["common_prefixes"])

    def __repr__(self) -> str:
        return f"Storage({str(self.location)!r})"

    @cached_property
    def _store(self) -> ObjectStore:
        if isinstance(self.location, Path):
            return LocalStore(self.location, mkdir=True)
        return from_url(self.location)

    def _sweep_beside(self, key: str) -> None:
        """On a local disk, remove what killed writers left in `key`'s folder (`sweep`)."""
        if isinstance(self.location, Path):
            sweep((self.location / key).parent)

    def _exists_locally(self) -> bool:
        """False for a local folder that does not exist yet (which reading must not create);
        an object store is always there."""
        return not isinstance(self.location, Path) or self.location.is_dir()

    def _listing(self, prefix: str) -> obstore.ListResult:
        if not self._exists_locally():
            return {"objects": [], "common_prefixes": []}
        return obstore.list_with_delimiter(self._store, prefix or None)

    def _objects(self, prefix: str) -> Iterator[obstore.ObjectMeta]:
        if not self._exists_locally():
            return
        for batch in obstore.list(self._store, prefix=f"{prefix}/", chunk_size=1):
            yield from batch
