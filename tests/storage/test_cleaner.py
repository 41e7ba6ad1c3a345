"""The log cleaner at the log level: what a cleaning keeps (the latest record per key,
tombstones until delete.retention.ms, offsets, producer state, transactions, codecs),
which log it picks, and recovery from a crash at every step of a cleaning and its swap.

Cleanings run one at a time on the test's thread (LogCleaner.clean_once), the clock is a
MockTime; crashes are a BaseException raised at a named step, then the LogManager is
abandoned (no flush, no checkpoint, no clean marker) and started again.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from batches import Rec, make_batch
from log_bytes import read_all_bytes

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.compression import Codec
from kbroker.records.control_record import end_txn_marker
from kbroker.records.record_iter import iter_batches
from kbroker.storage.errors import InvalidRecordsError
from kbroker.storage.log import Log
from kbroker.storage.log_cleaner import RETIRE_PER_STEP, CleanerConfig
from kbroker.storage.log_cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.producer_state import AppendOrigin
from kbroker.utils.time import MockTime

TP = TopicPartition("compacted", 0)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c9")
DAY = 86_400_000


class Crash(BaseException):
    """A simulated crash at a step of a cleaning."""


class Env:
    def __init__(self, path: str, config: LogConfig, time: MockTime) -> None:
        self.path = path
        self.config = config
        self.time = time
        self.crash_at: str | None = None
        self.manager = self._start()

    def _start(self) -> LogManager:
        m = LogManager([self.path], self.config, self.time, recovery_threads=1,
                       topic_configs={TP.topic: self.config},
                       cleaner_config=CleanerConfig(dedupe_buffer_size=1 << 20))
        m.startup()
        assert m.cleaner is not None
        m.cleaner.crash = self._crash
        m.cleaner.manager.uncleanable.clear()
        return m

    def _crash(self, step: str) -> None:
        if step == self.crash_at:
            raise Crash(step)

    @property
    def log(self) -> Log:
        return self.manager.get_or_create_log(TP, TOPIC_ID)

    def clean(self) -> object:
        assert self.manager.cleaner is not None
        return self.manager.cleaner.clean_once()

    def crash_and_restart(self) -> Log:
        self.manager.abandon()
        self.manager = self._start()
        return self.log

    def restart(self) -> Log:
        self.manager.shutdown()
        self.manager = self._start()
        return self.log


@pytest.fixture
def time() -> MockTime:
    return MockTime()


@pytest.fixture
def config() -> LogConfig:
    return LogConfig(cleanup_policy=("compact",), segment_bytes=2048, index_interval_bytes=256,
                     segment_index_bytes=1024, file_delete_delay_ms=0,
                     min_cleanable_dirty_ratio=0.01)


@pytest.fixture
def env(tmp_path: object, config: LogConfig, time: MockTime) -> Iterator[Env]:
    e = Env(str(tmp_path), config, time)
    yield e
    if e.manager._started:
        e.manager.shutdown()


def put(lg: Log, key: bytes, value: bytes | None, **kw: object) -> int:
    info = lg.append_as_leader(make_batch([Rec(value, key)], **kw))  # type: ignore[arg-type]
    return info.first_offset


def records(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of the log; its segments and batches hold
    increasing offsets."""
    out = []
    last = -1
    for seg in lg.segments:
        assert seg.base_offset > last or seg.size == 0, f"{seg} overlaps offset {last}"
        last = max(last, seg.next_offset - 1)
    last = -1
    for batch in iter_batches(read_all_bytes(lg)):
        assert batch.header.base_offset > last, "offsets go back"
        last = batch.header.last_offset
        if batch.header.is_control:
            continue
        out += [(r.offset, r.key, r.value) for r in batch.records()]
    return out


def latest(rs: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for _, k, v in rs:
        out[k] = v
    return out


def fill(lg: Log, keys: int, rounds: int) -> dict[bytes, tuple[int, bytes]]:
    """rounds x keys puts; the latest (offset, value) of each key."""
    last = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r)
            last[key] = (put(lg, key, value), value)
    lg.roll()
    return last


