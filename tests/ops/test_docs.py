"""The README lists every metric family /metrics exposes, and shows the console."""

from __future__ import annotations

from pathlib import Path

from kbroker.common.configs import BROKER_CONFIGS, DEFAULT_OPERATIONS_LISTENER
from kbroker.ops.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]


def test_readme_lists_every_metric_and_the_listener() -> None:
    readme = (ROOT / "README.md").read_text()
    assert [m.name for m in METRICS if f"`{m.name}`" not in readme] == []
    assert DEFAULT_OPERATIONS_LISTENER in readme and "operations.listener" in readme
    for image in ("docs/images/console-overview.png",):
        assert image in readme and (ROOT / image).exists()


def test_the_key_is_in_the_one_table() -> None:
    key = BROKER_CONFIGS["operations.listener"]
    assert key.default is None and "kbroker serve" in key.doc
