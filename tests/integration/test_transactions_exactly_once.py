"""Exactly-once consume-transform-produce with confluent-kafka: a transformer process that
commits its output and its consumed offsets in one transaction is SIGKILLed in the middle
of a transaction; a second one with the same transactional id fences it (its transaction
is aborted, its pending offsets dropped) and resumes from the last committed offsets. A
read_committed reader of the output finds every input record transformed exactly once,
in order."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker import Broker

from .conftest import ROOT
from .txn_support import read_values

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SCRIPT = Path(__file__).with_name("txn_transformer.py")
PARTITIONS = 3
RECORDS = 600


def transformer(bs: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--bootstrap", bs, "--input", "ctp-in", "--output", "ctp-out",
         "--group", "ctp", "--transactional-id", "ctp-transformer", "--batch", "40", *extra],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_exactly_once_across_a_sigkilled_transformer(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in ("ctp-in", "ctp-out")]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    inputs: dict[int, list[bytes]] = {i: [] for i in range(PARTITIONS)}
    for n in range(RECORDS):
        value = str(n).encode()
        p.produce("ctp-in", value, partition=n % PARTITIONS)
        inputs[n % PARTITIONS].append(value)
    assert p.flush(30) == 0

    first = transformer(bs, "--pause-at", "3")
    try:
        assert first.stdout is not None
        lines = [first.stdout.readline().strip() for _ in range(4)]
        assert lines == ["committed 1", "committed 2", "committed 3", "paused"], lines
        first.send_signal(signal.SIGKILL)  # mid-transaction: records written, offsets sent
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    uncommitted = sum(len(read_values(bs, "ctp-out", i, isolation="read_uncommitted")) for i in range(PARTITIONS))
    committed = sum(len(read_values(bs, "ctp-out", i)) for i in range(PARTITIONS))
    assert uncommitted > committed > 0  # the killed transaction's records are in the log

    second = transformer(bs)
    try:
        out, _ = second.communicate(timeout=180)
    finally:
        if second.poll() is None:
            second.kill()
    assert second.returncode == 0, out
    for i in range(PARTITIONS):
        assert read_values(bs, "ctp-out", i) == [b"out-" + v for v in inputs[i]]
    c = Consumer({"bootstrap.servers": bs, "group.id": "ctp"})
    try:
        committed_offsets = c.committed([CkTopicPartition("ctp-in", i) for i in range(PARTITIONS)], 30)
    finally:
        c.close()
    assert [tp.offset for tp in committed_offsets] == [len(inputs[i]) for i in range(PARTITIONS)]
