"""bench/bench_quotas.py run once with tiny sizes (an embedded broker, one producer), so
that a broken bench fails here. Its figures are never checked against the quota: the
machine is shared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_quotas  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_one_tiny_run_writes_its_json(tmp_path: Path) -> None:
    output = tmp_path / "quotas.json"
    assert bench_quotas.main(["--seconds", "2", "--repeats", "1", "--quota", "65536",
                              "--output", str(output)]) == 0
    summary = json.loads(output.read_text())
    assert summary["settings"] == {"quota": 65536.0, "seconds": 2.0, "windows": 2, "repeats": 1}
    (run,) = summary["runs"]
    assert run["quota_bytes_per_s"] == 65536.0 and run["records"] > 0
    assert summary["median_ratio"] == run["ratio"] == run["bytes_per_s"] / 65536.0
