"""The suite's tiers: each collected test gets one tier marker, from its directory and
the fixtures it uses, so that a developer can run one tier alone (`scripts/test unit`,
`scripts/test integration`, `scripts/test cluster`, `scripts/test spark`).

    unit         no broker, ZooKeeper, Spark or browser started (core, storage,
                 protocol, coordinator and the other unit tests)
    integration  one broker: `kbroker serve` subprocesses or an in-process Broker, with
                 real clients (tests/integration, and tests marked integration elsewhere)
    cluster      ZooKeeper and several brokers (tests/cluster, or the `zookeeper` fixture)
    spark        pyspark (tests/spark, or the `spark` fixture)
    browser      Debian's chromium driven by Playwright (marked `browser` in its module);
                 run with the spark tier: both need a program beyond the broker

A test belongs to the highest tier it qualifies for, in the order browser, spark,
cluster, integration: a Spark test in a module marked integration is a spark test. The markers a module sets
itself (pytest.mark.integration and the others) count as its tier; a test with none
is a unit test. `scripts/test TIER` selects one tier with pytest's -m: a test marked
integration in tests/cluster is a cluster test, so the integration tier's expression
leaves out the tiers above it ("integration and not (cluster or spark or browser)").

Owns: nothing beyond the markers it adds at collection.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent

# the highest tier first; a directory or fixture puts a test in that tier
TIERS = ("browser", "spark", "cluster", "integration", "unit")
DIRECTORIES = {"spark": TESTS / "spark", "cluster": TESTS / "cluster",
               "integration": TESTS / "integration"}
FIXTURES = {"spark": {"spark"}, "cluster": {"zookeeper"},
            "integration": {"broker_process", "broker_factory", "kbroker_broker",
                            "kbroker_cluster", "secure_broker"}}


def tier_of(item: pytest.Item) -> str:
    """The tier `item` belongs to (see the module docstring)."""
    path = Path(str(item.path))
    fixtures = set(getattr(item, "fixturenames", ()))  # with the fixtures' own
    marked = {m.name for m in item.iter_markers()}
    for tier in TIERS[:-1]:
        directory = DIRECTORIES.get(tier)
        if (tier in marked or fixtures & FIXTURES.get(tier, set())
                or (directory is not None and directory in path.parents)):
            return tier
    return "unit"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if tier not in {m.name for m in item.iter_markers()}:
            item.add_marker(tier)
