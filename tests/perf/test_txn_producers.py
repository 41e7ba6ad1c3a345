"""bench/txn_producers.py, bench_transactions.py's pure-Python producers (kafka-python and
aiokafka): short runs against a real kbroker, each mode, and every record they report read
back by a read_committed consumer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import brokers  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
pytest.importorskip("kafka", reason="kafka-python is not installed")
pytest.importorskip("aiokafka", reason="aiokafka is not installed")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECORDS = 2000
PER_TRANSACTION = 500
PARTITIONS = 3


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[brokers.RunningBroker]:
    broker = brokers.RunningBroker(brokers.resolve_spec("kbroker"), tmp_path_factory.mktemp("kbroker"),
                                   partitions=PARTITIONS)
    try:
        broker.wait_ready()
        yield broker
    finally:
        broker.stop()  # SIGKILL to its PID's process group, then reaped


def run_producers(broker: brokers.RunningBroker, client: str, mode: str, topic: str, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "txn_producers.py"), "--client", client, "--mode", mode,
         "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partitions", str(PARTITIONS),
         "--records", str(RECORDS), "--record-size", "100", "--records-per-transaction",
         str(PER_TRANSACTION), "--producers", "2", "--timeout", "60", "--json", str(out)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True})
    values: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                eof.add(msg.partition())
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    assert len(eof) == PARTITIONS, "did not reach the end of every partition"
    return values


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("mode", ["idempotent", "transactional"])
def test_producers_write_what_they_report(kbroker: brokers.RunningBroker, tmp_path: Path, client: str,
                                          mode: str) -> None:
    topic = f"txn-producers-{client}-{mode}"
    result = run_producers(kbroker, client, mode, topic, tmp_path / "out.json")
    assert result["records"] == RECORDS and result["records_per_s"] > 0
    if mode == "transactional":
        assert result["end_txn_latency"]["transactions"] == RECORDS // PER_TRANSACTION
    else:
        assert "end_txn_latency" not in result
    values = committed_values(kbroker.bootstrap, topic)
    warm_ups = 2 if mode == "idempotent" else 0  # one per idempotent producer process
    assert len(values) == RECORDS + warm_ups
    assert values.count(b"warm-up") == warm_ups
