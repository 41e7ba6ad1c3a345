"""Log compaction seen by real clients (confluent-kafka / librdkafka) against a `kbroker
serve` subprocess whose cleaner runs every 100 ms: the latest value per key after
cleaning, at its original offset; tombstones gone after delete.retention.ms;
compact,delete; compressed and transactional topics; keyless records refused;
__consumer_offsets kept small under many commits and read back after a restart.

Each wait is bounded; the broker is killed by PID by the fixture.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CLEANER = {"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "200",
           "num.partitions": "1"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "8192",
           "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    return broker_factory(CLEANER).start()


def create(bootstrap: str, config: dict[str, str]) -> str:
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]],
            **conf: object) -> list[int]:
    """Produce (key, value) pairs in order; their offsets."""
    offsets: list[int] = []
    errors: list[object] = []

    def done(err: object, msg: Any) -> None:
        (errors.append(err) if err else offsets.append(msg.offset()))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True,
                  "batch.size": 4000, **conf})
    for key, value in items:
        p.produce(topic, key=key, value=value, on_delivery=done)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors
    return offsets


def read_all(bootstrap: str, topic: str, **conf: object) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the beginning to the end of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True, **conf})
    try:
        c.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return got
                raise KafkaException(m.error())
            got.append((m.offset(), m.key(), m.value()))
        raise TimeoutError(f"no end of {topic} in 30 s")
    finally:
        c.close()


def wait_for(predicate: Any, timeout: float = 40.0, what: str = "", tick: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if tick is not None:
            tick()
        time.sleep(0.2)
    raise TimeoutError(f"waited {timeout} s for {what}")


def versions(keys: int, rounds: int, size: int = 100) -> list[tuple[bytes | None, bytes | None]]:
    return [(b"key-%d" % k, (b"v%d-%d-" % (k, r)).ljust(size, b"x"))
            for r in range(rounds) for k in range(keys)]


def test_many_versions_read_back_as_the_latest_value_per_key(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, COMPACT)
    items = versions(20, 60)
    offsets = produce(bs, topic, items)
    expected = {}
    for (k, v), o in zip(items, offsets, strict=True):
        expected[k] = (o, v)
    # a last record rolls the segment holding the final versions out of the active one
    produce(bs, topic, [(b"filler-%d" % i, b"f" * 100) for i in range(100)])
    wait_for(lambda: len(read_all(bs, topic)) <= 20 + 100 + 20, what="the cleaner")
    got = read_all(bs, topic)
    latest = {k: (o, v) for o, k, v in got if not k.startswith(b"filler")}
    assert latest == expected
    assert "cleaned " in broker.output()  # the cleaner's stats line


def test_tombstones_disappear_after_delete_retention_ms(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, {**COMPACT, "delete.retention.ms": "1000"})
    produce(bs, topic, versions(5, 20) + [(b"key-0", None)] + versions(5, 1)[1:])
    fill = iter(range(10**6))

    def more() -> None:  # new dirty data, so the cleaner comes back
        produce(bs, topic, [(b"filler-%d" % next(fill), b"f" * 200) for _ in range(40)])

    wait_for(lambda: (b"key-0", None) in [(k, v) for _, k, v in read_all(bs, topic)],
             what="the tombstone cleaned and kept", tick=more)
    wait_for(lambda: b"key-0" not in {k for _, k, _ in read_all(bs, topic)},
             what="the tombstone removed", tick=more)
    keys = {k for _, k, _ in read_all(bs, topic)}
    assert {b"key-1", b"key-2", b"key-3", b"key-4"} <= keys


def test_compact_delete_also_applies_retention(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, {**COMPACT, "cleanup.policy": "compact,delete", "retention.bytes": "20000"})
    produce(bs, topic, versions(10, 200))
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        wait_for(lambda: c.get_watermark_offsets(CTopicPartition(topic, 0), timeout=5)[0] > 0,
                 what="retention to move the log start")
    finally:
        c.close()
    got = read_all(bs, topic)
    assert len(got) < 2000
    assert [k for _, k, _ in got if k == b"key-9"]


@pytest.mark.parametrize("codec", ["lz4", "zstd", "gzip", "snappy"])
def test_compressed_topic(broker: Any, codec: str) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, COMPACT)
    items = versions(8, 80)
    produce(bs, topic, items, **{"compression.type": codec, "linger.ms": 20})
    produce(bs, topic, [(b"filler-%d" % i, os.urandom(100)) for i in range(200)],
            **{"compression.type": codec})
    wait_for(lambda: len(read_all(bs, topic)) < 640, what="the cleaner")
    latest = {k: v for _, k, v in read_all(bs, topic) if not k.startswith(b"filler")}
    assert latest == {k: v for k, v in items[-8:]}


def test_transactional_topic(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, COMPACT)
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"t-{uuid.uuid4().hex[:6]}",
                  "linger.ms": 2, "batch.size": 4000})
    p.init_transactions(30)
    for r in range(30):
        p.begin_transaction()
        for k in range(5):
            p.produce(topic, key=b"key-%d" % k, value=b"%s-%d" % (b"abort" if r % 3 == 2 else b"ok", r))
        p.flush(30)  # written before the abort (librdkafka drops what it has not sent)
        if r % 3 == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    for _ in range(4):  # rolls the segment holding the transactions out of the active one
        p.begin_transaction()
        p.produce(topic, key=b"filler", value=b"f" * 3000)
        p.commit_transaction(30)
    committed = {b"key-%d" % k: b"ok-28" for k in range(5)}
    wait_for(lambda: len(read_all(bs, topic, **{"isolation.level": "read_uncommitted"})) <= 12,
             what="the cleaner removing aborted data and old versions")
    got = read_all(bs, topic, **{"isolation.level": "read_committed"})
    assert {k: v for _, k, v in got if k != b"filler"} == committed
    got = read_all(bs, topic, **{"isolation.level": "read_uncommitted"})
    assert not [v for _, _, v in got if v.startswith(b"abort")]


def test_records_without_a_key_are_refused(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create(bs, COMPACT)
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bs, "retries": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD
    assert read_all(bs, topic) == []


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file() and f.name.endswith(".log"))


@pytest.mark.parametrize("commits", [100_000])
def test_consumer_offsets_stay_small_and_reload(broker_factory: Any, commits: int) -> None:
    overrides = {**CLEANER, "offsets.topic.num.partitions": "1",
                 "offsets.topic.segment.bytes": "65536"}
    broker = broker_factory(overrides).start()
    bs = broker.bootstrap_servers
    topic = create(bs, {})
    c = Consumer({"bootstrap.servers": bs, "group.id": "committer", "enable.auto.commit": False})
    pending = [0]

    def done(err: Any, _partitions: Any) -> None:
        assert err is None, err
        pending[0] -= 1

    c2 = Consumer({"bootstrap.servers": bs, "group.id": "committer", "enable.auto.commit": False,
                   "on_commit": done})
    c.close()
    try:
        for i in range(commits):
            c2.commit(offsets=[CTopicPartition(topic, 0, i + 1)], asynchronous=True)
            pending[0] += 1
            while pending[0] > 500:
                c2.poll(0.05)
        wait_for(lambda: (c2.poll(0.05), pending[0] == 0)[1], what="the commits")
    finally:
        c2.close()
    offsets_dir = broker.log_dir / "__consumer_offsets-0"
    uncompacted = commits * 80  # an OffsetCommit record is ~80 bytes in its own batch
    wait_for(lambda: _dir_size(offsets_dir) < uncompacted / 10, what="__consumer_offsets cleaned")
    broker.stop()
    broker.start()
    c3 = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "committer"})
    try:
        got = c3.committed([CTopicPartition(topic, 0)], timeout=30)
        assert got[0].offset == commits
    finally:
        c3.close()
    # the restarted coordinator read a few segments' worth of records, not every commit
    loaded = [int(m) for m in re.findall(r"loaded \d+ groups from (\d+) __consumer_offsets",
                                          broker.output())]
    assert loaded and loaded[-1] < commits / 10


def test_transaction_state_is_compacted(broker_factory: Any) -> None:
    overrides = {**CLEANER, "transaction.state.log.num.partitions": "1",
                 "transaction.state.log.segment.bytes": "16384"}
    broker = broker_factory(overrides).start()
    bs = broker.bootstrap_servers
    topic = create(bs, {})
    p = Producer({"bootstrap.servers": bs, "transactional.id": "compacted-state", "linger.ms": 0})
    p.init_transactions(30)
    for r in range(400):
        p.begin_transaction()
        p.produce(topic, key=b"k", value=b"%d" % r)
        p.commit_transaction(30)
    state_dir = broker.log_dir / "__transaction_state-0"
    written = 400 * 3 * 100  # Ongoing, PrepareCommit, CompleteCommit: ~100 bytes each
    wait_for(lambda: _dir_size(state_dir) < written / 4, what="__transaction_state cleaned")
    broker.stop()
    broker.start()
    p2 = Producer({"bootstrap.servers": broker.bootstrap_servers,
                   "transactional.id": "compacted-state"})
    p2.init_transactions(30)  # the id was loaded back: its epoch is bumped, not a new id
    p2.begin_transaction()
    p2.produce(topic, key=b"k", value=b"after")
    p2.commit_transaction(30)
    got = read_all(broker.bootstrap_servers, topic, **{"isolation.level": "read_committed"})
    assert got[-1][2] == b"after" and len(got) == 401
