"""The Node.js client @platformatic/kafka (pinned by scripts/bootstrap into .node/) driven
from tests: each scenario is a small script under tests/node/, run by `node` in a
subprocess with a timeout (the Node.js in .node/ too: Debian's is older than the
client's 22.22), talking to a broker on 127.0.0.1; it prints one JSON line, returned
here. Tests skip when either is not installed (`scripts/bootstrap test` installs both)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "node"
NODE = ROOT / ".node" / "node_modules" / ".bin" / "node"  # the client needs Node.js >= 22.22
CLIENT = ROOT / ".node" / "node_modules" / "@platformatic" / "kafka" / "dist" / "index.js"

needs_node_client = pytest.mark.skipif(
    not NODE.exists() or not CLIENT.exists(),
    reason="Node.js or @platformatic/kafka is not installed in .node/ (scripts/bootstrap test)")


def run_node(script: str, bootstrap: str, timeout: float = 60.0, **args: Any) -> dict[str, Any]:
    """Run tests/node/`script` against `bootstrap` with `args` (JSON); its result."""
    env = {**os.environ, "KBROKER_NODE_KAFKA": CLIENT.as_uri(), "KBROKER_BOOTSTRAP": bootstrap}
    proc = subprocess.run([str(NODE), str(SCRIPTS / script), json.dumps(args)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{script} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing; stderr:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1])
