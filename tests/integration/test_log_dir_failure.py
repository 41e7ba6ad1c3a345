"""A failing log dir goes offline; the broker serves its other dirs and loses nothing.

Each test mounts a small tmpfs as one of the broker's two log dirs (root only): it
fills up (ENOSPC) or is remounted read-only (EROFS) under the running broker. The
producer to the partition in that dir gets errors, the broker logs the failure once
and stays up, the partition in the other dir is served as before, Metadata reports
the failed partition without a leader, and after the disk is fixed (remounted larger
or writable) a restart recovers every acknowledged record.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

VALUE = 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True, timeout=30)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=30)


def remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True, timeout=30)


def two_dir_broker(broker_factory: Any, small: Path, ok: Path) -> Any:
    broker = broker_factory({"log.dirs": f"{small},{ok}", "num.partitions": "1",
                             "log.segment.bytes": str(256 * 1024)}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for topic in ("onsmall", "onok"):  # placement: the dir with the fewest partitions, in order
        for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            f.result(30)
    assert (small / "onsmall-0").is_dir() and (ok / "onok-0").is_dir()
    return broker


def produce(bootstrap: str, topic: str, count: int) -> tuple[list[int], list[KafkaError]]:
    """Produce `count` records one by one; the acknowledged offsets and the errors."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1,
                         "message.timeout.ms": 4000, "enable.idempotence": False})
    acked: list[int] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked.append(msg.offset())
        else:
            errors.append(err)

    for i in range(count):
        producer.produce(topic, value=i.to_bytes(4, "big") * (VALUE // 4), on_delivery=report)
        if i % 50 == 49:
            producer.flush(10)
            if errors:
                break  # the dir failed: what is queued would only time out
    producer.flush(20)
    return acked, errors


def consume_all(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    offsets: list[int] = []
    try:
        while len(offsets) < expected:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(offsets)} of {expected} records came back"
            assert msg.error() is None, msg.error()
            offsets.append(msg.offset())
    finally:
        consumer.close()
    return offsets


def check_degraded(broker: Any, failed_topic: str) -> None:
    assert broker.proc.poll() is None, "the broker died"
    assert broker.output().count("the dir is now offline") == 1
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    part = md.topics[failed_topic].partitions[0]
    assert part.leader == -1 and part.error is not None
    assert part.error.code() == KafkaError.LEADER_NOT_AVAILABLE
    acked, errors = produce(broker.bootstrap_servers, "onok", 20)  # the other dir serves on
    assert len(acked) == 20 and not errors
    assert consume_all(broker.bootstrap_servers, "onok", 20) == list(range(20))


def test_a_full_log_dir_goes_offline(small_fs: Path, broker_factory: Any, tmp_path: Path) -> None:
    broker = two_dir_broker(broker_factory, small_fs, tmp_path / "ok")
    acked, errors = produce(broker.bootstrap_servers, "onsmall", 1500)  # 1.5 MB into 1 MB
    assert acked and errors, (len(acked), errors[:3])
    check_degraded(broker, "onsmall")
    assert broker.stop() == 0
    assert not (small_fs / ".kafka_cleanshutdown").exists()  # it owes a recovery
    remount(small_fs, "size=64m")  # the disk is fixed
    broker.start()
    assert consume_all(broker.bootstrap_servers, "onsmall", len(acked)) == sorted(acked)
    assert sorted(acked) == list(range(len(acked)))  # nothing acknowledged was lost


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Any]:
    """make(path): bind-mount `path` read-only over itself (new files there fail with EROFS,
    as on a disk remounted read-only; descriptors already open still write)."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    mounted: list[Path] = []

    def make(path: Path) -> None:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True, timeout=30)
        mounted.append(path)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True, timeout=30)

    def undo() -> None:
        while mounted:
            subprocess.run(["umount", "-l", str(mounted.pop())], check=False, timeout=30)

    make.undo = undo  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        undo()


def test_a_read_only_log_dir_goes_offline(read_only: Any, broker_factory: Any, tmp_path: Path) -> None:
    small, ok = tmp_path / "small", tmp_path / "ok"
    broker = two_dir_broker(broker_factory, small, ok)
    acked, errors = produce(broker.bootstrap_servers, "onsmall", 100)
    assert len(acked) == 100 and not errors
    read_only(small / "onsmall-0")  # the next segment roll cannot create its file
    more, errors = produce(broker.bootstrap_servers, "onsmall", 600)  # 600 KB: rolls at 256 KB
    assert errors
    check_degraded(broker, "onsmall")
    assert broker.stop() == 0
    read_only.undo()
    broker.start()
    total = 100 + len(more)
    assert consume_all(broker.bootstrap_servers, "onsmall", total) == list(range(total))


def test_the_broker_stops_when_its_only_log_dir_fails(small_fs: Path, broker_factory: Any) -> None:
    broker = broker_factory({"log.dirs": str(small_fs), "num.partitions": "1"}).start()
    acked, errors = produce(broker.bootstrap_servers, "only", 1500)  # 1.5 MB into 1 MB
    assert acked and errors
    assert broker.wait(30) == 1
    assert "every log dir has failed" in broker.output()
