"""`kbroker perf produce --transactional` against `kbroker serve`: every record committed in
transactions of the size asked, and the EndTxn round trip in the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .txn_support import read_values

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_transactional_perf_run(broker_process: Any, tmp_path: Path) -> None:
    bs = broker_process.bootstrap_servers
    out = tmp_path / "perf.json"
    done = subprocess.run(
        [sys.executable, "-m", "kbroker", "perf", "produce", "--bootstrap-server", bs, "--topic", "perf-tx",
         "--partitions", "1", "--num-records", "2500", "--record-size", "50", "--transactional",
         "--records-per-transaction", "1000", "--quiet", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 transactions, EndTxn" in done.stdout
    result = json.loads(out.read_text())["result"]
    assert result["records"] == 2500 and result["errors"] == 0
    assert result["extra"]["transactions"] == 3 and result["extra"]["end_txn_latency"]["count"] == 3
    assert len(read_values(bs, "perf-tx")) == 2500
