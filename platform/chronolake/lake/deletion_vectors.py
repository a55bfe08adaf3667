"""Delta deletion vectors: which rows of a data file are deleted, without rewriting the file.

A deletion vector is a set of row indexes of one data file, stored as Delta's
`RoaringBitmapArray` (magic number, bitmap count, then per bitmap its key and a
portable 32-bit roaring bitmap: pyroaring's own serialization) in a
`deletion_vector_<uuid>.bin` file of the table folder: a version byte, then per
vector its size (4 bytes, big-endian), its bytes and their CRC-32. The `add`
action of the file points at it with a descriptor: storage type `u`, the
Z85-encoded UUID, the offset of the size field, the size and the cardinality.

Reading them is delta-rs's job (`DeltaTable.deletion_vectors()`); chronolake
writes them when an update touches a small share of a large file, so that a run
writes in proportion to its change (see `chronolake.lake.upserts`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote
from uuid import UUID, uuid4

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from pyroaring import BitMap

from chronolake.errors import SourceError
from chronolake.lake.delta_log import CDF_PROPERTY
from chronolake.lake.files import DELETED_FILE, DELETED_ROW
from chronolake.lake.storage import Storage

FEATURE = "deletionVectors"
ENABLE_PROPERTY = "delta.enableDeletionVectors"
CDF_FEATURE = "changeDataFeed"
READER_VERSION, WRITER_VERSION = 3, 7

_MAGIC = 1681511377
_FORMAT_VERSION = 1
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


@dataclass(frozen=True, slots=True)
class DeletionVector:
    """A deletion vector's descriptor, as an `add` or `remove` action carries it."""

    path_or_inline: str
    offset: int
    size: int
    cardinality: int
    file_name: str
    """The deletion vector file in the table folder (derived from `path_or_inline`)."""

    def action(self) -> dict[str, object]:
        """The descriptor as the Delta log writes it."""
        return {
            "storageType": "u", "pathOrInlineDv": self.path_or_inline, "offset": self.offset,
            "sizeInBytes": self.size, "cardinality": self.cardinality,
        }


def deleted_rows(table: DeltaTable) -> pa.Table:
    """`(file_name, row_index)` of every row the table's deletion vectors delete (as many
    rows as there are deleted rows; none when the table has no deletion vector)."""
    none = pa.table({DELETED_FILE: pa.array([], pa.string()),
                     DELETED_ROW: pa.array([], pa.int64())})
    if FEATURE not in (table.protocol().reader_features or []):
        return none
    vectors = pa.table(table.deletion_vectors())
    if not vectors.num_rows:
        return none
    keep = vectors["selection_vector"].combine_chunks()
    flat = np.asarray(keep.flatten(), dtype=bool)
    offsets = np.asarray(keep.offsets)
    parents = np.repeat(np.arange(len(keep)), np.diff(offsets))
    rows = np.arange(len(flat)) - offsets[parents]
    names = np.array([uri.rsplit("/", 1)[-1] for uri in vectors["filepath"].to_pylist()],
                     dtype=object)
    deleted = ~flat
    return pa.table({DELETED_FILE: pa.array(names[parents[deleted]], pa.string()),
                     DELETED_ROW: pa.array(rows[deleted], pa.int64())})


def write_vectors(table: Storage, deleted: Mapping[str, BitMap]) -> dict[str, DeletionVector]:
    """One deletion vector file in the `table`'s folder holding a vector per data file; the
    descriptors."""
    if not deleted:
        return {}
    uuid = uuid4()
    file_name = _file_of(uuid)
    content = bytearray([_FORMAT_VERSION])
    descriptors: dict[str, DeletionVector] = {}
    for name, rows in deleted.items():
        data = _bitmap_array(rows)
        descriptors[name] = DeletionVector(
            path_or_inline=_z85(uuid.bytes), offset=len(content), size=len(data),
            cardinality=len(rows), file_name=file_name,
        )
        content += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    table.write_bytes(file_name, bytes(content))
    return descriptors


