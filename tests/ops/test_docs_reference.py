"""docs/reference/configuration.md and metrics.md are what `python -m tools.docs_reference`
writes from the one table of config keys and the one table of metrics now: a key or a
metric added, changed or removed without regenerating them fails here. Regenerated in
memory, compared with the committed files."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root, for tools/

from kbroker.common.configs import ACCEPTED_WITHOUT_EFFECT, BROKER_CONFIGS, TOPIC_CONFIGS  # noqa: E402
from kbroker.ops.metrics import METRICS  # noqa: E402
from tools.docs_reference import OUT_DIR, pages  # noqa: E402


def test_the_committed_references_are_fresh() -> None:
    stale = [name for name, text in pages().items()
             if not (OUT_DIR / name).is_file() or (OUT_DIR / name).read_text() != text]
    assert stale == [], f"stale: {stale}; run `.venv/bin/python -m tools.docs_reference`"


def test_every_key_and_metric_has_its_row() -> None:
    generated = pages()
    config, metrics = generated["configuration.md"], generated["metrics.md"]
    for key in [*BROKER_CONFIGS, *TOPIC_CONFIGS]:
        assert f"- **`{key.name}`** ({key.type.name.lower()}; default " in config
    assert all(f"- **`{name}`**: " in config for name in ACCEPTED_WITHOUT_EFFECT)
    for metric in METRICS:
        item = next(line for line in metrics.splitlines()
                    if line.startswith(f"- **`{metric.name}`** ("))
        assert f"({metric.kind}" in item and metric.kafka in item and metric.doc in item
    live = next(line for line in config.splitlines() if line.startswith("- **`log.retention.ms`**"))
    assert "changed live by kbroker" in live  # a dynamic broker key kbroker changes at run time says so
    static = next(line for line in config.splitlines() if line.startswith("- **`listeners`**"))
    assert "changed live by kbroker" not in static


def test_a_doc_stays_on_its_item_line() -> None:
    from tools.docs_reference import _code, _line

    assert _line("a b\n    c") == "a b c" and _line("User:<it>") == "User:&lt;it>"
    assert _code("x") == "`x`" and _code(None) == "null" and _code("") == '""'
