"""Inputs of the micro-benchmarks (bench/micro), built by kbroker's own encoders
from fixed seeds, so two runs (and a run and the saved baseline) time the same bytes."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbroker.records.builder import build_batch

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "protocol" / "fixtures"  # request frames from real clients
BASE_TIMESTAMP = 1_700_000_000_000
ROUND_SECONDS = 200e-6  # each timed round calls the function for about this long
TOTAL_SECONDS = 0.5  # rounds per benchmark: about this long in all (20 at least)


def timed(benchmark: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """benchmark(fn, *args, **kwargs) with rounds of a fixed number of calls.

    pytest-benchmark calibrates its calls per round from the first timings: on this
    busy machine a preempted first call made it time single calls of 140 ns functions
    in some runs and batches of 1000 in others (a 40 % difference in `min` between runs
    of the same code). Here the calls per round come from the fastest of a few untimed
    runs instead, so every run times rounds of about ROUND_SECONDS."""
    fn(*args, **kwargs)  # warm: first uses (pyarrow, page faults) are slow
    fastest = math.inf
    for _ in range(5):
        start = time.perf_counter()
        fn(*args, **kwargs)
        fastest = min(fastest, time.perf_counter() - start)
    iterations = max(1, round(ROUND_SECONDS / max(fastest, 1e-9)))
    rounds = max(20, min(5000, round(TOTAL_SECONDS / (iterations * max(fastest, 1e-9)))))
    benchmark.extra_info["calls_per_round"] = iterations
    return benchmark.pedantic(fn, args=args, kwargs=kwargs, iterations=iterations, rounds=rounds)


def value_batch(records: int, size: int, seed: int, headers: bool = False) -> bytes:
    """One v2 batch of `records` random values of `size` bytes, no keys; with
    `headers`, two headers per record."""
    rng = random.Random(seed)
    extra = [("trace-id", b"0123456789abcdef"), ("source", b"bench")] if headers else []
    values = [(None, rng.randbytes(size), i, extra) for i in range(records)]
    return build_batch(values, BASE_TIMESTAMP)


def payload(batches: int, records: int, size: int, seed: int = 1, headers: bool = False) -> bytes:
    """A Produce payload: `batches` batches of `records` records of `size` bytes."""
    return b"".join(value_batch(records, size, seed + i, headers) for i in range(batches))


# name -> (batches, records per batch, value bytes): what producers send
PAYLOADS = {
    "1x1000x100B": (1, 1000, 100),  # one linger-filled batch of small records
    "1x64x1KiB": (1, 64, 1024),
    "100x10x100B": (100, 10, 100),  # many small batches (an unbatched producer)
}
