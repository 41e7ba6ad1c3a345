"""The micro-benchmarks (bench/micro) as a correctness smoke: each runs once, untimed
(--benchmark-disable), and checks its own result. Their timings are compared only by
hand, against the saved baselines (bench/README.md, "Micro-benchmarks"), never here;
pytest without paths collects tests/ alone (pyproject.toml's testpaths)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_micro_benchmarks_run_once_and_check_their_results() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/micro", "-q", "--benchmark-disable",
         "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout

