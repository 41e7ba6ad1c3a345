"""How much the micro-benchmarks move between runs of the same code: the basis of the
thresholds in their regression command (bench/README.md, "Micro-benchmarks").

    python bench/micro/noise.py DIR_OR_FILES...   # pytest-benchmark JSON files (--benchmark-save/-autosave)

For every benchmark present in all runs and for each statistic (min and median), it
takes every ordered pair of runs (a, b) and the ratio b / a: what
`--benchmark-compare-fail=<stat>:X%` would see if a were the saved baseline and b the
new run of unchanged code. It prints each benchmark's largest such ratio and how many
of all those comparisons a threshold of 10 % .. 100 % would have failed: a false alarm each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

STATS = ("min", "median")
THRESHOLDS = (10, 15, 20, 25, 30, 40, 50, 75, 100)


def load(paths: list[Path]) -> list[dict[str, dict[str, float]]]:
    """Per run: benchmark fullname -> its stats, oldest run first."""
    files: list[Path] = []
    for path in paths:
        files += sorted(path.rglob("*.json")) if path.is_dir() else [path]
    runs = []
    for file in sorted(files, key=lambda f: f.name):
        document = json.loads(file.read_text())
        runs.append({b["fullname"]: b["stats"] for b in document["benchmarks"]})
    return runs


def pair_ratios(runs: list[dict[str, dict[str, float]]], stat: str) -> dict[str, list[float]]:
    """Benchmark -> b/a of `stat` over every ordered pair of runs (a, b)."""
    names = set.intersection(*(set(run) for run in runs))
    return {
        name: [b[name][stat] / a[name][stat] for a, b in itertools.permutations(runs, 2)]
        for name in sorted(names)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    runs = load(args.paths)
    if len(runs) < 2:
        raise SystemExit("need at least two runs")
    print(f"{len(runs)} runs, {len(runs) * (len(runs) - 1)} ordered pairs per benchmark")
    ratios = {stat: pair_ratios(runs, stat) for stat in STATS}
    print(f"\n{'largest slowdown seen between runs of the same code':60} " +
          " ".join(f"{stat:>8}" for stat in STATS))
    for name in ratios["min"]:
        print(f"{name:60} " + " ".join(f"{max(ratios[stat][name]):8.3f}" for stat in STATS))
    for stat in STATS:
        every = [r for values in ratios[stat].values() for r in values]
        worst = sorted(max(values) for values in ratios[stat].values())
        flagged = {t: sum(r > 1 + t / 100 for r in every) for t in THRESHOLDS}
        print(f"\n{stat}: {len(every)} comparisons; per-benchmark largest slowdown: median "
              f"{statistics.median(worst):.3f}, max {worst[-1]:.3f}")
        print("  false alarms at " + ", ".join(f"{t}%: {n}" for t, n in flagged.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