def test_cleaning_keeps_the_latest_record_of_each_key_at_its_offset(env: Env) -> None:
    lg = env.log
    last = fill(lg, 10, 20)
    before = lg.size_in_bytes
    leo = lg.log_end_offset
    assert len(lg.segments) > 3
    assert env.clean() is not None
    got = records(env.log)
    assert {k: (o, v) for o, k, v in got} == last
    assert env.log.log_end_offset == leo
    assert env.log.size_in_bytes < before / 5
    # a second cleaning finds nothing new to do
    assert env.clean() is None
    # the checkpoint holds the first dirty offset
    text = open(os.path.join(env.path, CLEANER_OFFSET_CHECKPOINT)).read().split()
    assert text[-3:] == [TP.topic, "0", str(leo)]
    # reads from an offset that was cleaned away start at the next record
    info = env.log.read(0, 1 << 20)
    assert info.records is not None
    lg2 = env.restart()
    assert {k: (o, v) for o, k, v in records(lg2)} == last


def test_the_active_segment_is_never_cleaned(env: Env) -> None:
    lg = env.log
    for r in range(5):
        put(lg, b"k", b"v%d" % r)
    assert len(lg.segments) == 1
    assert env.clean() is None
    assert len(records(lg)) == 5


def test_tombstones_stay_for_delete_retention_ms_after_their_cleaning(env: Env, time: MockTime) -> None:
    lg = env.log
    for r in range(30):
        put(lg, b"a", b"a%d" % r)
        put(lg, b"b", b"b%d" % r)
    put(lg, b"a", None)
    lg.roll()
    env.clean()
    assert latest(records(env.log)) == {b"a": None, b"b": b"b29"}
    time.sleep(DAY - 1000)
    put(env.log, b"c", b"c")
    env.log.roll()
    env.clean()
    assert latest(records(env.log)) == {b"a": None, b"b": b"b29", b"c": b"c"}
    time.sleep(2000)
    put(env.log, b"d", b"d")
    env.log.roll()
    env.clean()
    assert latest(records(env.log)) == {b"b": b"b29", b"c": b"c", b"d": b"d"}


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY])
def test_compressed_batches_are_rebuilt_with_their_codec(env: Env, codec: int) -> None:
    lg = env.log
    for r in range(40):
        lg.append_as_leader(make_batch([Rec(b"v%d" % r, b"k%d" % (i % 3)) for i in range(4)],
                                       codec=codec))
    lg.roll()
    env.clean()
    batches = list(iter_batches(read_all_bytes(env.log)))
    assert {b.header.codec for b in batches if b.header.record_count} == {codec}
    assert latest(records(env.log)) == {b"k0": b"v39", b"k1": b"v39", b"k2": b"v39"}


def test_batches_that_keep_every_record_are_copied_byte_for_byte(env: Env) -> None:
    lg = env.log
    lg.append_as_leader(make_batch([Rec(b"u%d" % i, b"u%d" % i) for i in range(5)], codec=Codec.LZ4))
    for r in range(50):
        put(lg, b"dup", b"%d" % r)
    lg.roll()
    unique = next(iter_batches(read_all_bytes(lg))).data
    result = env.clean()
    assert result is not None
    assert result.stats.runs_copied >= 2  # the unique batch and the last "dup"
    assert read_all_bytes(env.log).startswith(unique)


