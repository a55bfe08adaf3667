"""Which TCP addresses a process tree listens on, read from Linux's /proc (no `ss` needed)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"  # the TCP state in /proc/net/tcp{,6}


def process_tree(pid: int) -> set[int]:
    """`pid` and every process descended from it now."""
    children: dict[int, list[int]] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended meanwhile
            continue
        # The command name, in parentheses, may hold spaces: the fields follow its last ")".
        parent = int(text[text.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, pending = set(), [pid]
    while pending:
        current = pending.pop()
        tree.add(current)
        pending += children.get(current, [])
    return tree


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in (PROC / str(pid) / "fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    except OSError:  # the process ended meanwhile
        pass
    return inodes


def _address(hex_address: str) -> str:
    # The kernel prints each 32-bit word in host order (little-endian here).
    words = [bytes.fromhex(hex_address[i:i + 8])[::-1] for i in range(0, len(hex_address), 8)]
    address = ipaddress.ip_address(b"".join(words))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"  # as `ss` shows it
    return str(address)


def _listening_sockets() -> dict[str, tuple[str, int]]:
    """(address, port) of every listening TCP socket, by its inode."""
    sockets = {}
    for table in ("tcp", "tcp6"):
        for line in (PROC / "net" / table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN:
                address, port = local.split(":")
                sockets[inode] = (_address(address), int(port, 16))
    return sockets


def listening(pids: Iterable[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket that one of `pids` listens on."""
    sockets = _listening_sockets()
    return {sockets[inode] for pid in pids for inode in _socket_inodes(pid) if inode in sockets}


def listener_of(port: int) -> int:
    """The pid of this user's process that listens on TCP `port`."""
    inodes = {inode for inode, (_, found) in _listening_sockets().items() if found == port}
    for pid_dir in PROC.glob("[0-9]*"):
        if inodes & _socket_inodes(int(pid_dir.name)):
            return int(pid_dir.name)
    msg = f"no process of this user listens on TCP port {port}"
    raise LookupError(msg)


def on_loopback(address: str) -> bool:
    """Whether `address` is a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x.y.z, as a
    Java socket bound to 127.0.0.1 shows in /proc/net/tcp6)."""
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback
