"""One run per derived table at a time: a lease under `_chronolake/locks/`.

The lease is a small document, `<table>.lock`, created with a put-if-absent write
(`Storage.create_text`), so it holds between processes that share nothing but the
lake (two hosts, an object store): of two runs started together exactly one creates
it; the other fails at once with a clear error, before it has read or written
anything. Its holder renews it while it runs and removes it when it ends.

A holder that cannot remove it (killed with SIGKILL, its host gone) leaves it behind,
so a lease is taken over when its holder provably ended (on this host: no such
process any more) or has not renewed it for `LEASE_TTL_S` (another host's, which
cannot be checked). A takeover can race with another, or with a holder that was only
frozen; that is safe, because the lease only spares work: what makes a run exactly
once is its commit point, which two runs cannot both pass
(`chronolake.catalog.checkpoint`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from uuid import uuid4

from chronolake.errors import RunLockedError
from chronolake.lake.scratch import Writer
from chronolake.lake.storage import STORAGE_ERRORS, Storage
from chronolake.location import LocationLike

LEASE_TTL_S = 60.0
"""How long a lease stays its holder's without a renewal: far longer than the holder's
renewals are apart (`RENEW_EVERY_S`), however loaded its machine."""
RENEW_EVERY_S = LEASE_TTL_S / 6


@dataclass(frozen=True)
class Lease:
    """Who holds a table's run lock (`holder`), the holding's `token`, and when the holder
    last renewed it (`renewed_ms`, its own clock)."""

    holder: Writer
    token: str
    renewed_ms: int

    def to_json(self) -> str:
        return json.dumps({
            "pid": self.holder.pid, "host": self.holder.host, "started": self.holder.started,
            "since_ms": self.holder.made_ms, "token": self.token, "renewed_ms": self.renewed_ms,
        })

    @classmethod
    def from_json(cls, text: str) -> Lease:
        fields = json.loads(text)
        holder = Writer(fields["host"], fields["pid"], fields["started"], fields["since_ms"])
        return cls(holder, fields["token"], fields["renewed_ms"])

    def is_stale(self, now_ms: int) -> bool:
        """Whether its holder ended or stopped renewing it: the lease can be taken over."""
        return self.holder.ended_here() or now_ms - self.renewed_ms > LEASE_TTL_S * 1000


def lease_name(name: str) -> str:
    """The lease document of derived table `name`, in the lake's lock folder."""
    return f"{name}.lock"


@contextmanager
def run_lock(locks: Storage | LocationLike, name: str) -> Iterator[None]:
    """Hold the run lock of derived table `name` (a lease in the folder `locks`, the lake's
    `layout.lock_dir`) for the duration of the block.

    Raises `RunError` at once when another live process holds it.
    """
    locks = locks if isinstance(locks, Storage) else Storage(locks)
    key = lease_name(name)
    lease = _take(locks, key, name)
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(locks, key, lease, stop), name=f"chronolake-lease-{name}",
        daemon=True,
    )
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        _remove_if_held(locks, key, lease.token)


def _take(locks: Storage, key: str, name: str) -> Lease:
    """Create the lease, taking over a stale one; `RunError` when a live holder has it."""
    for _ in range(3):
        now = _now_ms()
        mine = Lease(Writer.current(), uuid4().hex, now)
        if locks.create_text(key, mine.to_json()):
            return mine
        held = _read(locks, key)
        if held is None:
            continue  # released meanwhile
        if not held.is_stale(now):
            raise _busy(name, locks.path_of(key), held)
        _remove_if_held(locks, key, held.token)
    raise _busy(name, locks.path_of(key), _read(locks, key))


def _busy(name: str, where: object, held: Lease | None) -> RunLockedError:
    pid, host = (held.holder.pid, held.holder.host) if held else ("?", "?")
    return RunLockedError(
        f"another run of {name!r} is in progress (pid {pid} on {host}, holding {where}); "
        "expected no concurrent run of the same derived table; this run read and changed "
        "nothing: wait for the other run to finish, then run again"
    )


def _renew(locks: Storage, key: str, lease: Lease, stop: threading.Event) -> None:
    """Renew the lease until `stop`, or until it is no longer ours (taken over)."""
    while not stop.wait(RENEW_EVERY_S):
        try:
            held = _read(locks, key)
            if held is None or held.token != lease.token:
                return
            locks.write_text(key, replace(lease, renewed_ms=_now_ms()).to_json())
        except STORAGE_ERRORS:
            continue  # the lake was unreachable for a moment: try again next time


def _remove_if_held(locks: Storage, key: str, token: str) -> None:
    held = _read(locks, key)
    if held is not None and held.token == token:
        locks.delete(key)


def _read(locks: Storage, key: str) -> Lease | None:
    try:
        text = locks.read_text(key)
        return None if text is None else Lease.from_json(text)
    except (ValueError, KeyError, TypeError):
        # Not a lease this version wrote (an older version's flock file): no holder to wait for.
        return Lease(Writer("", 0, "", 0), "", 0)


def _now_ms() -> int:
    return int(time.time() * 1000)
