"""Regression math shared by `kbroker perf compare` and bench/matrix.py: ratios, the
noise band and the regression verdict (one owner, so both gate the same way).

A ratio is new / baseline of one figure. For a throughput figure (records/s, MB/s)
a ratio below 1 - threshold is a regression; latency figures are shown, never gated
(a p99 on a shared machine moves too much to gate a CI job on).

The noise band is what the same broker measures against itself: on this project's
shared 2-core machine (Tansu against Tansu, bench/matrix.py's full matrix, 3 repeats,
other builds and tests running; bench/RESULTS.md) the per-cell median records/s ratios
spanned 0.72..1.58 and the standard deviation of their logs was NOISE_LOG_STDEV. A
threshold of 0.30 would have flagged none of those 32 cells (0.15 flagged 8, 0.20 3,
0.25 1), hence DEFAULT_THRESHOLD. Two perf JSON files with repeats also carry their own
band: the ratio range from the new run's min over the baseline's max to the new run's
max over the baseline's min.

`kbroker perf compare` reads the JSON files `kbroker perf ... --json OUT` writes::

    {"tool": "kbroker-perf", "mode": "produce", "context": {...}, "options": {...},
     "runs": [RunSummary.to_json(), ...],
     "figures": {"records_per_s": {"min": .., "median": .., "max": .., "values": [..]}, ...},
     "result": RunSummary.to_json() of the median run, "partial": false}
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOISE_LOG_STDEV = 0.21
DEFAULT_THRESHOLD = 0.30
THROUGHPUT_FIGURES = ("records_per_s", "mb_per_s")


def ratio(new: float | None, baseline: float | None) -> float | None:
    """new / baseline, or None when either is missing or the baseline is zero."""
    if new is None or not baseline:
        return None
    return new / baseline


def is_regression(throughput_ratio: float, threshold: float) -> bool:
    """A throughput ratio (new / baseline) below 1 - threshold."""
    return throughput_ratio < 1.0 - threshold


def geomean(ratios: Sequence[float]) -> float | None:
    """Geometric mean of positive ratios: many cells in one, far less noisy, figure."""
    positive = [r for r in ratios if r > 0]
    return math.exp(statistics.mean(math.log(r) for r in positive)) if positive else None


def default_threshold_all(checked: int) -> float:
    """1 - exp(-3 sigma) for the mean of `checked` log ratios (sigma = NOISE_LOG_STDEV/sqrt(n))."""
    return 1.0 - math.exp(-3.0 * NOISE_LOG_STDEV / math.sqrt(max(checked, 1)))


def ratio_spread(ratios: Sequence[float]) -> dict[str, Any]:
    """min, max, median and the standard deviation of the logs of some ratios."""
    if not ratios:
        return {}
    logs = [math.log(r) for r in ratios if r > 0]
    return {"ratio_min": min(ratios), "ratio_max": max(ratios),
            "ratio_median": statistics.median(ratios),
            "log_ratio_stdev": statistics.stdev(logs) if len(logs) > 1 else 0.0}


def band(new: dict[str, float], baseline: dict[str, float]) -> tuple[float, float] | None:
    """The ratio range two {min, max} spreads allow: (new min / base max, new max / base min)."""
    if not baseline.get("max") or not baseline.get("min"):
        return None
    return new["min"] / baseline["max"], new["max"] / baseline["min"]


@dataclass(frozen=True)
class FigureComparison:
    """One figure of two perf runs: medians, their ratio and the band the repeats allow."""

    name: str
    baseline: float
    new: float
    ratio: float | None
    band: tuple[float, float] | None
    gated: bool
    regression: bool


class CompareError(ValueError):
    """A file `kbroker perf compare` cannot compare (exit status 2)."""


def load(path: str | Path) -> dict[str, Any]:
    """A `kbroker perf --json` document, checked for what compare reads."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: {exc}") from exc
    if not isinstance(document, dict) or document.get("tool") != "kbroker-perf" \
            or not isinstance(document.get("figures"), dict):
        raise CompareError(f"{path}: not a JSON file written by `kbroker perf ... --json`")
    return document


def compare(baseline: dict[str, Any], new: dict[str, Any], threshold: float) -> list[FigureComparison]:
    """Every figure both documents carry, in the baseline's order."""
    if baseline.get("mode") != new.get("mode"):
        raise CompareError(f"the runs measured different things: {baseline.get('mode')} "
                           f"against {new.get('mode')}")
    rows = []
    for name, base in baseline["figures"].items():
        other = new["figures"].get(name)
        if other is None:
            continue
        r = ratio(other["median"], base["median"])
        gated = name in THROUGHPUT_FIGURES
        rows.append(FigureComparison(
            name=name, baseline=base["median"], new=other["median"], ratio=r,
            band=band(other, base), gated=gated,
            regression=gated and r is not None and is_regression(r, threshold)))
    return rows
