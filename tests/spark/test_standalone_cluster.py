"""The "kbroker" source and sink on a real Spark cluster: a standalone master and two
workers started from the installed pyspark (`spark-class ...Master` / `...Worker`, on
127.0.0.1 only), jobs submitted with `spark-submit`. Executors are separate JVMs with
their own Python workers, so nothing may depend on the driver's state.

- A batch job reads a topic, writes it back with the sink and reads the copy: exactly the
  records produced, on two executors.
- A streaming job reads a topic into parquet (checkpointed) and copies it with the
  kbroker sink while records keep coming; one worker is killed (SIGKILL to its process
  group: the worker and its executor) mid-stream. Spark retries the lost tasks on the
  other executor: parquet holds every record exactly once, the copy at least once.

Every JVM (master, workers, drivers) runs in a process group the test made and is
killed by PID at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.cluster.zookeeper_server import free_port
from tests.spark.conftest import ROOT, spark_env
from tests.spark.test_spark_source import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
JOB = Path(__file__).with_name("cluster_job.py")


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group `proc` leads (it was started in a session of its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


class StandaloneCluster:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port, self.ui_port = free_port(), free_port()
        self.env = {**os.environ, **spark_env(), "SPARK_LOG_DIR": str(directory / "logs"),
                    "SPARK_WORKER_DIR": str(directory / "work"),
                    "SPARK_DAEMON_JAVA_OPTS": "-Dspark.worker.timeout=10",  # master and workers
                    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - kept by the process
        self.procs[name] = subprocess.Popen([str(BIN / "spark-class"), *args], env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def start(self) -> StandaloneCluster:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in (1, 2):
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--webui-port", str(free_port()),
                        "--cores", "1", "--memory", "1g",
                        "--work-dir", str(self.dir / f"work{i}"), self.url)
        self.wait_workers(2)
        return self

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                        timeout=5) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):  # not listening yet, or its UI up before its JSON
            return 0

    def wait_workers(self, n: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() != n:
            for name, proc in self.procs.items():
                assert proc.poll() is None, (name, (self.dir / f"{name}.log").read_text()[-3000:])
            assert time.monotonic() < deadline, f"{n} workers did not register"
            time.sleep(0.5)

    def stop(self) -> None:
        for proc in self.procs.values():
            kill_group(proc)

    def submit(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen(
                [str(BIN / "spark-submit"), "--master", self.url,
                 "--conf", "spark.driver.host=127.0.0.1",
                 "--conf", "spark.driver.bindAddress=127.0.0.1",
                 "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
                 "--conf", f"spark.executorEnv.PYTHONPATH={ROOT}",
                 "--conf", f"spark.pyspark.python={sys.executable}",
                 "--conf", "spark.sql.shuffle.partitions=2",
                 "--conf", "spark.task.maxFailures=8", str(JOB), *args],
                cwd=self.dir, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_batch_job_on_two_executors(standalone: StandaloneCluster, broker: Broker,
                                    topic: str, tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 1000, headers=False)
    out = tmp_path / "batch.json"
    job = standalone.submit(["batch", servers, topic, str(out)], tmp_path / "batch.log")
    try:
        assert job.wait(400) == 0, (tmp_path / "batch.log").read_text()[-5000:]
    finally:
        kill_group(job)
    result = json.loads(out.read_text())
    assert [tuple(x) for x in result["read"]] == sorted(acked)
    assert result["copy_values"] == sorted(v["value"].decode() for v in acked.values())
    assert len([e for e in result["executors"] if e != "driver"]) == 2


def committed_files(out: Path) -> set[str]:
    """The parquet files the file sink committed (its _spark_metadata log), not stray ones
    left by tasks that died."""
    names: set[str] = set()
    meta = out / "_spark_metadata"
    if not meta.exists():
        return names
    for log in meta.iterdir():  # "N" per batch, "N.compact" every 10 batches
        if log.name.split(".")[0].isdigit() and not log.name.startswith("."):
            for line in log.read_text().splitlines()[1:]:
                names.add(Path(json.loads(line)["path"]).name)
    return names


def test_streaming_job_survives_a_worker_kill(standalone: StandaloneCluster, broker: Broker,
                                              topic: str, tmp_path: Path) -> None:
    from tests.spark.test_options import stored_batches  # the sink's batches, as stored

    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 1500, headers=False)
    out, copy = tmp_path / "out", topic + "-copy"
    job = standalone.submit(["stream", servers, topic, str(tmp_path / "ckpt"), str(out), copy],
                            tmp_path / "stream.log")
    try:
        deadline = time.monotonic() + 300
        while len(committed_files(out)) < 2:
            assert job.poll() is None, (tmp_path / "stream.log").read_text()[-5000:]
            assert time.monotonic() < deadline, (tmp_path / "stream.log").read_text()[-5000:]
            time.sleep(0.2)
        kill_group(standalone.procs["worker1"])  # the worker and its executor, mid-stream
        acked.update(produce(servers, topic, 1500, headers=False))
        want = {v["value"].decode() for v in acked.values()}
        deadline = time.monotonic() + 400
        while True:
            committed = committed_files(out)
            rows = [r for f in committed for r in parquet_rows_file(out / f)]
            copied = sum(b["count"] for b in stored_batches(servers, copy))
            if len({(p, o) for p, o, _ in rows}) >= len(acked) and copied >= len(acked):
                break
            assert job.poll() is None, (tmp_path / "stream.log").read_text()[-5000:]
            assert time.monotonic() < deadline, (len(rows), copied,
                                                 (tmp_path / "stream.log").read_text()[-5000:])
            time.sleep(1)
    finally:
        kill_group(job)
    assert standalone.alive_workers() == 1
    keys = [(p, o) for p, o, _ in rows]
    assert len(keys) == len(set(keys)), "the checkpointed parquet sink wrote a record twice"
    assert sorted(keys) == sorted(acked)
    assert {v for _, _, v in rows} == want
    values = read_values(servers, copy)
    assert want <= set(values), "the kbroker sink lost records"


def parquet_rows_file(path: Path) -> list[tuple[int, int, str]]:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                    t.column("value").to_pylist(), strict=True))


def read_values(servers: str, topic: str) -> list[str]:
    from tests.spark.conftest import load_example

    return [v.decode() for _, v in load_example("declarative_pipeline").read_topic(servers,
                                                                                    topic)]
