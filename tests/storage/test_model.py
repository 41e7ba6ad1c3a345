"""Model-based test: random append / read / roll / truncate / delete_records / flush /
restart / crash (torn tail, flipped byte) steps against an in-memory reference log.

Every read is checked against the reference: the slice starts with the batch holding
the fetch offset, holds at least one whole batch, and every record in it has the
reference's offset, value and timestamp. A crash abandons the LogManager (no flush, no
checkpoint, no clean marker), then damages a segment after the checkpointed recovery
point; the reference drops everything from the first damaged batch on.

The default run takes 8 seeds of 600 steps (test_model; scripts/test-sanitize the first
two: tests/sanitized.py); the long run, 10 seeds of
4000 steps (test_model_long, marked `slow`), runs with
`scripts/test -m slow tests/storage/test_model.py`.
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field

import pytest
from batches import Rec, make_batch
from log_bytes import read_all_bytes

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.record_iter import iter_batches
from kbroker.storage.checkpoints import OffsetCheckpointFile
from kbroker.storage.errors import (
    InvalidRecordsError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime
from tests.sanitized import seeds

TP = TopicPartition("model", 3)
TS = 1_700_000_000_000


@dataclass
class RefBatch:
    base: int
    records: list[tuple[bytes, int]]  # (value, timestamp)

    @property
    def last(self) -> int:
        return self.base + len(self.records) - 1


@dataclass
class Reference:
    batches: list[RefBatch] = field(default_factory=list)
    log_start: int = 0
    epoch: int = 0

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.log_start

    def record(self, offset: int) -> tuple[bytes, int]:
        for b in self.batches:
            if b.base <= offset <= b.last:
                return b.records[offset - b.base]
        raise KeyError(offset)

    def batch_holding(self, offset: int) -> RefBatch | None:
        for b in self.batches:
            if b.last >= offset:
                return b
        return None

    def cut(self, offset: int) -> None:
        """Drop the batch holding `offset` and every later one (the log end never goes
        below the log start)."""
        self.batches = [b for b in self.batches if b.last < offset]


class Model:
    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.rng = random.Random(seed)
        self.time = MockTime()
        self.config = LogConfig(segment_bytes=self.rng.choice([1500, 3000, 8000]),
                                index_interval_bytes=self.rng.choice([0, 100, 400]),
                                segment_index_bytes=self.rng.choice([96, 400, 4096]),
                                file_delete_delay_ms=0)
        self.ref = Reference()
        self.manager = self._start()
        self.next_value = 0

    def _start(self) -> LogManager:
        m = LogManager([self.path], self.config, self.time, recovery_threads=1)
        m.startup()
        return m

    @property
    def log(self) -> Log:
        return self.manager.get_or_create_log(TP, uuid.UUID(int=7))

    # -- steps --------------------------------------------------------------------------
    def append(self) -> None:
        rng = self.rng
        batches = []
        refs = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            n = rng.randint(1, 6)
            base_ts = TS + rng.randint(0, 100_000)
            recs = []
            for _ in range(n):
                self.next_value += 1
                recs.append(Rec(b"v%d-" % self.next_value + b"x" * rng.randint(0, 120),
                                timestamp_delta=rng.randint(-50, 500)))
            batches.append(make_batch(recs, base_timestamp=base_ts, codec=rng.choice([0, 0, 0, 1, 3, 4])))
            refs.append([(r.value or b"", base_ts + r.timestamp_delta) for r in recs])
        payload = b"".join(batches)
        if rng.random() < 0.05:
            bad = bytearray(payload)
            bad[rng.randrange(21, len(batches[0]))] ^= 0x10  # CRC-covered bytes
            with pytest.raises(InvalidRecordsError):
                self.log.append_as_leader(bytes(bad), leader_epoch=self.ref.epoch)
            return
        if len(payload) > self.config.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.log.append_as_leader(payload, leader_epoch=self.ref.epoch)
            return
        if rng.random() < 0.05:
            self.ref.epoch += 1
        info = self.log.append_as_leader(payload, leader_epoch=self.ref.epoch)
        assert info.first_offset == self.ref.end
        offset = info.first_offset
        for recs in refs:
            self.ref.batches.append(RefBatch(offset, recs))
            offset += len(recs)
        assert info.last_offset == offset - 1 == self.log.log_end_offset - 1

    def read(self) -> None:
        rng, ref, log = self.rng, self.ref, self.log
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (ref.log_start, ref.end, ref.end)
        if rng.random() < 0.1:
            bad = rng.choice([ref.log_start - 1, ref.end + 1]) if ref.log_start > 0 else ref.end + 1
            with pytest.raises(OffsetOutOfRangeError):
                log.read(bad, 100)
            return
        offset = rng.randint(ref.log_start, ref.end)
        max_bytes = rng.choice([1, 100, 1000, 10_000])
        max_offset = rng.choice([None, rng.randint(offset, ref.end)])
        info = log.read(offset, max_bytes, max_offset=max_offset)
        bound = ref.end if max_offset is None else max_offset
        holding = ref.batch_holding(offset)
        if offset >= bound or (holding is not None and holding.last >= bound):
            # as Kafka: the batch holding max_offset (and all after it) is not returned
            assert info.records is None
            return
        assert info.records is not None
        data = info.records.read_bytes()
        got = list(iter_batches(data))
        assert got, "at least one whole batch"
        first = got[0].header
        assert first.base_offset <= offset <= first.last_offset
        if len(got) > 1:
            assert info.records.size <= max_bytes
        expected = ref.batch_holding(offset)
        assert expected is not None and expected.base == first.base_offset
        for batch in got:
            assert batch.header.last_offset < bound
            for rec in batch.records():
                assert (rec.value, rec.timestamp) == ref.record(rec.offset), rec.offset

    def list_offsets(self) -> None:
        ref, log = self.ref, self.log
        target = TS + self.rng.randint(-100, 101_000)
        want = None
        for b in ref.batches:
            for i, (_v, ts) in enumerate(b.records):
                if b.base + i >= ref.log_start and ts >= target:
                    want = (b.base + i, ts)
                    break
            if want:
                break
        got = log.fetch_offset_by_timestamp(target)
        assert (got[:2] if got else None) == want, target
        assert log.fetch_offset_by_timestamp(-2)[0] == ref.log_start  # type: ignore[index]
        assert log.fetch_offset_by_timestamp(-1)[0] == ref.end  # type: ignore[index]
        top = log.fetch_offset_by_timestamp(-3)
        if top is not None:
            assert ref.record(top[0])[1] == top[1]

    def roll(self) -> None:
        self.log.roll()

    def flush(self) -> None:
        self.log.flush()

    def truncate(self) -> None:
        offset = self.rng.randint(self.ref.log_start, self.ref.end)
        self.log.truncate_to(offset)
        self.ref.cut(offset)
        assert self.log.log_end_offset == self.ref.end

    def delete_records(self) -> None:
        offset = self.rng.randint(self.ref.log_start, self.ref.end)
        assert self.log.delete_records(offset) == offset
        self.ref.log_start = offset
        self.ref.batches = [b for b in self.ref.batches if b.last >= offset]

    def restart(self) -> None:
        self.manager.shutdown()
        self.manager = self._start()
        assert self.manager.last_load_recovered == []

    def crash(self) -> None:
        self.manager.abandon()
        self.damage()
        self.manager = self._start()
        assert self.log.log_end_offset == self.ref.end

    def damage(self) -> None:
        rng = self.rng
        rp = OffsetCheckpointFile(os.path.join(self.path, "recovery-point-offset-checkpoint")).read().get(TP, 0)
        d = os.path.join(self.path, TP.dir_name)
        candidates = []  # (path, batch position, size, base offset)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".log"):
                continue
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                data = f.read()
            for b in iter_batches(data):
                if b.header.base_offset >= rp:
                    candidates.append((path, b.position, b.header.size_in_bytes, b.header.base_offset))
        if not candidates or rng.random() < 0.2:
            return
        path, pos, size, base = rng.choice(candidates)
        if rng.random() < 0.5:
            # torn inside the batch: a cut exactly at a batch boundary of a non-last
            # segment would leave a valid, shorter segment (Kafka keeps it and the later
            # segments too, since compaction legitimately leaves offset gaps)
            os.truncate(path, pos + rng.randrange(1, size))
        else:
            with open(path, "r+b") as f:
                at = pos + rng.randrange(17, size)
                f.seek(at)
                byte = f.read(1)[0]
                f.seek(at)
                f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        self.ref.cut(base)

    def step(self) -> None:
        ops = [(self.append, 30), (self.read, 30), (self.list_offsets, 6), (self.roll, 4),
               (self.flush, 4), (self.truncate, 4), (self.delete_records, 3),
               (self.restart, 2), (self.crash, 2)]
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        op()

    def check_all(self) -> None:
        data = read_all_bytes(self.log)
        got = [(r.offset, r.value, r.timestamp) for b in iter_batches(data) for r in b.records()]
        want = [(b.base + i, v, ts) for b in self.ref.batches for i, (v, ts) in enumerate(b.records)]
        got = [g for g in got if g[0] >= self.ref.log_start]
        want = [w for w in want if w[0] >= self.ref.log_start]
        assert got == want


def run(path: str, seed: int, steps: int) -> None:
    model = Model(path, seed)
    try:
        for i in range(steps):
            model.step()
            if i % 100 == 99:
                model.check_all()
        model.check_all()
    finally:
        if model.manager._started:
            model.manager.shutdown()


@pytest.mark.parametrize("seed", seeds(8))
def test_model(tmp_path: object, seed: int) -> None:
    run(str(tmp_path), seed, 600)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 110))
def test_model_long(tmp_path: object, seed: int) -> None:
    run(str(tmp_path), seed, 4000)
