"""examples/metrics_pipeline.py: its output matches the metrics it published."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from tests.spark.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("metrics_pipeline",
                                                  ROOT / "examples" / "metrics_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_metrics_pipeline_output(spark: Any, broker: Broker, tmp_path: Path) -> None:
    example = load_example()
    summary = example.run(spark, broker.bootstrap_servers, tmp_path / "out", records=1200,
                          seconds=2.0)
    published = summary["published"]
    assert len(published) == 1200

    expected: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for m in published:
        expected.setdefault((m["name"], m["ts"] // 60_000 * 60_000), []).append(m)
    got = {(w["name"], w["window_start_ms"]): w for w in summary["windows"]}
    assert set(got) == set(expected)
    for key, ms in expected.items():
        w = got[key]
        values = [m["value"] for m in ms]
        assert w["count"] == len(ms)
        assert w["min"] == min(values) and w["max"] == max(values)
        assert w["avg"] == pytest.approx(sum(values) / len(values))
        assert w["hosts"] == len({m["host"] for m in ms})
    # every window reached the output topic at least once (updates as they changed)
    assert summary["output_topic_records"] >= len(expected)
    assert summary["micro_batches"] >= 1
