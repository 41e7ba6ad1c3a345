"""Model-based test of the log cleaner: seeded random keyed appends (some compressed, some
tombstones), rolls, clock moves, cleanings, cleanings crashed at each of their steps
(including between the .swap renames), clean restarts and crashes, against an in-memory
reference: every record ever appended, in offset order.

After every step the log must hold:
  * nothing that was not appended, each record at its own offset (offsets are kept);
  * the latest record of every key, at its offset, except a tombstone older than
    delete.retention.ms (which the cleaner may remove);
  * every record from the first dirty offset (the cleaner's checkpoint) on, and
    everything of the active segment: the uncleaned tail is untouched;
  * the same log end offset.

The default run takes 6 seeds of 300 steps (scripts/test-sanitize the first of them:
tests/sanitized.py); the long one (marked slow) 8 seeds of 2000.
"""

from __future__ import annotations

import os
import random
import uuid

import pytest
from batches import Rec, make_batch
from log_bytes import read_all_bytes

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.compression import Codec
from kbroker.records.record_iter import iter_batches
from kbroker.storage.checkpoints import OffsetCheckpointFile
from kbroker.storage.log_cleaner import CleanerConfig
from kbroker.storage.log_cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime
from tests.sanitized import seeds

TP = TopicPartition("model", 0)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430ca")
RETENTION = 50_000
STEPS = ["map", "clean", "cleaned", "swap-log", "swap", "deleted", "renamed-log"]


class Crash(BaseException):
    pass


class Harness:
    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.rng = random.Random(seed)
        self.time = MockTime()
        self.config = LogConfig(cleanup_policy=("compact",), segment_bytes=1500,
                                index_interval_bytes=200, segment_index_bytes=1024,
                                file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.0,
                                delete_retention_ms=RETENTION)
        self.crash_at: str | None = None
        self.keys = self.rng.choice([12, 80])
        self.touched = 0  # no cleaning has reached this offset (the active base at the time)
        self.cleanings = self.crashes = 0
        # offset -> (key, value, append time)
        self.history: dict[int, tuple[bytes, bytes | None, int]] = {}
        self.manager = self._start()

    def _start(self) -> LogManager:
        m = LogManager([self.path], self.config, self.time, recovery_threads=1,
                       topic_configs={TP.topic: self.config},
                       cleaner_config=CleanerConfig(dedupe_buffer_size=self.rng.choice(
                           [24 * 40, 24 * 400, 1 << 20])))  # small maps: cleanings in parts
        m.startup()
        assert m.cleaner is not None
        m.cleaner.crash = self._crash
        m.get_or_create_log(TP, TOPIC_ID)
        return m

    def _crash(self, step: str) -> None:
        if step == self.crash_at:
            raise Crash(step)

    @property
    def log(self):  # type: ignore[no-untyped-def]
        return self.manager.get_or_create_log(TP, TOPIC_ID)

    # -- steps ---------------------------------------------------------------------------
    def append(self) -> None:
        n = self.rng.randint(1, 4)
        keys = [b"k%d" % self.rng.randrange(self.keys) for _ in range(n)]
        recs = [Rec(None if self.rng.random() < 0.1 else os.urandom(self.rng.randint(1, 40)), k)
                for k in keys]
        codec = self.rng.choice([Codec.NONE, Codec.NONE, Codec.LZ4, Codec.GZIP])
        info = self.log.append_as_leader(make_batch(recs, codec=codec))
        for i, r in enumerate(recs):
            assert r.key is not None
            self.history[info.first_offset + i] = (r.key, r.value, self.time.milliseconds())

    def clean(self) -> None:
        assert self.manager.cleaner is not None
        self.touched = max(self.touched, self.log.segments.active.base_offset)
        if self.rng.random() < 0.3:
            self.crash_at = self.rng.choice(STEPS)
            try:
                self.manager.cleaner.clean_once()
            except Crash:
                self.crashes += 1
                self.crash_at = None
                self.manager.abandon()
                self.manager = self._start()
            self.crash_at = None
        elif self.manager.cleaner.clean_once() is not None:
            self.cleanings += 1

    def step(self) -> None:
        r = self.rng.random()
        if r < 0.55:
            self.append()
        elif r < 0.65:
            self.log.roll()
        elif r < 0.85:
            self.clean()
        elif r < 0.92:
            self.time.sleep(self.rng.choice([1000, 20_000, RETENTION]))
        elif r < 0.96:
            self.manager.shutdown()
            self.manager = self._start()
        else:
            self.manager.abandon()
            self.manager = self._start()

    # -- the check -----------------------------------------------------------------------
    def check(self) -> None:
        lg = self.log
        got: dict[int, tuple[bytes | None, bytes | None]] = {}
        last = -1
        for seg in lg.segments:
            assert seg.base_offset > last or seg.size == 0, f"{seg} overlaps offset {last}"
            last = max(last, seg.next_offset - 1)
        last = -1
        for batch in iter_batches(read_all_bytes(lg)):
            assert batch.header.base_offset > last, "offsets go back"
            last = batch.header.last_offset
            for r in batch.records():
                got[r.offset] = (r.key, r.value)
        end = max(self.history, default=-1) + 1
        assert lg.log_end_offset == end
        for offset, kv in got.items():
            assert offset in self.history, offset
            assert kv == self.history[offset][:2], offset
        latest: dict[bytes, int] = {}
        for offset in sorted(self.history):
            latest[self.history[offset][0]] = offset
        now = self.time.milliseconds()
        for key, offset in latest.items():
            _, value, appended = self.history[offset]
            if value is None and now - appended >= RETENTION:
                continue
            assert offset in got, (key, offset)
        checkpoint = OffsetCheckpointFile(os.path.join(self.path, CLEANER_OFFSET_CHECKPOINT)).read()
        assert checkpoint.get(TP, 0) <= max(self.touched, 0) or not checkpoint
        for offset in self.history:
            if offset >= self.touched:
                assert offset in got, offset
        names = os.listdir(lg.dir)
        assert not [n for n in names if n.endswith((".cleaned", ".swap"))]


def run(path: str, seed: int, steps: int) -> None:
    h = Harness(path, seed)
    try:
        for _ in range(steps):
            h.step()
            h.check()
        assert h.cleanings > steps // 50 and h.crashes > 0
    finally:
        if h.manager._started:
            h.manager.shutdown()


@pytest.mark.parametrize("seed", seeds(6))
def test_cleaner_model(tmp_path: object, seed: int) -> None:
    run(str(tmp_path), seed, 300)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 108))
def test_cleaner_model_long(tmp_path: object, seed: int) -> None:
    run(str(tmp_path), seed, 2000)
