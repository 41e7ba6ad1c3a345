"""The regression math `kbroker perf compare` and bench/matrix.py share (kbroker.perf.compare),
and the spread of figures over repeats (kbroker.perf.stats.spread)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbroker.perf import compare
from kbroker.perf.stats import LatencySummary, RunSummary, figures, spread


def run(records_per_s: float, p99: float = 2.0) -> dict[str, Any]:
    latency = LatencySummary(10, 1.0, p99 * 2, {"p50": 1.0, "p99": p99})
    return RunSummary("produce", records=1000, bytes=1000 * 1024,
                      elapsed_s=1000 / records_per_s, latency=latency).to_json()


def document(*rates: float) -> dict[str, Any]:
    runs = [run(rate) for rate in rates]
    return {"tool": "kbroker-perf", "mode": "produce", "runs": runs, "figures": spread(runs)}


def test_figures_of_one_run() -> None:
    found = figures(run(500.0, p99=3.0))
    assert found["records_per_s"] == pytest.approx(500.0)
    assert found["latency_p99_ms"] == 3.0 and found["latency_max_ms"] == 6.0
    assert "latency_p50_ms" in found and "errors" not in found


def test_spread_min_median_max() -> None:
    figures_of = spread([run(100.0), run(300.0), run(200.0)])["records_per_s"]
    assert (figures_of["min"], figures_of["median"], figures_of["max"]) == pytest.approx(
        (100.0, 200.0, 300.0))
    assert len(figures_of["values"]) == 3


def test_ratio_band_and_verdict() -> None:
    rows = {r.name: r for r in compare.compare(document(100, 110), document(60, 70), 0.3)}
    throughput = rows["records_per_s"]
    assert throughput.ratio == pytest.approx(65 / 105)
    assert throughput.band == pytest.approx((60 / 110, 70 / 100))
    assert throughput.regression and throughput.gated
    assert not rows["latency_p99_ms"].gated and not rows["latency_p99_ms"].regression
    assert not any(r.regression for r in compare.compare(document(100), document(90), 0.3))


def test_modes_must_match() -> None:
    other = {**document(100), "mode": "consume"}
    with pytest.raises(compare.CompareError):
        compare.compare(document(100), other, 0.3)


def test_load_refuses_what_perf_did_not_write(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"tool": "bench/matrix.py"}))
    with pytest.raises(compare.CompareError):
        compare.load(path)
    with pytest.raises(compare.CompareError):
        compare.load(tmp_path / "missing.json")


def test_shared_helpers() -> None:
    assert compare.ratio(50.0, 100.0) == 0.5 and compare.ratio(1.0, 0.0) is None
    assert compare.is_regression(0.69, 0.3) and not compare.is_regression(0.71, 0.3)
    assert compare.geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert compare.ratio_spread([1.0, 2.0])["ratio_max"] == 2.0
