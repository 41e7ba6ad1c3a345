"""100,000 partitions on one broker, within an open-file limit of 20,000 (minutes).

Not part of the default run (marked `slow`, and skipped without KBROKER_SCALE_TESTS=1);
run it with:

    KBROKER_SCALE_TESTS=1 scripts/test -m slow tests/integration/test_scale_100k.py

Its short counterpart in the default run is test_descriptor_budget.py (2,000 and
5,000 partitions under small descriptor limits).

The broker creates 100,000 partitions (10 topics of 10,000), takes one record in
each, stops, restarts on that data under a limit of 20,000 descriptors, and gives
back the record of every partition; its descriptors stay within the budget.
"""

from __future__ import annotations

import os
import random
import resource
from typing import Any

import pytest

from .test_descriptor_budget import create, descriptors, produce_each, read_each

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.environ.get("KBROKER_SCALE_TESTS") != "1",
                       reason="scale test: set KBROKER_SCALE_TESTS=1 (see the module docstring)"),
]

TOPICS, PER_TOPIC = 10, 10_000


def test_100k_partitions_run_and_restart_within_20000_descriptors(broker_factory: Any) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 20_000:
        pytest.skip("needs a hard open-file limit of 20,000")
    broker = broker_factory({"num.partitions": "1"})
    broker.preexec = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (20_000, 20_000))
    broker.start(timeout=300)
    topics = [f"scale{i}" for i in range(TOPICS)]
    for t in topics:
        create(broker.bootstrap_servers, t, PER_TOPIC)
        produce_each(broker.bootstrap_servers, t, list(range(PER_TOPIC)))
    assert descriptors(broker.proc.pid) <= 10_000 + 100  # budget: half the limit
    assert broker.stop(timeout=300) == 0
    broker.start(timeout=600)
    for t in random.sample(topics, 3):
        sample = random.sample(range(PER_TOPIC), 2000)
        assert read_each(broker.bootstrap_servers, t, sample) == {p: b"p%d" % p for p in sample}
    assert descriptors(broker.proc.pid) <= 10_000 + 100
