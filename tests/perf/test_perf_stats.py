"""Percentile and summary math of the perf tool."""

from __future__ import annotations

import pytest

from kbroker.perf.stats import (
    LatencySummary,
    RunSummary,
    percentile,
    percentile_key,
    progress_line,
)


def test_nearest_rank_percentiles_of_one_to_hundred() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 95) == 95.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 99.9) == 100.0
    assert percentile(samples, 100) == 100.0


def test_percentile_is_an_observed_value() -> None:
    samples = [1.0, 2.0, 10.0]
    assert percentile(samples, 50) == 2.0
    assert percentile(samples, 1) == 1.0
    assert percentile([7.5], 99.9) == 7.5


@pytest.mark.parametrize("bad", [0.0, -1.0, 100.1])
def test_percentile_rejects_out_of_range(bad: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], bad)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_percentile_keys() -> None:
    assert percentile_key(50.0) == "p50"
    assert percentile_key(99.9) == "p99_9"


def test_latency_summary_sorts_and_summarizes() -> None:
    summary = LatencySummary.of([4.0, 1.0, 3.0, 2.0])
    assert summary is not None
    assert summary.count == 4
    assert summary.avg_ms == 2.5
    assert summary.max_ms == 4.0
    assert summary.percentiles_ms == {"p50": 2.0, "p95": 4.0, "p99": 4.0, "p99_9": 4.0}
    assert LatencySummary.of([]) is None


def test_run_summary_rates_and_json() -> None:
    run = RunSummary("produce", records=1000, bytes=2 * 1024 * 1024, elapsed_s=2.0,
                     latency=LatencySummary.of([1.0, 3.0]))
    assert run.records_per_s == 500.0
    assert run.mb_per_s == 1.0
    data = run.to_json()
    assert data["records_per_s"] == 500.0
    assert data["latency"]["percentiles_ms"]["p50"] == 1.0
    assert "500.0 records/s (1.00 MB/s)" in run.summary_line()
    assert "ms p99.9" in run.summary_line()


def test_zero_elapsed_does_not_divide_by_zero() -> None:
    run = RunSummary("consume", records=0, bytes=0, elapsed_s=0.0, latency=None)
    assert run.records_per_s == 0.0 and run.mb_per_s == 0.0


def test_progress_line() -> None:
    line = progress_line(5000, 5 * 1024 * 1024, 5.0, 2.0, 9.5)
    assert line == ("5000 records, 1,000.0 records/s (1.00 MB/s), "
                    "2.00 ms avg latency, 9.50 ms max latency")
    assert "latency" not in progress_line(10, 10, 1.0, None, None)