def enabling_actions(table: DeltaTable) -> list[dict[str, object]]:
    """The `protocol` and `metaData` actions that let a table carry deletion vectors (none
    when it can already): reader 3 and writer 7 with the feature named, the table's other
    features in use kept, and `delta.enableDeletionVectors` set."""
    protocol = table.protocol()
    if FEATURE in (protocol.reader_features or []):
        return []
    metadata = table.metadata()
    configuration = {**metadata.configuration, ENABLE_PROPERTY: "true"}
    in_use = {CDF_FEATURE} if configuration.get(CDF_PROPERTY) == "true" else set()
    writer = sorted({*(protocol.writer_features or []), *in_use, FEATURE})
    return [
        {"protocol": {
            "minReaderVersion": READER_VERSION, "minWriterVersion": WRITER_VERSION,
            "readerFeatures": sorted({*(protocol.reader_features or []), FEATURE}),
            "writerFeatures": writer,
        }},
        {"metaData": {
            "id": metadata.id, "name": metadata.name, "description": metadata.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": table.schema().to_json(),
            "partitionColumns": list(metadata.partition_columns),
            "configuration": configuration, "createdTime": metadata.created_time,
        }},
    ]


def read_vector(table: Storage, descriptor: Mapping[str, object]) -> BitMap:
    """The row indexes a deletion vector descriptor (from an `add` or `remove`) deletes:
    stored in a file of the table (`u`: a random prefix and the file's UUID), at an absolute
    path (`p`), or inline in the descriptor (`i`)."""
    kind, where = str(descriptor["storageType"]), str(descriptor["pathOrInlineDv"])
    if kind == "i":
        return _from_bitmap_array(_unz85(where))
    if (key := vector_file(descriptor)) is not None:
        content = table.read_bytes(key)
    else:
        folder, name = unquote(where).rsplit("/", 1)
        content = Storage(folder).read_bytes(name)
    if content is None:
        msg = (f"{table.location}: the deletion vector file {where!r} is missing; expected "
               "the file the Delta log names; restore it, or run a full refresh")
        raise SourceError(msg)
    offset = int(str(descriptor.get("offset") or 0))
    (size,) = struct.unpack_from(">i", content, offset)
    return _from_bitmap_array(content[offset + 4:offset + 4 + size])


def vector_file(descriptor: Mapping[str, object]) -> str | None:
    """The file of the table that holds a deletion vector stored there (`u`: a random prefix
    and the file's UUID), as a key under the table; None for one inline or elsewhere."""
    if descriptor["storageType"] != "u":
        return None
    where = str(descriptor["pathOrInlineDv"])
    return _file_of(UUID(bytes=_unz85(where[-20:])), where[:-20])


def _file_of(uuid: UUID, prefix: str = "") -> str:
    """A deletion vector file's key in its table: Delta's name, under its random prefix."""
    name = f"deletion_vector_{uuid}.bin"
    return f"{prefix}/{name}" if prefix else name


def _from_bitmap_array(data: bytes) -> BitMap:
    """Row indexes (below 2^32, this reader's limit) from Delta's RoaringBitmapArray."""
    magic, count = struct.unpack_from("<iq", data, 0)
    if magic != _MAGIC:
        msg = f"not a Delta deletion vector (magic number {magic}, expected {_MAGIC})"
        raise SourceError(msg)
    rows, at = BitMap(), 12
    for _ in range(count):
        (key,) = struct.unpack_from("<i", data, at)
        bitmap = BitMap.deserialize(data[at + 4:])
        if key != 0 and len(bitmap):
            msg = ("a deletion vector deletes rows beyond 2^32 of one file, which chronolake "
                   "cannot read; rewrite the file (REORG TABLE ... APPLY (PURGE))")
            raise SourceError(msg)
        rows |= bitmap
        at += 4 + len(bitmap.serialize())
    return rows


def _bitmap_array(rows: BitMap) -> bytes:
    """Delta's RoaringBitmapArray of `rows` (row indexes of one file, below 2^32)."""
    return struct.pack("<iqi", _MAGIC, 1, 0) + rows.serialize()


def _unz85(text: str) -> bytes:
    """Z85 decoding: every five characters are four bytes."""
    digits = {c: i for i, c in enumerate(_Z85)}
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start:start + 5]:
            value = value * 85 + digits[char]
        out += value.to_bytes(4, "big")
    return bytes(out)


def _z85(data: bytes) -> str:
    """ZeroMQ's Z85 encoding (Delta's for the UUID of a deletion vector file)."""
    out: list[str] = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start:start + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85[digit])
        out.extend(reversed(chunk))
    return "".join(out)
