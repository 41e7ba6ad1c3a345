"""The README's embedding snippet, run as it stands: it works and prints nothing (a
librdkafka client that outlived the broker would log a `Disconnected` line at exit)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def embedding_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return next(b for b in blocks if "from kbroker import Broker" in b)


def test_the_readme_embedding_snippet_runs_silently(tmp_path: Path) -> None:
    code = embedding_snippet().replace("/tmp/my-logs", str(tmp_path / "my-logs"))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
    assert (tmp_path / "my-logs" / "hello-0").is_dir()
