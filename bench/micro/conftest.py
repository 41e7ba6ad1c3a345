"""Fixtures of the micro-benchmarks (bench/micro, pytest-benchmark). See bench/README.md,
"Micro-benchmarks", for how to run, save and compare them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from micro_inputs import PAYLOADS, payload


@pytest.fixture(params=list(PAYLOADS), scope="session")
def produce_payload(request: pytest.FixtureRequest) -> Iterator[tuple[str, bytes, int]]:
    """(name, payload, record count)."""
    batches, records, size = PAYLOADS[request.param]
    yield request.param, payload(batches, records, size), batches * records
