"""pytest plugin (entry point `kbroker`): a real broker inside your tests.

    def test_roundtrip(kbroker_broker):
        p = confluent_kafka.Producer({"bootstrap.servers": kbroker_broker.bootstrap_servers})

`kbroker_broker` is a started embedded Broker on 127.0.0.1 with a free port and
its data in the test's tmp_path, stopped (gracefully) after the test. It uses
`group.initial.rebalance.delay.ms=0` so consumer groups form without the 3 s
wait. `kbroker_config` (a dict of Kafka keys) can be overridden per module to
change settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.broker import Broker


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    """Extra broker settings for `kbroker_broker` (override this fixture to change them)."""
    return {}


@pytest.fixture
def kbroker_broker(tmp_path: Path, kbroker_config: dict[str, str]) -> Iterator[Broker]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "kbroker-logs"),
        "group.initial.rebalance.delay.ms": "0",
        **kbroker_config,
    }
    broker = Broker(props)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