def test_records_without_a_key_are_refused_on_a_compacted_topic(env: Env) -> None:
    lg = env.log
    with pytest.raises(InvalidRecordsError) as e:
        lg.append_as_leader(make_batch([Rec(b"x", b"k"), Rec(b"no key")]))
    assert e.value.error_code == 87  # INVALID_RECORD
    assert e.value.record_errors and e.value.record_errors[0][0] == 1
    with pytest.raises(InvalidRecordsError):
        lg.append_as_leader(make_batch([Rec(b"no key")], codec=Codec.ZSTD))
    assert lg.log_end_offset == 0


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: object, config: LogConfig,
                                                      time: MockTime) -> None:
    cfg = config.with_overrides({"min.compaction.lag.ms": "60000"})
    env = Env(str(tmp_path), cfg, time)
    try:
        lg = env.log
        fill(lg, 5, 10)
        put(lg, b"k0", b"x")
        assert env.clean() is None
        time.sleep(120_000)
        assert env.clean() is not None
        assert len(records(env.log)) == 6
    finally:
        env.manager.shutdown()


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tmp_path: object, config: LogConfig,
                                                        time: MockTime) -> None:
    cfg = config.with_overrides({"min.cleanable.dirty.ratio": "0.99",
                                 "max.compaction.lag.ms": "60000"})
    env = Env(str(tmp_path), cfg, time)
    try:
        lg = env.log
        base = time.milliseconds()
        for r in range(20):
            put(lg, b"k", b"v%d" % r, base_timestamp=base)
        lg.roll()
        env.clean()  # everything dirty: the ratio is 1
        for r in range(3):
            put(env.log, b"k", b"w%d" % r, base_timestamp=time.milliseconds())
        env.log.roll()
        assert env.clean() is None  # dirty share below 0.99
        time.sleep(61_000)
        assert env.clean() is not None
        assert records(env.log)[-1][2] == b"w2" and len(records(env.log)) == 1
        # the active segment rolls once max.compaction.lag.ms has passed
        put(env.log, b"k", b"z")
        time.sleep(61_000)
        put(env.log, b"k", b"z2")
        assert env.log.segments.active.base_offset == env.log.log_end_offset - 1
    finally:
        env.manager.shutdown()


def test_dirtiest_log_first(env: Env) -> None:
    other = TopicPartition(TP.topic, 1)
    a = env.log
    b = env.manager.get_or_create_log(other, TOPIC_ID)
    fill(a, 30, 1)
    fill(b, 30, 1)
    assert env.clean() is not None and env.clean() is not None and env.clean() is None
    fill(a, 30, 1)  # about half of a is dirty
    fill(b, 30, 4)  # about four fifths of b
    result = env.clean()
    assert result is not None and result.job.topic_partition == other
    result = env.clean()
    assert result is not None and result.job.topic_partition == TP
    assert env.clean() is None


def test_idempotent_producer_state_survives_cleaning(env: Env) -> None:
    lg = env.log
    pid, epoch = 1000, 0
    for seq in range(20):
        lg.append_as_leader(make_batch([Rec(b"v%d" % seq, b"k")], producer_id=pid,
                                       producer_epoch=epoch, base_sequence=seq))
    lg.roll()
    env.clean()
    lg = env.crash_and_restart()
    # the producer's last batch stays: its next sequence is accepted, a retry is a duplicate
    dup = lg.append_as_leader(make_batch([Rec(b"v19", b"k")], producer_id=pid,
                                         producer_epoch=epoch, base_sequence=19))
    assert dup.first_offset == 19
    info = lg.append_as_leader(make_batch([Rec(b"v20", b"k")], producer_id=pid,
                                          producer_epoch=epoch, base_sequence=20))
    assert info.first_offset == 20
    assert [v for _, _, v in records(lg)] == [b"v19", b"v20"]


def _marker(lg: Log, pid: int, commit: bool) -> None:
    lg.append_as_leader(end_txn_marker(pid, 0, commit, 0, lg.time.milliseconds()),
                        origin=AppendOrigin.COORDINATOR)


def _txn_put(lg: Log, pid: int, seq: int, key: bytes, value: bytes) -> None:
    lg.append_as_leader(make_batch([Rec(value, key)], producer_id=pid, producer_epoch=0,
                                   base_sequence=seq, attributes=0x10))


