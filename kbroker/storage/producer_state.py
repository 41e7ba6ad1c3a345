"""ProducerStateManager: one partition's idempotent and transactional producers (Kafka's
name): their entries (producer_append.py), the transactions in progress, and snapshots.

Idempotence. Before an append, `prepare()` checks each batch carrying a producer id
(ProducerAppend has the rules). For a producer's data batches from a client:

  * the same epoch and the same sequences as one of the last 5 batches: a retry of a
    batch already written. Nothing is appended and the ORIGINAL offsets are returned
    with no error, as Kafka does.
  * a lower epoch: INVALID_PRODUCER_EPOCH.
  * a higher epoch (a bump, KIP-360): the first sequence must be 0, else
    OUT_OF_ORDER_SEQUENCE_NUMBER.
  * the same epoch: the first sequence must follow the last one (wrapping at
    2^31-1), else OUT_OF_ORDER_SEQUENCE_NUMBER; a batch wholly at or before the last
    sequence but older than the cached 5 is DUPLICATE_SEQUENCE_NUMBER.
  * an unknown producer id whose first sequence is not 0: UNKNOWN_PRODUCER_ID.

Transactions. A producer's first transactional batch starts its transaction on this
partition; its COMMIT or ABORT marker ends it. The first offset of every transaction in
progress is kept in `ongoing_txns` (in offset order); a completed one stays in
`unreplicated_txns` until the high watermark passes its marker. The first unstable
offset is the lowest first offset of both; the last stable offset (LSO) is that offset
when it is below the high watermark, else the high watermark (Log.last_stable_offset).
An aborted transaction goes to the transaction index of the segment holding its marker
(the Log writes it, with the LSO at that moment: `last_stable_offset_after`).

Loading. The state is rebuilt lazily, when first needed (a producer batch to append,
the LSO asked): the newest snapshot at or below the log end, then the producer batches
of the log from the snapshot's offset on (read_producer_batches: headers only, in C).
The scan is skipped when the state is `trusted`: after a clean shutdown, when the newest
snapshot is at the log end, or for a log that is empty. A log whose state is never
loaded in a run took no producer batch in that run (every such append loads it first),
so at a clean close its newest snapshot still holds: `close_snapshot()` moves it to the
log end (a rename) or writes an empty one, and the next start trusts it again, as Kafka
finds a snapshot at the log end after every clean shutdown. Snapshots are also written
when a segment rolls; the two newest are kept (producer_snapshot.py has the format).

Lock: the broker's event-loop thread only (through its Log); LogLoader uses it on a
recovery thread before the Log is published.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.records.batch_header import ProducerBatch, read_producer_batches_of
from kbroker.storage import producer_snapshot
from kbroker.storage.producer_append import (
    AppendOrigin,
    CompletedTxn,
    Duplicate,
    ProducerAppend,
    ProducerStateEntry,
    ProducerStateError,
    TxnMetadata,
)

if TYPE_CHECKING:
    from kbroker.storage.log import Log
    from kbroker.storage.log_segments import LogSegments

__all__ = ["ProducerStateManager", "ProducerStateError", "Duplicate", "AppendOrigin",
           "CompletedTxn", "expire_producers"]

log = logging.getLogger(__name__)

SNAPSHOTS_TO_KEEP = 2


class ProducerStateManager:
    def __init__(self, directory: str, snapshot_offsets: list[int] | None = None,
                 trusted: bool = False) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> txn, in offset order
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        self.loaded = False
        self.trusted = trusted  # the newest snapshot is the state at the log end
        self.map_end_offset = 0  # the state covers offsets below this
        self._snapshots = snapshot_offsets  # ascending; None until listed
        self._snapshots_lock = threading.Lock()  # the flush thread writes snapshots after a roll

    # -- transactions
    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet both decided and replicated."""
        first = next(iter(self.ongoing_txns), None)
        if self.unreplicated_txns:
            unreplicated = min(self.unreplicated_txns)
            if first is None or unreplicated < first:
                return unreplicated
        return first

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is done (for its transaction index entry): the first
        offset of the oldest transaction in progress of another producer, else the
        offset after the marker."""
        for txn in self.ongoing_txns.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            txn = TxnMetadata(completed.producer_id, completed.first_offset)
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the high watermark are stable now."""
        if self.unreplicated_txns:
            for first in [f for f, t in self.unreplicated_txns.items() if t.last_offset < high_watermark]:
                del self.unreplicated_txns[first]

    # -- append path
    def prepare(self, batches: list[ProducerBatch], first_offset: int | None, origin: AppendOrigin,
                plog: Log) -> ProducerAppend | Duplicate:
        """Check the producer batches of an append before it is written. `first_offset` is
        the offset the append will start at (None: the batches carry their offsets, a
        follower's). A Duplicate when a client's single batch is a retry."""
        self.ensure_loaded(plog)
        append = ProducerAppend(self.producers, origin)
        offset = first_offset
        for i, batch in enumerate(batches):
            start = batch.base_offset if offset is None else offset
            dup = append.append(batch, start)
            if dup is not None:
                if len(batches) == 1:
                    return dup
                raise ProducerStateError(
                    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, f"duplicate batch {i} of producer {batch.producer_id} in a multi-batch append")
            if offset is not None:
                offset += batch.last_offset_delta + 1
        return append

    def update(self, append: ProducerAppend, next_offset: int) -> list[CompletedTxn]:
        """Apply a written append; returns the transactions its markers completed (the Log
        indexes the aborted ones, then calls complete_txn)."""
        for pid, entry in append.updated.items():
            self.producers[pid] = entry
        for txn in append.started:
            self.ongoing_txns[txn.first_offset] = txn
        self.map_end_offset = max(self.map_end_offset, next_offset)
        return append.completed

    def replay(self, batches: Iterable[ProducerBatch],
               on_completed: Callable[[CompletedTxn, int], None] | None = None) -> None:
        """Follow batches already in the log (loading, recovery), completing the
        transactions their markers end; `on_completed(txn, last stable offset)` first."""
        for batch in batches:
            append = ProducerAppend(self.producers, AppendOrigin.REPLICATION)
            append.append(batch, batch.base_offset)
            for completed in self.update(append, batch.last_offset + 1):
                if on_completed is not None:
                    on_completed(completed, self.last_stable_offset_after(completed))
                self.complete_txn(completed)

    # -- loading
    def ensure_loaded(self, plog: Log) -> None:
        if not self.loaded:
            self.load(plog.segments, plog.log_start_offset, plog.log_end_offset)
            self.on_high_watermark_updated(plog.high_watermark)

    def load(self, segments: LogSegments, log_start_offset: int, end_offset: int) -> None:
        """The state of the log below `end_offset`: the newest snapshot at or below it, then
        the log's producer batches from there (none when the state is trusted)."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.delete_snapshots_above(end_offset)
        start = log_start_offset
        for offset in reversed(self.snapshot_offsets()):  # a copy
            if log_start_offset <= offset <= end_offset:
                entries = producer_snapshot.read(producer_snapshot.snapshot_path(self.dir, offset))
                if entries is not None:
                    self._load_entries(entries)
                    start = offset
                    break
            self._forget_snapshot(offset)
        self.map_end_offset = start
        if not self.trusted or start != end_offset:
            self.replay(log_producer_batches(segments, start, end_offset))
        self.map_end_offset = end_offset
        self.loaded = True
        if self.producers and not self.trusted:
            log.info("%s: producer state for %d producers rebuilt from offset %d",
                     os.path.basename(self.dir), len(self.producers), start)

    def _load_entries(self, entries: list[ProducerStateEntry]) -> None:
        for entry in sorted(entries, key=lambda e: e.current_txn_first_offset):
            self.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset >= 0:
                self.ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                    entry.producer_id, entry.current_txn_first_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for `expiration_ms` (producer.id.expiration.ms, by the
        timestamp of their last batch, as Kafka), except those with a transaction in
        progress. Returns how many went."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.current_txn_first_offset < 0 and e.last_timestamp + expiration_ms < now_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def invalidate(self, log_end_offset: int) -> None:
        """After a truncation: forget the state; snapshots above the new log end go, and the
        next load reads the log from the newest snapshot left."""
        self.loaded = False
        self.trusted = False
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.delete_snapshots_above(log_end_offset)

    # -- snapshots
    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshots on disk, ascending (a copy)."""
        with self._snapshots_lock:
            if self._snapshots is None:
                try:
                    self._snapshots = producer_snapshot.snapshot_offsets(os.listdir(self.dir))
                except FileNotFoundError:
                    self._snapshots = []
            return list(self._snapshots)

    def _snapshot_moved(self, old: int | None, new: int | None) -> None:
        with self._snapshots_lock:
            offsets = self._snapshots if self._snapshots is not None else []
            if old is not None and old in offsets:
                offsets.remove(old)
            if new is not None and new not in offsets:
                offsets.append(new)
                offsets.sort()
            self._snapshots = offsets

    def _forget_snapshot(self, offset: int) -> None:
        producer_snapshot.unlink(producer_snapshot.snapshot_path(self.dir, offset))
        self._snapshot_moved(offset, None)

    def delete_snapshots_above(self, offset: int) -> None:
        for o in [o for o in self.snapshot_offsets() if o > offset]:
            self._forget_snapshot(o)

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of `offset` (the log end: every batch below it is in the state)."""
        self.snapshot(offset).write()

    def snapshot(self, offset: int) -> ProducerSnapshot:
        """The state as of `offset`, encoded now; `write()` it on any thread (the flush
        thread after a roll). Nothing when the state is not loaded."""
        if not self.loaded:
            return ProducerSnapshot(self, offset, None)
        return ProducerSnapshot(self, offset, producer_snapshot.encode(self.producers.values()))

    def close_snapshot(self, log_start_offset: int, log_end_offset: int) -> ProducerSnapshot:
        """The snapshot a clean close leaves at the log end (see the module docstring)."""
        if self.loaded:
            return self.snapshot(log_end_offset)
        offsets = self.snapshot_offsets()
        if not self.trusted or (offsets and offsets[-1] == log_end_offset):
            return ProducerSnapshot(self, log_end_offset, None)
        if offsets:
            newest = offsets[-1]
            try:
                os.rename(producer_snapshot.snapshot_path(self.dir, newest),
                          producer_snapshot.snapshot_path(self.dir, log_end_offset))
            except OSError as e:
                log.warning("cannot move producer snapshot %d of %s to %d: %s", newest, self.dir,
                            log_end_offset, e)
                return ProducerSnapshot(self, log_end_offset, None)
            self._snapshot_moved(newest, log_end_offset)
            return ProducerSnapshot(self, log_end_offset, None)
        if log_end_offset == log_start_offset:
            return ProducerSnapshot(self, log_end_offset, None)  # empty: trusted without one
        return ProducerSnapshot(self, log_end_offset, producer_snapshot.encode(()))

    def _write_snapshot(self, offset: int, data: bytes, sync: bool = True) -> None:
        if not producer_snapshot.write(producer_snapshot.snapshot_path(self.dir, offset), data, sync):
            return
        self._snapshot_moved(None, offset)
        for old in self.snapshot_offsets()[:-SNAPSHOTS_TO_KEEP]:
            self._forget_snapshot(old)


def expire_producers(logs: Iterable[Log], now_ms: int, expiration_ms: int) -> int:
    """remove_expired on every log whose producer state is loaded (the broker's periodic task)."""
    return sum(lg.producer_state.remove_expired(now_ms, expiration_ms)
               for lg in logs if lg.producer_state.loaded)


def log_producer_batches(segments: LogSegments, start: int, end: int) -> Iterable[ProducerBatch]:
    """The producer batches of the log holding offsets in [start, end), in log order."""
    for seg in segments.from_offset(start):
        if seg.base_offset >= end:
            return
        loc = seg.translate_offset(start) if seg.base_offset <= start else None
        position = loc.position if loc is not None else 0
        yield from read_producer_batches_of(seg.fd, position, seg.size, start, end)


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
