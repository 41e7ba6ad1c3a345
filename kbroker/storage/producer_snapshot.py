"""Producer state snapshots: `<20-digit offset>.snapshot` files in a partition directory
(named as Kafka names them), each the producer state of the log below that offset.

Format (ours, big-endian):

    version int16 (2) | crc uint32 (CRC-32C of everything after it) | count int32 |
    count x (producer_id int64 | epoch int16 | last_timestamp int64 |
             coordinator_epoch int32 | current_txn_first_offset int64 (-1: none) |
             batches int8 |
             batches x (first_seq int32 | last_seq int32 | first_offset int64 |
                        last_offset int64))

Version 1 (before transactions) lacks coordinator_epoch and current_txn_first_offset;
it is still read (as -1 and none). A snapshot whose version or CRC is wrong is ignored
and deleted: the state is then rebuilt from the log.

Lock: written on the flush thread (after a roll) or the loop thread; read on the loop
thread or a recovery thread before the Log is published.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable

from kbroker._core.crc32c import crc32c
from kbroker.storage.producer_append import BatchMetadata, ProducerStateEntry
from kbroker.utils.atomic_file import write_atomically

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 2
_HEAD = struct.Struct(">hIi")
_ENTRY_V1 = struct.Struct(">qhqb")
_ENTRY_V2 = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqq")


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot files among `names`, ascending."""
    out = []
    for name in names:
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        count += 1
        body += _ENTRY_V2.pack(e.producer_id, e.epoch, e.last_timestamp, e.coordinator_epoch,
                               e.current_txn_first_offset, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
    body[0:0] = struct.pack(">i", count)
    return struct.pack(">hI", VERSION, crc32c(bytes(body))) + bytes(body)


def decode(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot; ValueError or struct.error when it is not one."""
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version not in (1, 2) or crc32c(data[6:]) != crc:
        raise ValueError("bad version or CRC")
    pos = _HEAD.size
    out = []
    for _ in range(count):
        if version == 1:
            pid, epoch, ts, n = _ENTRY_V1.unpack_from(data, pos)
            coordinator_epoch, txn_first = -1, -1
            pos += _ENTRY_V1.size
        else:
            pid, epoch, ts, coordinator_epoch, txn_first, n = _ENTRY_V2.unpack_from(data, pos)
            pos += _ENTRY_V2.size
        entry = ProducerStateEntry(pid, epoch, ts, coordinator_epoch, txn_first)
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
            pos += _BATCH.size
        out.append(entry)
    return out


def read(path: str) -> list[ProducerStateEntry] | None:
    """The entries of the snapshot at `path`; None (and the file deleted) when unreadable."""
    try:
        with open(path, "rb") as f:
            return decode(f.read())
    except (OSError, ValueError, struct.error) as e:
        log.warning("ignoring producer snapshot %s: %s", path, e)
        unlink(path)
        return None


def write(path: str, data: bytes, sync: bool = True) -> bool:
    try:
        write_atomically(path, data, sync=sync)
    except OSError as e:
        log.warning("cannot write producer snapshot %s: %s", path, e)
        return False
    return True


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