def test_aborted_transactions_are_removed_and_their_markers_later(env: Env, time: MockTime) -> None:
    lg = env.log
    put(lg, b"k", b"committed-before")
    _txn_put(lg, 7, 0, b"k", b"aborted")
    _txn_put(lg, 7, 1, b"j", b"aborted")
    _marker(lg, 7, commit=False)
    _txn_put(lg, 8, 0, b"j", b"committed")
    _marker(lg, 8, commit=True)
    put(lg, b"z", b"z")
    lg.roll()
    env.clean()
    assert latest(records(env.log)) == {b"k": b"committed-before", b"j": b"committed", b"z": b"z"}
    control = [b for b in iter_batches(read_all_bytes(env.log)) if b.header.is_control]
    assert len(control) == 2  # a marker stays while its transaction has data in the log
    # (as Kafka: an active producer's last batch stays too, so its idempotence holds)
    put(env.log, b"j", b"after")
    for _ in range(3):
        time.sleep(DAY + 1)
        env.log.producer_state.remove_expired(time.milliseconds(), DAY)
        put(env.log, b"z", b"z2")
        env.log.roll()
        env.clean()
    control = [b for b in iter_batches(read_all_bytes(env.log))
               if b.header.is_control and b.header.record_count]
    assert not control
    assert not [b for b in iter_batches(read_all_bytes(env.log)) if b.header.is_transactional]
    assert latest(records(env.log)) == {b"k": b"committed-before", b"j": b"after", b"z": b"z2"}


CRASH_STEPS = ["map", "clean", "cleaned", "swap-log", "swap", "deleted", "renamed-log"]


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_a_crash_at_any_step_recovers_the_old_or_the_new_segments(env: Env, step: str) -> None:
    lg = env.log
    unique = {b"u%d" % i: (put(lg, b"u%d" % i, b"only"), b"only") for i in range(10)}
    last = {**unique, **fill(lg, 7, 25)}  # the first group holds the only record of some keys
    all_before = records(lg)
    env.crash_at = step
    with pytest.raises(Crash):
        env.clean()
    env.crash_at = None
    lg = env.crash_and_restart()
    got = records(lg)
    assert {k: (o, v) for o, k, v in got if k in last and (o, v) == last[k]} == last
    assert latest(got) == {k: v for k, (_, v) in last.items()}
    assert set(got) <= set(all_before)
    names = os.listdir(os.path.join(env.path, TP.dir_name))
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    # and the next cleaning completes
    env.clean()
    assert {k: (o, v) for o, k, v in records(env.log)} == last


class _Waits:
    """A stop event that records how long it was asked to wait."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return False


def test_the_io_throttle_makes_the_cleaner_wait() -> None:
    from kbroker.storage.cleaner import Throttler

    waits = _Waits()
    throttle = Throttler(1_000_000)
    throttle.maybe_throttle(10_000, waits)  # type: ignore[arg-type]
    assert waits.waits == [] or waits.waits[0] < 0.02
    throttle.maybe_throttle(3_000_000, waits)  # type: ignore[arg-type]
    assert waits.waits and waits.waits[-1] > 2.0  # 3 MB at 1 MB/s: about 3 s ahead
    unlimited = _Waits()
    Throttler(float("inf")).maybe_throttle(1 << 40, unlimited)  # type: ignore[arg-type]
    assert unlimited.waits == []


def fill_small_segments(env: Env) -> dict[bytes, tuple[int, bytes]]:
    """Unique keys, then 7 keys x 40 versions, rolling every 5 records under a large
    segment.bytes (a group of many small segments); the latest (offset, value) of each key."""
    env.manager.update_topic_config(TP.topic, env.config.with_overrides({"segment.bytes": "65536"}))
    lg = env.log
    last = {b"u%d" % i: (put(lg, b"u%d" % i, b"only"), b"only") for i in range(10)}
    for r in range(40):
        for k in range(7):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r)
            last[key] = (put(lg, key, value), value)
            if (r * 7 + k) % 5 == 4:
                lg.roll()
    lg.roll()
    return last


def _cleaned_but_not_swapped(env: Env) -> tuple[object, Log]:
    """A finished cleaning of the env's log, not yet swapped in (as the loop gets it)."""
    cleaner = env.manager.cleaner
    assert cleaner is not None
    taken = cleaner._take_job()
    assert taken is not None
    job, log_dir, lg = taken
    result = cleaner._clean_or_fail(cleaner._cleaner(), job, log_dir, reraise=True)
    cleaner.manager.done_cleaning(job.topic_partition)
    return result, lg


