"""LeaderEpochFileCache: leader epoch -> first offset written in it (OffsetForLeaderEpoch).

Persisted as leader-epoch-checkpoint in the partition directory, Kafka's format:

    0              <- version
    2              <- number of entries
    0 0            <- epoch start_offset
    3 1200

Lock: owned by its Log (event-loop thread). The file may be written from the Log's
flush thread too (take_checkpoint); `_write_lock` orders writers and a version
number makes sure an older content never replaces a newer one. Invariant: epochs
and start offsets strictly increase.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable

from kbroker.utils.atomic_file import write_atomically

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochFileCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.entries: list[tuple[int, int]] = []
        self._dirty = False
        self._version = 0  # of the content last taken; under _write_lock: of the file
        self._written_version = 0
        self._write_lock = threading.Lock()
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            count = int(lines[1])
            for line in lines[2 : 2 + count]:
                epoch, start = line.split()
                self.assign(int(epoch), int(start))
        except (FileNotFoundError, IndexError, ValueError):
            self.entries = []
        self._dirty = False

    def assign(self, epoch: int, start_offset: int) -> None:
        if epoch < 0:
            return
        if self.entries and epoch <= self.entries[-1][0]:
            return
        # a new epoch starting at or before existing entries replaces them
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._dirty = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def epoch_for_offset(self, offset: int) -> int:
        epoch = -1
        for e, start in self.entries:
            if start <= offset:
                epoch = e
            else:
                break
        return epoch

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, as Kafka's LeaderEpochFileCache.endOffsetFor:
        the latest epoch -> (it, the log end offset); an epoch between two known ones ->
        (the largest known <= it, the start of the next); one below every known epoch ->
        (itself, the start of the first); one above the latest, or none known -> (-1, -1)
        (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)."""
        if epoch < 0 or not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        floor: tuple[int, int] | None = None
        for e, start in self.entries:
            if e > epoch:
                return (floor[0] if floor is not None else epoch), start
            floor = (e, start)
        return -1, -1

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after end_offset (log truncated to end_offset)."""
        n = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        self._dirty |= n != len(self.entries)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log starts at start_offset: the epoch covering it now starts there."""
        keep = [(e, s) for e, s in self.entries if s > start_offset]
        covering = [(e, s) for e, s in self.entries if s <= start_offset]
        if covering:
            keep.insert(0, (covering[-1][0], start_offset))
        if keep != self.entries:
            self.entries = keep
            self._dirty = True

    def clear(self) -> None:
        self._dirty |= bool(self.entries)
        self.entries = []

    def flush(self, force: bool = False) -> None:
        checkpoint = self.take_checkpoint(force)
        if checkpoint is not None:
            checkpoint()

    def take_checkpoint(self, force: bool = False) -> Callable[..., None] | None:
        """The checkpoint file's content as of now, to write on any thread (the flush
        thread); None when nothing changed since the last one."""
        if not (self._dirty or force):
            return None
        lines = ["0", str(len(self.entries))] + [f"{e} {s}" for e, s in self.entries]
        self._dirty = False
        self._version += 1
        return functools.partial(self._write, self._version, "\n".join(lines) + "\n")

    def _write(self, version: int, text: str, sync: bool = True) -> None:
        with self._write_lock:
            if version > self._written_version:
                write_atomically(self.path, text, sync=sync)
                self._written_version = version
