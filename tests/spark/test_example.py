"""examples/metrics_pipeline.py: its output matches the metrics it published; run as a
user runs it, it prints its results and no Spark chatter, and leaves nothing behind;
without the Spark extra it says what to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from tests.librdkafka_lines import without_telemetry_instance_ids
from tests.spark.conftest import ROOT, load_example

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

EXAMPLE = ROOT / "examples" / "metrics_pipeline.py"
# The JVM's own line for the --add-modules Spark's launcher always passes: no setting
# silences it.
JVM_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


def test_metrics_pipeline_output(spark: Any, broker: Broker, tmp_path: Path) -> None:
    example = load_example("metrics_pipeline")
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


def test_the_example_runs_quietly_and_leaves_nothing_behind(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), "--records", "400", "--seconds", "1"],
                          cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr
    assert "published 400 metrics from 4 hosts" in done.stdout
    assert "parquet in a temporary directory removed at exit (--out DIR keeps it)" in done.stdout
    assert str(tmp_path) not in done.stdout  # no path that is gone once it exits
    # librdkafka's telemetry instance id lines are its own (tests/librdkafka_lines.py)
    stderr = without_telemetry_instance_ids(done.stderr)
    assert [line for line in stderr.splitlines() if line != JVM_WARNING] == []
    # the broker's data, the parquet, the checkpoint and Spark's own files (spark-*,
    # blockmgr-*, native library copies) were all in its temporary directory
    assert list(tmp_path.iterdir()) == []


def test_the_example_without_the_spark_extra_says_what_to_install() -> None:
    without_pyarrow = ("import runpy, sys; sys.modules['pyarrow'] = None; "
                       f"sys.argv = [{str(EXAMPLE)!r}]; runpy.run_path(sys.argv[0], run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", without_pyarrow], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "pyarrow" in done.stderr and "Traceback" not in done.stderr
    if Path(sys.prefix).resolve() == ROOT / ".venv":  # the checkout's own: scripts/bootstrap
        assert f"\n    {ROOT}/scripts/bootstrap spark\n" in done.stderr
    else:
        assert f"\n    {sys.executable} -m pip install -e '{ROOT}[spark,tools]'\n" in done.stderr
