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


def test_failover_targets() -> None:
    runs = [{"kind": "kill", "resumed_s": 6.5, "metadata_leader_s": 6.2},
            {"kind": "kill", "resumed_s": 7.5, "metadata_leader_s": 6.3},
            {"kind": "kill", "error": "TimeoutError"},
            {"kind": "term", "metadata_leader_s": 0.2, "stall_s": 0.4, "exited_s": 0.3, "errors": 2}]
    summary = bench_cluster.failover_summary(runs, 6000)
    assert summary["kill"]["resumed_s"] == {"median": 7.0, "max": 7.5, "values": [6.5, 7.5]}
    assert (summary["kill"]["probes"], summary["kill"]["failed"]) == (2, 1)
    assert summary["term"]["producer_errors"] == 2
    targets = summary["targets"]
    assert targets["kill: resumed within session timeout + 1 s"] == {"value": 7.5, "limit": 7.0, "met": False}
    assert targets["term: leader moved in under 1 s"]["met"]


def test_latency_ratio() -> None:
    runs = [produce_run(bench_cluster.LATENCY_SINGLE, 0, 10000, 1.0, p99=4.0),
            produce_run(bench_cluster.LATENCY_RF3, 0, 10000, 1.0, p99=6.0)]
    summary = bench_cluster.latency_summary(runs)
    assert summary["p99_ratio"] == pytest.approx(1.5)
    assert summary["targets"]["p99 rf3 < 2 x single"]["met"]


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
    assert [r["kind"] for r in failover["runs"]] == ["kill", "term"]
    assert all("error" not in r and r["errors"] == 0 for r in failover["runs"]), failover["runs"]
    assert all(r["resumed_s"] >= 0 and r["metadata_leader_s"] >= 0 for r in failover["runs"])
    latency = doc["latency"]
    assert len(latency["runs"]) == 3 and not any(r["incomplete"] for r in latency["runs"])
    assert latency["summary"]["p99_ratio"] is not None
    assert "targets" in done.stdout
