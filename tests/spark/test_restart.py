"""Kill the driver of a streaming query with SIGKILL, restart it: nothing lost, nothing twice.

The query runs in a subprocess (tests/spark/stream_driver.py) reading a 3-partition
topic in micro-batches of 100 offsets into a parquet file sink. Once two batches
are committed the driver is killed by PID with SIGKILL (its JVM with it: the whole
process group the test started), more records are produced, and the query is
started again from the same checkpoint with trigger(availableNow=True) and a larger
maxOffsetsPerTrigger (the batch in flight at the kill is replayed with its logged
offsets, the rest comes in one more batch). The sink must then hold every
(partition, offset) exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from tests.spark.conftest import ROOT, spark_env
from tests.spark.test_spark_source import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

DRIVER = Path(__file__).with_name("stream_driver.py")


def start_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(DRIVER), *args], cwd=ROOT,
                                env={**os.environ, **spark_env()}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def kill_driver(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # the driver, as a crash would
    proc.wait(30)
    try:  # and the JVM and workers it started (their own session, made by us)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError("the killed driver's process group did not go away")


def test_restart_after_sigkill_loses_and_duplicates_nothing(spark: Any, broker: Broker,
                                                            topic: str, tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 1000, headers=False)
    checkpoint, out, log = tmp_path / "ckpt", tmp_path / "out", tmp_path / "driver.log"
    args = [servers, topic, str(checkpoint), str(out)]
    temp_dir = tmp_path / "spark"

    proc = start_driver([*args, "continuous", "100", str(temp_dir)], log)
    try:
        deadline = time.monotonic() + 240
        while committed_batches(checkpoint) < 2:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
    finally:
        kill_driver(proc)
    done_before = committed_batches(checkpoint)
    assert done_before < 1000 // 100, "the query finished before it was killed"

    acked.update(produce(servers, topic, 300, headers=False))
    proc = start_driver([*args, "available-now", "100000", str(temp_dir)], log)
    try:
        assert proc.wait(240) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            kill_driver(proc)

    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    got = [(r.partition, r.offset) for r in rows]
    assert len(got) == len(set(got)), "duplicates after the restart"
    assert sorted(got) == sorted(acked), "records lost after the restart"
