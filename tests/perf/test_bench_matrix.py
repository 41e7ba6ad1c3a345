"""Medians, A/B ratios, noise spread and the regression check of bench/matrix.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import matrix  # noqa: E402


def run(side: str, repeat: int, produce_rate: float, consume_rate: float) -> dict[str, Any]:
    latency = {"count": 3, "avg_ms": 2.0, "max_ms": 5.0,
               "percentiles_ms": {"p50": 1.0, "p95": 4.0, "p99": 5.0, "p99_9": 5.0}}
    return {
        "side": side, "cell": "1KiB/acks=1/none/p1", "repeat": repeat,
        "broker_stats": {"ready_s": 0.1, "idle_rss_mb": 20.0, "peak_rss_mb": 100.0},
        "produce": {"records_per_s": produce_rate, "mb_per_s": produce_rate / 1024,
                    "cpu_s_per_gb": 4.0, "latency": latency},
        "consume": {"records_per_s": consume_rate, "mb_per_s": consume_rate / 1024,
                    "cpu_s_per_gb": 2.0, "latency": None},
    }


RUNS = [
    run("A", 0, 100.0, 200.0), run("B", 0, 100.0, 100.0),
    run("A", 1, 90.0, 220.0), run("B", 1, 110.0, 100.0),
    run("A", 2, 120.0, 180.0), run("B", 2, 100.0, 120.0),
]


def row(rows: list[dict[str, Any]], phase: str, metric: str) -> dict[str, Any]:
    return next(r for r in rows if r["phase"] == phase and r["metric"] == metric)


def test_medians_and_ratios() -> None:
    rows = matrix.summarize(RUNS, ["1KiB/acks=1/none/p1"])
    produce = row(rows, "produce", "records_per_s")
    assert (produce["a"], produce["b"], produce["ratio"]) == (100.0, 100.0, 1.0)
    consume = row(rows, "consume", "records_per_s")
    assert (consume["a"], consume["b"], consume["ratio"]) == (200.0, 100.0, 2.0)
    assert row(rows, "produce", "p99")["a"] == 5.0
    assert row(rows, "broker_stats", "peak_rss_mb")["ratio"] == 1.0
    assert row(rows, "broker_stats", "idle_rss_mb")["a"] == 20.0
    assert not [r for r in rows if r["phase"] == "consume" and r["metric"] == "p99"]


def test_failed_and_incomplete_runs_are_left_out() -> None:
    runs = [*RUNS, {"side": "A", "cell": "1KiB/acks=1/none/p1", "repeat": 3, "error": "boom"}]
    runs.append(run("A", 4, 1.0, 1.0))
    runs[-1]["produce"]["incomplete"] = True
    rows = matrix.summarize(runs, ["1KiB/acks=1/none/p1"])
    assert row(rows, "produce", "records_per_s")["a_values"] == [100.0, 90.0, 120.0]


def test_noise_spread() -> None:
    spread = matrix.noise(matrix.summarize(RUNS, ["1KiB/acks=1/none/p1"]))
    assert spread["cell_ratio_min"] == 1.0 and spread["cell_ratio_max"] == 2.0
    assert spread["run_ratio_min"] == pytest.approx(90 / 110)
    assert spread["run_ratio_max"] == 2.2


def test_regressions_below_threshold() -> None:
    runs = [run("A", 0, 80.0, 100.0), run("B", 0, 100.0, 100.0)]
    rows = matrix.summarize(runs, ["1KiB/acks=1/none/p1"])
    assert [r["phase"] for r in matrix.regressions(rows, 0.15)] == ["produce"]
    assert matrix.regressions(rows, 0.25) == []


def test_geomean_and_its_default_threshold() -> None:
    runs = [run("A", 0, 50.0, 200.0), run("B", 0, 100.0, 100.0)]
    rows = matrix.summarize(runs, ["1KiB/acks=1/none/p1"])
    assert matrix.geomean_ratio(rows) == pytest.approx(1.0)
    wide, narrow = matrix.default_threshold_all(2), matrix.default_threshold_all(32)
    assert 0 < narrow < wide < 1
    assert narrow == pytest.approx(0.105, abs=0.01)


def test_cells_and_defaults() -> None:
    assert len(matrix.full_cells()) == 16
    assert len({c.key for c in matrix.full_cells()}) == 16
    args = matrix.parse_args(["--a", "kbroker", "--b", "kbroker-ref:HEAD~1"])
    assert args.regression_threshold == matrix.DEFAULT_THRESHOLD
    assert matrix.parse_args(["--b", "tansu"]).regression_threshold is None
    assert matrix.parse_args(["--peer-cmd", "x {port}"]).b == "cmd:x {port}"
    quick = matrix.parse_args(["--quick"])
    assert matrix.records_for(matrix.Cell(100, "1", "none", 1), quick) == 1_000_000


def test_cell_sets_and_keys() -> None:
    tuned, latency = matrix.tuned_cells(), matrix.latency_cells()
    assert [c.key for c in tuned] == [
        "100B/acks=1/none/p4/tuned-c2", "100B/acks=1/none/p8/tuned-c4",
        "1KiB/acks=1/none/p4/tuned-c2", "1KiB/acks=1/none/p8/tuned-c4"]
    assert [c.key for c in latency] == [
        "1KiB/acks=1/none/p1/e2e-1k", "1KiB/acks=1/none/p1/e2e-10k", "1KiB/acks=1/none/p1/e2e-50k"]
    everything = matrix.cells_for(matrix.parse_args([]))
    assert len(everything) == 16 + 4 + 3 and len({c.key for c in everything}) == 23
    quick = [c.key for c in matrix.cells_for(matrix.parse_args(["--quick"]))]
    assert quick[3:] == ["100B/acks=1/none/p4/tuned-c2", "1KiB/acks=1/none/p1/e2e-10k"]
    only = matrix.parse_args(["--sets", "latency", "--latency-rates", "2000,20000"])
    assert [c.key for c in matrix.cells_for(only)] == [
        "1KiB/acks=1/none/p1/e2e-2k", "1KiB/acks=1/none/p1/e2e-20k"]
    picked = matrix.parse_args(["--cells", "1KiB/acks=1/none/p8/tuned-c4,1KiB/acks=1/none/p1"])
    assert [c.key for c in matrix.cells_for(picked)] == [
        "1KiB/acks=1/none/p1", "1KiB/acks=1/none/p8/tuned-c4"]
    with pytest.raises(SystemExit):
        matrix.cells_for(matrix.parse_args(["--cells", "1KiB/acks=1/none/p1/e2e-7k"]))


@pytest.mark.parametrize("bad", [["--sets", "base,fast"], ["--latency-rates", "10k"],
                                 ["--latency-rates", "0"], ["--latency-seconds", "-1"]])
def test_bad_cell_options_are_refused(bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        matrix.parse_args(bad)


def test_phase_options_per_profile() -> None:
    args = matrix.parse_args(["--consumers", "1", "--latency-seconds", "3"])
    base = matrix.phase_options(matrix.Cell(100, "1", "none", 64), args, "h:1")
    assert [mode for mode, _ in base] == ["produce", "consume"]
    assert base[1][1].consumers == 1 and base[1][1].client_config == {}

    tuned = dict(matrix.phase_options(matrix.tuned_cells()[1], args, "h:1"))
    assert (tuned["consume"].consumers, tuned["consume"].partitions) == (4, 8)
    assert tuned["consume"].client_config == matrix.TUNED_CONSUMER
    assert tuned["produce"].client_config == {}  # consumer properties stay off the producers
    assert tuned["produce"].num_records == tuned["consume"].num_records == 3_000_000

    [(mode, e2e)] = matrix.phase_options(matrix.latency_cells()[2], args, "h:1")
    assert mode == "e2e" and e2e.throughput == 50_000.0 and e2e.num_records == 150_000
    assert (e2e.producers, e2e.linger_ms, e2e.partitions, e2e.record_size) == (1, 0.0, 1, 1024)


def test_latency_cells_stay_out_of_the_regression_check() -> None:
    e2e = {"count": 10, "avg_ms": 2.0, "max_ms": 9.0,
           "percentiles_ms": {"p50": 1.0, "p95": 3.0, "p99": 4.0, "p99_9": 9.0}}
    cell = "1KiB/acks=1/none/p1/e2e-10k"
    runs = [{"side": side, "cell": cell, "repeat": 0, "e2e": {"latency": e2e}} for side in "AB"]
    rows = matrix.summarize(runs, [cell])
    assert row(rows, "e2e", "p99")["ratio"] == 1.0
    assert matrix.throughput_rows(rows) == [] and matrix.regressions(rows, 0.1) == []
