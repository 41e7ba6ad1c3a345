"""The README's embedding snippets (a Broker, a Cluster), run as they stand: they work and
print nothing (a librdkafka client that outlived its broker would log a `Disconnected`
line at exit; a record acks=all could not place would be left in the producer's queue,
which librdkafka reports when it is destroyed). The Cluster snippet kills a broker, and
librdkafka's lines about that broker's connection are all it may print.

One line is librdkafka's own and expected, its telemetry instance id
(tests/librdkafka_lines.py); `run_snippet` drops it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.librdkafka_lines import without_telemetry_instance_ids

from .conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def readme_snippet(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return next(b for b in blocks if marker in b)


def run_snippet(code: str, cwd: Path, timeout: float) -> str:
    """The snippet's stderr, less librdkafka's line of its telemetry instance id (see the
    module docstring); it printed nothing on stdout and exited 0."""
    # run outside the checkout: a user's script, with kbroker imported as installed
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    return without_telemetry_instance_ids(done.stderr)


def test_the_readme_embedding_snippet_runs_silently(tmp_path: Path) -> None:
    code = readme_snippet("from kbroker import Broker").replace(
        "/tmp/my-logs", str(tmp_path / "my-logs"))
    assert run_snippet(code, tmp_path, timeout=60) == ""
    assert (tmp_path / "my-logs" / "hello-0").is_dir()


def test_the_readme_cluster_snippet_runs_silently(tmp_path: Path) -> None:
    code = readme_snippet("from kbroker import Cluster")
    # the Cluster's data lives in a temporary directory of its own: put it in tmp_path
    code = code.replace("with Cluster(", f"with Cluster(directory={str(tmp_path / 'c')!r}, ")
    assert "directory=" in code
    stderr = run_snippet(code, tmp_path, timeout=150)
    # librdkafka may log its connection to the broker the snippet kills (Disconnected,
    # Connection refused while it is down), and nothing else: no line for the others as
    # the cluster stops, no undelivered record
    for line in stderr.splitlines():
        assert re.match(r"%\d\|[\d.]+\|FAIL\|rdkafka#producer-1\| \[thrd:[\d.:]+/1\]", line), stderr
    logs = sorted((tmp_path / "c").glob("broker-*/**/orders-0"))
    assert len(logs) == 3  # acks=all with min.insync.replicas=2 needed the replicas
