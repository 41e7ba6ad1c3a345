"""CRC-32C throughput: kbroker._core.crc32c against the `crc32c` PyPI package.

    python bench/bench_crc32c.py [--rounds N] [--seconds S]
    python -m pytest bench/bench_crc32c.py          # the pytest-benchmark form

All sides checksum the same buffers in the same process: the `crc32c`
package, kbroker's active path, and each of kbroker's hardware paths this CPU
has on its own (AVX-512 VPCLMULQDQ, AVX2 VPCLMULQDQ, SSE4.2), so one machine
shows what the CPUs that lack the faster paths run. Each round times a batch
of calls per side, reversing the order of the sides every round, so frequency
drift and noisy neighbours hit all alike. Per buffer size it prints the median
GB/s of each side and its ratio to the package, and writes everything to
bench/results/crc32c.json. Goals: >= 1 at 4 KiB and 1 MiB (issue 3); the AVX2
path >= 1.5 at 1 MiB (issue 17).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this tree's build (in place or installed)

import crc32c as peer  # noqa: E402
import pytest  # noqa: E402

from kbroker._core import crc32c as ours  # noqa: E402

SIZES = {"64B": 64, "4KiB": 4096, "1MiB": 1024 * 1024}
RESULTS = ROOT / "bench" / "results" / "crc32c.json"

Checksum = Callable[[bytes], int]


# kbroker's paths by name (kbroker._core.crc32c.PATHS) and the function that runs each alone.
PATH_FUNCTIONS: dict[str, Checksum] = {
    "avx512-vpclmulqdq": ours.crc32c_avx512,
    "avx2-vpclmulqdq": ours.crc32c_avx2,
    "sse4.2": ours.crc32c_sse42,
}


def contenders() -> dict[str, Checksum]:
    """The peer, kbroker's active path, and each hardware path this CPU has."""
    sides: dict[str, Checksum] = {"crc32c": peer.crc32c, "kbroker": ours.crc32c}
    for name in ours.PATHS:
        if name in PATH_FUNCTIONS:
            sides[f"kbroker-{name}"] = PATH_FUNCTIONS[name]
    return sides


def time_batch(fn: Checksum, data: bytes, calls: int) -> float:
    """Seconds for `calls` checksums of `data`."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(data)
    return time.perf_counter() - start


def calls_for(fn: Checksum, data: bytes, seconds: float) -> int:
    """How many calls fill about `seconds`, found by doubling."""
    calls = 1
    while time_batch(fn, data, calls) < seconds / 4:
        calls *= 2
    return calls * 4


def measure_size(data: bytes, rounds: int, seconds: float) -> dict[str, list[float]]:
    sides = contenders()
    calls = min(calls_for(fn, data, seconds) for fn in sides.values())
    rates: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for _ in range(rounds):
        for name in order:
            elapsed = time_batch(sides[name], data, calls)
            rates[name].append(len(data) * calls / elapsed / 1e9)
        order.reverse()
    return rates


def summarise(rates: dict[str, list[float]]) -> dict[str, object]:
    median = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "gb_per_s_median": median,
        "gb_per_s_best": {name: max(values) for name, values in rates.items()},
        "gb_per_s_rounds": rates,
        "ratio_over_crc32c": {
            name: value / median["crc32c"] for name, value in median.items() if name != "crc32c"
        },
        "ratio_kbroker_over_crc32c": median["kbroker"] / median["crc32c"],
    }


def environment() -> dict[str, object]:
    return {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "kbroker_path": ours.IMPLEMENTATION,
        "kbroker_paths": list(ours.PATHS),
        "kbroker_module": ours.__file__,
        "crc32c_package_hardware": bool(getattr(peer, "hardware_based", False)),
        "crc32c_package_version": getattr(peer, "__version__", "unknown"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.2, help="per side per round")
    args = parser.parse_args(argv)
    report: dict[str, object] = {"environment": environment(), "sizes": {}}
    sides = list(contenders())
    print(f"kbroker's active path: {ours.IMPLEMENTATION}; {args.rounds} rounds, order reversed each round")
    print("GB/s (medians), and in brackets the ratio to the crc32c package")
    print(f"{'size':>6} " + " ".join(f"{name:>26}" for name in sides))
    for label, size in SIZES.items():
        data = os.urandom(size)
        result = summarise(measure_size(data, args.rounds, args.seconds))
        report["sizes"][label] = result  # type: ignore[index]
        median: dict[str, float] = result["gb_per_s_median"]  # type: ignore[assignment]
        ratios: dict[str, float] = result["ratio_over_crc32c"]  # type: ignore[assignment]
        cells = [f"{median['crc32c']:26.2f}"]
        cells += [f"{median[name]:17.2f} ({ratios[name]:5.2f}x)" for name in sides[1:]]
        print(f"{label:>6} " + " ".join(cells))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


# ---- the pytest-benchmark form: one group per size, one row per side ----


@pytest.mark.parametrize("side", list(contenders()))
@pytest.mark.parametrize("label", list(SIZES))
def test_crc32c_throughput(benchmark, side: str, label: str) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(SIZES[label])
    fn = contenders()[side]
    benchmark.group = f"crc32c {label}"
    benchmark.extra_info["bytes"] = len(data)
    assert benchmark(fn, data) == peer.crc32c(data)


if __name__ == "__main__":
    sys.exit(main())