def test_the_log_stays_readable_between_the_swap_steps(env: Env) -> None:
    last = fill_small_segments(env)
    result, lg = _cleaned_but_not_swapped(env)
    assert result is not None and len(result.groups[0].old) > 2 * RETIRE_PER_STEP
    swapped: list[bool] = []
    steps = 0
    for _ in env.manager.cleaner._swap_steps(result, lg, 0, swapped):  # type: ignore[union-attr]
        steps += 1
        got = records(lg)
        assert {k: (o, v) for o, k, v in got if last.get(k) == (o, v)} == last
        put(lg, b"during", b"%d" % steps)  # appends go on meanwhile
    assert swapped == [True] and steps > 2
    lg = env.restart()
    assert latest(records(lg))[b"during"] == b"%d" % steps


@pytest.mark.parametrize("crash_after_steps", [1, 2, 3])
def test_a_crash_between_the_swap_steps(env: Env, crash_after_steps: int) -> None:
    last = fill_small_segments(env)
    result, lg = _cleaned_but_not_swapped(env)
    steps = env.manager.cleaner._swap_steps(result, lg, 0, [])  # type: ignore[union-attr]
    for _ in range(crash_after_steps):
        next(steps)
    lg = env.crash_and_restart()
    got = records(lg)
    assert {k: (o, v) for o, k, v in got if last.get(k) == (o, v)} == last
    assert latest(got) == {k: v for k, (_, v) in last.items()}
    names = os.listdir(os.path.join(env.path, TP.dir_name))
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]


def test_a_truncation_below_the_checkpoint_brings_it_back(env: Env) -> None:
    lg = env.log
    fill(lg, 5, 30)
    env.clean()
    assert env.manager.cleaner is not None
    manager = env.manager.cleaner.manager
    cleaned_to = manager.checkpoint_of(env.path, TP)
    assert cleaned_to == lg.log_end_offset
    lg.truncate_to(cleaned_to - 20)
    assert manager.checkpoint_of(env.path, TP) == lg.log_end_offset < cleaned_to
    fill(lg, 5, 30)  # written again above the truncation: dirty, so cleaned
    assert env.clean() is not None
    assert len(records(env.log)) == 5


def test_deleting_compacted_logs_forgets_their_checkpoints(env: Env) -> None:
    fill(env.log, 5, 30)
    env.clean()
    env.manager.delete_logs([TP])
    text = open(os.path.join(env.path, CLEANER_OFFSET_CHECKPOINT)).read()
    assert TP.topic not in text


def test_compact_delete_retention_runs_after_each_cleaning(tmp_path: object, config: LogConfig,
                                                          time: MockTime) -> None:
    cfg = config.with_overrides({"cleanup.policy": "compact,delete", "retention.bytes": "3000"})
    env = Env(str(tmp_path), cfg, time)
    try:
        lg = env.log
        for r in range(60):
            put(lg, b"k%d" % r, b"unique value %d" % r)
        lg.roll()
        assert lg.log_start_offset == 0
        env.clean()  # nothing superseded: the cleaning keeps all, then retention cuts
        assert env.log.log_start_offset > 0
        assert env.log.size_in_bytes <= 3000 + cfg.segment_bytes
    finally:
        env.manager.shutdown()
