"""ProducerStateManager: per-partition state of idempotent producers (Kafka's name).

For each producer id seen on this partition: its epoch and the metadata of its
last 5 batches (first and last sequence, first and last offset). Before an
idempotent batch is given offsets, `prepare()` checks it against that state:

  * the same epoch and the same sequences as one of the last 5 batches: a retry of
    a batch already written. Nothing is appended and the ORIGINAL offsets are
    returned with no error, as Kafka does.
  * a lower epoch: INVALID_PRODUCER_EPOCH.
  * a higher epoch (a bump, KIP-360): the first sequence must be 0, else
    OUT_OF_ORDER_SEQUENCE_NUMBER.
  * the same epoch: the first sequence must follow the last one (wrapping at
    2^31-1), else OUT_OF_ORDER_SEQUENCE_NUMBER; a batch wholly at or before the last
    sequence but older than the cached 5 is DUPLICATE_SEQUENCE_NUMBER.
  * an unknown producer id whose first sequence is not 0: UNKNOWN_PRODUCER_ID.

The state is rebuilt lazily (first idempotent append after open or truncation):
the newest snapshot at or below the log end, then the batch headers of the log from
the snapshot's offset on (headers carry producer id, epoch, base sequence and last
offset delta). Snapshots are written when a segment rolls and when the log
closes, named as Kafka names them, `<20-digit offset>.snapshot`; the two newest
are kept. Snapshot format (ours, big-endian):

    version int16 (1) | crc uint32 (CRC-32C of everything after it) | count int32 |
    count x (producer_id int64 | epoch int16 | last_timestamp int64 | batches int8 |
             batches x (first_seq int32 | last_seq int32 | first_offset int64 |
                        last_offset int64))

Lock: the broker's event-loop thread (through its Log) only.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbroker._core.crc32c import crc32c
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.records.batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from kbroker.utils.atomic_file import write_atomically

if TYPE_CHECKING:
    from kbroker.storage.log import Log

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_TO_KEEP = 2
INT32_MAX = 2**31 - 1
_SNAP_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqq")


class ProducerStateError(KafkaError):
    """An idempotent batch refused; `error_code` is the Kafka error for Produce."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message, error_code)


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def add(self, epoch: int, batch: BatchMetadata, timestamp: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(batch)
        self.last_timestamp = timestamp


@dataclass(slots=True)
class Duplicate:
    """A retried batch: the offsets it got the first time."""

    first_offset: int
    last_offset: int


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


class ProducerAppend:
    """The checked batches of one append, applied to the state once offsets are known."""

    def __init__(self, manager: ProducerStateManager, headers: list[BatchHeader]) -> None:
        self.manager = manager
        self.headers = headers

    def complete(self, first_offset: int) -> None:
        offset = first_offset
        for h in self.headers:
            self.manager.update(h, offset)
            offset += h.last_offset_delta + 1


class ProducerStateManager:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.loaded = False
        self.map_end_offset = 0  # the state covers offsets below this

    # -- append path
    def prepare(self, buf: memoryview, plog: Log) -> ProducerAppend | Duplicate:
        """Check every idempotent batch of `buf` (validated, offsets not yet assigned)."""
        self.ensure_loaded(plog)
        headers = list(_headers(buf))
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) within this append
        for h in headers:
            if h.producer_id < 0:
                continue
            dup = self._check(h, pending)
            if dup is not None:
                if len(headers) == 1:
                    return Duplicate(dup.first_offset, dup.last_offset)
                raise ProducerStateError(ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                                         f"duplicate batch of producer {h.producer_id} in a multi-batch append")
            pending[h.producer_id] = (h.producer_epoch, h.last_sequence)
        return ProducerAppend(self, headers)

    def _check(self, h: BatchHeader, pending: dict[int, tuple[int, int]]) -> BatchMetadata | None:
        pid, epoch, first_seq, last_seq = h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence
        entry = self.producers.get(pid)
        if pid in pending:
            cur_epoch, cur_last = pending[pid]
        elif entry is not None:
            dup = entry.duplicate_of(epoch, first_seq, last_seq)
            if dup is not None:
                return dup
            cur_epoch, cur_last = entry.epoch, entry.last_seq
        else:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                    f"no state for producer {pid} and its first sequence is {first_seq}, not 0")
            return None
        if epoch < cur_epoch:
            raise ProducerStateError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"producer {pid}: epoch {epoch} is older than {cur_epoch}")
        if epoch > cur_epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, not {first_seq}")
            return None
        if _in_sequence(cur_last, first_seq):
            return None
        if cur_last >= 0 and first_seq <= cur_last and last_seq <= cur_last and first_seq <= last_seq:
            raise ProducerStateError(
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                f"producer {pid}: sequences {first_seq}..{last_seq} were written before (last {cur_last})")
        raise ProducerStateError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid}: sequence {first_seq} does not follow {cur_last} (epoch {epoch})")

    def update(self, h: BatchHeader, first_offset: int) -> None:
        """Record a written batch (append path and rebuild)."""
        last_offset = first_offset + h.last_offset_delta
        if h.producer_id >= 0 and not h.is_control:
            entry = self.producers.get(h.producer_id)
            if entry is None:
                entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id, h.producer_epoch)
            if h.base_sequence >= 0:
                entry.add(h.producer_epoch,
                          BatchMetadata(h.base_sequence, h.last_sequence, first_offset, last_offset),
                          h.max_timestamp)
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def update_from_follower(self, buf: memoryview) -> None:
        """A follower appended the leader's batches (offsets already assigned): record
        them, so that after a failover this replica dedupes retries as the old leader
        did. Nothing to do while the state is not loaded: loading reads the log."""
        if not self.loaded:
            return
        for h in _headers(buf):
            self.update(h, h.base_offset)

    # -- loading
    def ensure_loaded(self, plog: Log) -> None:
        if self.loaded:
            return
        self.producers.clear()
        leo = plog.log_end_offset
        self.delete_snapshots_above(leo)
        start = plog.log_start_offset
        for offset in sorted(self._snapshot_offsets(), reverse=True):
            if start <= offset <= leo and self._read_snapshot(offset):
                start = offset
                break
            self.producers.clear()
        self.map_end_offset = start
        for header in _log_headers(plog, start, leo):
            self.update(header, header.base_offset)
        self.map_end_offset = leo
        self.loaded = True
        if self.producers:
            log.info("%s: producer state for %d producers rebuilt from offset %d",
                     plog.topic_partition, len(self.producers), start)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for `expiration_ms` (producer.id.expiration.ms, by the
        timestamp of their last batch, as Kafka). Returns how many went."""
        doomed = [pid for pid, e in self.producers.items() if e.last_timestamp + expiration_ms < now_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def invalidate(self, log_end_offset: int) -> None:
        """After a truncation: forget the state; snapshots above the new log end go."""
        self.loaded = False
        self.producers.clear()
        self.delete_snapshots_above(log_end_offset)

    # -- snapshots
    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def _snapshot_offsets(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                out.append(int(stem))
        return out

    def delete_snapshots_above(self, offset: int) -> None:
        for o in self._snapshot_offsets():
            if o > offset:
                _unlink(self._snapshot_path(o))

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of `offset` (the log end: every batch below it is in the state)."""
        self.snapshot(offset).write()

    def snapshot(self, offset: int) -> ProducerSnapshot:
        """The state as of `offset`, encoded now; `write()` it on any thread (the flush
        thread after a roll)."""
        if not self.loaded:
            return ProducerSnapshot(self, offset, None)
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in self.producers.values():
            body += _ENTRY.pack(e.producer_id, e.epoch, e.last_timestamp, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        return ProducerSnapshot(self, offset, struct.pack(">hI", 1, crc32c(bytes(body))) + bytes(body))

    def _write_snapshot(self, offset: int, data: bytes, sync: bool = True) -> None:
        path = self._snapshot_path(offset)
        try:
            write_atomically(path, data, sync=sync)
        except OSError as e:
            log.warning("cannot write producer snapshot %s: %s", path, e)
            return
        for old in sorted(self._snapshot_offsets())[:-SNAPSHOTS_TO_KEEP]:
            _unlink(self._snapshot_path(old))

    def _read_snapshot(self, offset: int) -> bool:
        path = self._snapshot_path(offset)
        try:
            with open(path, "rb") as f:
                data = f.read()
            version, crc, count = _SNAP_HEAD.unpack_from(data, 0)
            if version != 1 or crc32c(data[6:]) != crc:
                raise ValueError("bad version or CRC")
            pos = _SNAP_HEAD.size
            for _ in range(count):
                pid, epoch, ts, n = _ENTRY.unpack_from(data, pos)
                pos += _ENTRY.size
                entry = ProducerStateEntry(pid, epoch, ts)
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                    pos += _BATCH.size
                self.producers[pid] = entry
            return True
        except (OSError, ValueError, struct.error) as e:
            log.warning("ignoring producer snapshot %s: %s", path, e)
            _unlink(path)
            return False


def expire_producers(logs: Iterable[Log], now_ms: int, expiration_ms: int) -> int:
    """remove_expired on every log whose producer state is loaded (the broker's periodic task)."""
    return sum(lg.producer_state.remove_expired(now_ms, expiration_ms)
               for lg in logs if lg.producer_state.loaded)


def _headers(buf: memoryview) -> Iterator[BatchHeader]:
    pos = 0
    while pos + HEADER_SIZE <= len(buf):
        h = BatchHeader.parse(buf, pos)
        yield h
        pos += h.size_in_bytes


def _log_headers(plog: Any, start: int, end: int) -> Iterator[BatchHeader]:
    """Headers of the batches holding offsets in [start, end), read with pread (no records)."""
    for seg in plog.segments.from_offset(start):
        loc = seg.translate_offset(start) if seg.base_offset <= start else None
        position = loc.position if loc is not None else 0
        while position + HEADER_SIZE <= seg.size:
            raw = os.pread(seg.fd, HEADER_SIZE, position)
            if len(raw) < HEADER_SIZE:
                return
            h = BatchHeader.parse(raw)
            if h.batch_length + LOG_OVERHEAD < HEADER_SIZE or h.base_offset >= end:
                return
            if h.next_offset > start:
                yield h
            position += h.size_in_bytes


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class ProducerSnapshot:
    """An encoded producer-state snapshot waiting to be written (nothing when not loaded)."""

    __slots__ = ("_manager", "_offset", "_data")

    def __init__(self, manager: ProducerStateManager, offset: int, data: bytes | None) -> None:
        self._manager = manager
        self._offset = offset
        self._data = data

    def write(self, sync: bool = True) -> None:
        if self._data is not None:
            self._manager._write_snapshot(self._offset, self._data, sync)
