"""bench/floor/null_broker.py, the benchmark floor (a broker that takes no time): short real
`kbroker perf produce` runs against it, idempotent and transactional, so that a broken floor
fails here. It is never a stand-in for kbroker in tests: these check the floor itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "floor"))

import brokers  # noqa: E402
import null_broker  # noqa: E402

from tests.batches import make_batch  # noqa: E402

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

RECORDS = 3000


@pytest.fixture
def null(tmp_path: Path) -> Iterator[brokers.RunningBroker]:
    broker = brokers.RunningBroker(brokers.resolve_spec("null"), tmp_path, partitions=3)
    try:
        broker.wait_ready()
        yield broker
    finally:
        broker.stop()  # SIGKILL to its PID's process group, then reaped


def produce(broker: brokers.RunningBroker, out: Path, *mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "kbroker.perf", "produce", "--bootstrap-server", broker.bootstrap,
         "--topic", out.stem, "--partitions", "3", "--num-records", str(RECORDS),
         "--record-size", "1024", "--producers", "2", "--acks", "all", "--quiet",
         "--timeout", "20", "--json", str(out), *mode],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=40)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())["result"]


def test_record_count_walks_every_batch() -> None:
    records = make_batch([b"a", b"b", b"c"]) + make_batch([b"d"] * 5) + make_batch([b"e"])
    assert null_broker.record_count(records) == 9
    assert null_broker.record_count(memoryview(records)[: len(records) - 10]) == 8  # a torn tail
    assert null_broker.record_count(b"") == 0


def test_idempotent_and_transactional_produce(null: brokers.RunningBroker, tmp_path: Path) -> None:
    idempotent = produce(null, tmp_path / "idempotent.json", "-X", "enable.idempotence=true")
    transactional = produce(null, tmp_path / "transactional.json", "--transactional",
                            "--records-per-transaction", "500")
    for result in (idempotent, transactional):
        assert result["records"] == RECORDS and result["errors"] == 0
        assert result["extra"]["partitions"] == 3
        # ListOffsets "latest" is the null broker's count of the records it was sent
        assert result["extra"]["high_watermark_delta"] == RECORDS
    assert transactional["extra"]["transactions"] == RECORDS // 500
    assert null.process.poll() is None  # still serving: it closed no connection on an error
    assert b"closing a connection" not in null.log_path.read_bytes()
