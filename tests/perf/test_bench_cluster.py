"""bench/bench_cluster.py: its summaries on made-up runs, and one run of the whole benchmark
with tiny sizes (real ZooKeeper and brokers), so that a broken bench fails here. Figures
are never checked against limits: the machine is shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_cluster  # noqa: E402


def produce_run(cell: str, repeat: int, rate: float, cpu_per_gb: float, p99: float = 1.0) -> dict[str, Any]:
    return {"cell": cell, "repeat": repeat, "records_per_s": rate, "mb_per_s": rate / 1024,
            "cpu_s_per_gb": cpu_per_gb, "cores_busy": 0.5, "client_cores": 1.0, "incomplete": False,
            "latency": {"percentiles_ms": {"p50": p99 / 2, "p95": p99, "p99": p99, "p99_9": p99}}}


def test_throughput_medians_and_ratios() -> None:
    runs = [produce_run("cluster-3/rf3-acks-all", i, r, 9.0) for i, r in enumerate((100, 90, 110))]
    runs += [produce_run("cluster-3/rf1-acks-1", i, r, 3.0) for i, r in enumerate((300, 200, 250))]
    runs += [produce_run("single/rf1-acks-1", 0, 100, 2.0), produce_run("cluster-2/rf1-acks-1", 0, 150, 2.0)]
    runs.append({**produce_run("single/rf1-acks-1", 1, 1, 2.0), "incomplete": True})
    summary = bench_cluster.throughput_summary(runs)
    assert summary["cells"]["cluster-3/rf3-acks-all"]["records_per_s"] == 100
    assert summary["cells"]["single/rf1-acks-1"]["repeats"] == 1
    ratios = summary["ratios"]
    assert ratios["rf3_acks_all / rf1_acks_1 records/s"] == pytest.approx(0.4)
    assert ratios["rf3_acks_all / rf1_acks_1 CPU-s/GB"] == pytest.approx(3.0)
    assert ratios["2 processes / 1 broker records/s"] == pytest.approx(1.5)


def test_failover_targets_per_client() -> None:
    runs = [{"kind": "kill", "client": "librdkafka", "resumed_s": 6.5, "metadata_leader_s": 6.2},
            {"kind": "kill", "client": "librdkafka", "resumed_s": 7.5, "metadata_leader_s": 6.3},
            {"kind": "kill", "client": "librdkafka", "error": "TimeoutError"},
            {"kind": "kill", "client": "kafka-python", "resumed_s": 6.4, "metadata_leader_s": 6.1},
            {"kind": "term", "client": "librdkafka", "metadata_leader_s": 0.2, "stall_s": 0.4,
             "exited_s": 0.3, "errors": 2},
            {"kind": "term", "client": "kafka-python", "metadata_leader_s": 1.2, "stall_s": 0.4}]
    summary = bench_cluster.failover_summary(runs, 6000)
    rdkafka = summary["clients"]["librdkafka"]
    assert rdkafka["kill"]["resumed_s"] == {"median": 7.0, "max": 7.5, "values": [6.5, 7.5]}
    assert (rdkafka["kill"]["probes"], rdkafka["kill"]["failed"]) == (2, 1)
    assert rdkafka["term"]["producer_errors"] == 2
    targets = summary["targets"]
    assert targets["kill: resumed within session timeout + 1 s (librdkafka)"] == {
        "value": 7.5, "limit": 7.0, "met": False}
    assert targets["kill: resumed within session timeout + 1 s (kafka-python)"]["met"]
    assert targets["term: leader moved in under 1 s"] == {"value": 1.2, "limit": 1.0, "met": False}


def test_latency_ratio_per_linger() -> None:
    """Each linger.ms has its own pair of cells and its own ratio; the producer's default
    (5) keeps the plain cell names."""
    cell = bench_cluster.latency_cell
    runs = [produce_run(bench_cluster.LATENCY_SINGLE, 0, 10000, 1.0, p99=4.0),
            produce_run(bench_cluster.LATENCY_RF3, 0, 10000, 1.0, p99=6.0),
            produce_run(cell(bench_cluster.LATENCY_SINGLE, 0.0), 0, 10000, 1.0, p99=2.0),
            produce_run(cell(bench_cluster.LATENCY_RF3, 0.0), 0, 10000, 1.0, p99=9.0)]
    summary = bench_cluster.latency_summary(runs, [5.0, 0.0])
    assert summary["p99_ratio_by_linger_ms"] == {"5": pytest.approx(1.5), "0": pytest.approx(4.5)}
    targets = summary["targets"]
    assert targets["p99 rf3 < 2 x single, linger.ms 5 (the producer's default)"]["met"]
    assert not targets["p99 rf3 < 2 x single, linger.ms 0"]["met"]


@pytest.mark.cluster  # ZooKeeper and brokers, started by the bench
@pytest.mark.timeout(600)
def test_the_whole_bench_runs_with_tiny_sizes(tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_cluster.py"), "--repeats", "1", "--records", "2000",
         "--partitions", "2", "--producers", "1", "--failover-repeats", "1", "--failover-rate", "200",
         "--session-timeout-ms", "2000", "--rate", "1000", "--latency-records", "500",
         "--latency-partitions", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    throughput = doc["throughput"]
    assert {r["cell"] for r in throughput["runs"]} == {
        "cluster-3/rf3-acks-all", "cluster-3/rf1-acks-1", "single/rf1-acks-1", "cluster-2/rf1-acks-1"}
    assert all(r["records"] == 2000 and not r["incomplete"] for r in throughput["runs"])
    failover = doc["failover"]
    assert [(r["kind"], r["client"]) for r in failover["runs"]] == [
        ("kill", "librdkafka"), ("kill", "kafka-python"), ("term", "librdkafka"), ("term", "kafka-python")]
    assert all("error" not in r and r["errors"] == 0 for r in failover["runs"]), failover["runs"]
    assert all(r["resumed_s"] >= 0 and r["metadata_leader_s"] >= 0 for r in failover["runs"])
    latency = doc["latency"]
    assert len(latency["runs"]) == 6 and not any(r["incomplete"] for r in latency["runs"])
    assert all(v is not None for v in latency["summary"]["p99_ratio_by_linger_ms"].values())
    assert "targets" in done.stdout
