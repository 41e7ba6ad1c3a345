"""Inputs of the micro-benchmarks (bench/micro), built by kbroker's own encoders
from fixed seeds, so two runs (and a run and the saved baseline) time the same bytes."""

from __future__ import annotations

import random
from pathlib import Path

from kbroker.records.builder import build_batch

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "protocol" / "fixtures"  # request frames from real clients
BASE_TIMESTAMP = 1_700_000_000_000


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
