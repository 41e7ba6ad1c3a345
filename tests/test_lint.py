"""Lint and types run as part of the test suite: ruff over the code, mypy over the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.timeout(600)
def test_ruff_is_clean() -> None:
    result = run_tool("ruff", "check", "kbroker", "tools", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(900)
def test_mypy_is_clean() -> None:
    result = run_tool("mypy", "kbroker")
    assert result.returncode == 0, result.stdout + result.stderr
