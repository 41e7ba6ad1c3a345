"""What the cluster CLI tests share: running `kbroker ...` as a user does, and reading
the partition lines it prints."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, bootstrap: str | None = None, timeout: float = 60.0
            ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kbroker", *args]
    if bootstrap is not None:
        cmd += ["--bootstrap-server", bootstrap, "--timeout", "20"]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=timeout)


def partition_lines(text: str, topic: str | None = None) -> dict[int, dict[str, str]]:
    """Partition lines (`kbroker topics describe`, `cluster status`) of `topic` (None: any)
    -> partition -> {Topic, Leader, Replicas, Isr, Offline}."""
    out = {}
    for line in text.splitlines():
        if line.startswith("\tTopic: "):
            fields = dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "")
                          for f in line.strip("\t").split("\t"))
            if topic in (None, fields["Topic"]):
                out[int(fields["Partition"])] = fields
    return out


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
