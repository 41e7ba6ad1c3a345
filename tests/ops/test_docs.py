"""The manual's operations page names the listener and its default and shows the console;
the metrics reference (docs/reference/metrics.md, generated: test_docs_reference.py)
lists every metric family /metrics exposes."""

from __future__ import annotations

from pathlib import Path

from kbroker.common.configs import BROKER_CONFIGS, DEFAULT_OPERATIONS_LISTENER
from kbroker.ops.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_manual_lists_every_metric_and_the_listener() -> None:
    reference = (DOCS / "reference" / "metrics.md").read_text()
    assert [m.name for m in METRICS if f"`{m.name}`" not in reference] == []
    operations = (DOCS / "operations.md").read_text()
    assert DEFAULT_OPERATIONS_LISTENER in operations and "operations.listener" in operations
    assert "(reference/metrics.md)" in operations
    for image in ("images/console-overview.png",):
        assert f"]({image})" in operations and (DOCS / image).exists()


def test_the_key_is_in_the_one_table() -> None:
    key = BROKER_CONFIGS["operations.listener"]
    assert key.default is None and "kbroker serve" in key.doc
