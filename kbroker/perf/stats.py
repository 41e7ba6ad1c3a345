"""Latency percentiles, run summaries and the lines the perf tool prints.

Percentiles use the nearest-rank method on the sorted samples (the value below
which at least p% of the samples lie), as Kafka's perf tools do: no
interpolation, so every reported figure is a latency that was observed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

PERCENTILES: tuple[float, ...] = (50.0, 95.0, 99.0, 99.9)
MB = 1024 * 1024


def percentile(sorted_samples: Sequence[float], p: float) -> float:
    """The nearest-rank p-th percentile (0 < p <= 100) of already sorted samples."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    if not 0.0 < p <= 100.0:
        raise ValueError(f"percentile {p} outside (0, 100]")
    rank = math.ceil(p / 100.0 * len(sorted_samples))
    return sorted_samples[max(rank, 1) - 1]


def percentile_key(p: float) -> str:
    """`50.0` -> `"p50"`, `99.9` -> `"p99_9"` (JSON-friendly names)."""
    text = f"{p:g}".replace(".", "_")
    return f"p{text}"


@dataclass(frozen=True)
class LatencySummary:
    """Latency figures in milliseconds over `count` samples."""

    count: int
    avg_ms: float
    max_ms: float
    percentiles_ms: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> LatencySummary | None:
        if not samples_ms:
            return None
        ordered = sorted(samples_ms)
        return cls(
            count=len(ordered),
            avg_ms=sum(ordered) / len(ordered),
            max_ms=ordered[-1],
            percentiles_ms={percentile_key(p): percentile(ordered, p) for p in PERCENTILES},
        )


@dataclass(frozen=True)
class RunSummary:
    """What one produce, consume or e2e run achieved."""

    mode: str
    records: int
    bytes: int
    elapsed_s: float
    latency: LatencySummary | None
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # stopped early (Ctrl-C, SIGTERM): what was measured until then

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["records_per_s"] = self.records_per_s
        data["mb_per_s"] = self.mb_per_s
        return data

    def summary_line(self) -> str:
        marker = f" PARTIAL ({self.extra.get('stopped_by', 'stopped')})" if self.partial else ""
        line = (
            f"{self.mode}{marker}: {self.records} records in {self.elapsed_s:.2f} s, "
            f"{self.records_per_s:,.1f} records/s ({self.mb_per_s:.2f} MB/s)"
        )
        if self.latency is not None:
            line += ", " + format_latency(self.latency)
        end_txn = self.extra.get("end_txn_latency")
        if end_txn:
            line += (f"; {self.extra['transactions']} transactions, EndTxn "
                     + format_latency(LatencySummary(**end_txn)))
        if self.errors:
            line += f", {self.errors} errors"
        return line


def format_latency(latency: LatencySummary) -> str:
    parts = [f"{latency.avg_ms:.2f} ms avg latency", f"{latency.max_ms:.2f} ms max latency"]
    for key, value in latency.percentiles_ms.items():
        parts.append(f"{value:.2f} ms {key.replace('_', '.')}")
    return ", ".join(parts)


def format_figure(value: float | None, digits: int = 2) -> str:
    """A figure in a table: `-` for none, thousands separated from 10,000 up."""
    if value is None:
        return "-"
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def progress_line(
    records: int, nbytes: int, interval_s: float, avg_ms: float | None, max_ms: float | None
) -> str:
    """One progress line for a window of `interval_s` seconds."""
    rate = records / interval_s if interval_s > 0 else 0.0
    mbs = nbytes / MB / interval_s if interval_s > 0 else 0.0
    line = f"{records} records, {rate:,.1f} records/s ({mbs:.2f} MB/s)"
    if avg_ms is not None and max_ms is not None:
        line += f", {avg_ms:.2f} ms avg latency, {max_ms:.2f} ms max latency"
    return line


def figures(result: dict[str, Any]) -> dict[str, float]:
    """The figures of one run (a RunSummary.to_json()) by name: throughput, elapsed time,
    latency avg/max/percentiles as `latency_p99_ms` and the like."""
    found = {name: float(result[name]) for name in ("records_per_s", "mb_per_s", "elapsed_s")}
    latency = result.get("latency")
    if latency:
        found["latency_avg_ms"] = float(latency["avg_ms"])
        found["latency_max_ms"] = float(latency["max_ms"])
        for key, value in latency.get("percentiles_ms", {}).items():
            found[f"latency_{key}_ms"] = float(value)
    end_txn = result.get("extra", {}).get("end_txn_latency")
    if end_txn:
        for key, value in end_txn.get("percentiles_ms", {}).items():
            found[f"end_txn_{key}_ms"] = float(value)
    return found


def spread(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per figure over the runs (RunSummary.to_json() each): min, median, max and the values."""
    per_run = [figures(run) for run in runs]
    names = [name for name in per_run[0] if all(name in f for f in per_run)] if per_run else []
    return {
        name: {"min": min(values), "median": statistics.median(values), "max": max(values),
               "values": values}
        for name in names
        for values in ([f[name] for f in per_run],)
    }
