"""`kbroker cluster up | status | elect-leaders` and `kbroker topics create | describe |
reassign` against a cluster, end to end: the commands run as a user runs them (each its
own process), ZooKeeper and the brokers are real processes, the data goes through
confluent-kafka. One `cluster up --dir D` serves the module; the last tests stop it with
SIGINT (checking that ZooKeeper's and the brokers' PIDs are gone), start it again on D
(the same ports and topics) and stop that with SIGTERM. Every process is signalled by
its PID only.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.cluster.zookeeper_server import free_port

from .cli_support import ROOT, fresh, partition_lines, run_cli
from .support import wait_until

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 90.0
PROCESS_LINE = re.compile(
    r"^(ZooKeeper|broker \d+) (\S+) pid (\d+) log (\S+)(?: operations (\S+))?$", re.M)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@dataclass
class ClusterUp:
    """A `kbroker cluster up` process and what it printed."""

    directory: Path | None
    args: list[str]
    out_path: Path
    proc: subprocess.Popen[bytes] | None = None
    bootstrap_servers: str = ""
    pids: dict[str, int] = field(default_factory=dict)  # "ZooKeeper" / "broker 1" -> PID
    addresses: dict[str, str] = field(default_factory=dict)
    operations: dict[str, str] = field(default_factory=dict)  # "broker 1" -> its ops URL

    def start(self) -> ClusterUp:
        dir_args = ["--dir", str(self.directory)] if self.directory is not None else []
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kbroker", "cluster", "up", *dir_args, *self.args],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "bootstrap.servers=" not in self.output():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"cluster up did not get ready:\n{self.output()}")
            time.sleep(0.1)
        text = self.output()
        self.bootstrap_servers = re.search(r"^bootstrap\.servers=(\S+)$", text, re.M).group(1)
        for name, address, pid, _log, operations in PROCESS_LINE.findall(text):
            self.pids[name] = int(pid)
            self.addresses[name] = address
            if operations:
                self.operations[name] = operations
        return self

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def signal(self, signum: int) -> int:
        """Send `signum` to `cluster up`; its exit status."""
        assert self.proc is not None
        self.proc.send_signal(signum)
        return self.proc.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Teardown: SIGINT, then SIGKILL for whatever is left, each by its PID."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for pid in self.pids.values():
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    """No process of ours (a kbroker or ZooKeeper JVM, not a zombie) has this PID."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return True
    return b"kbroker" not in cmdline and b"QuorumPeerMain" not in cmdline


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if not gone(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-up")


@pytest.fixture(scope="module")
def up(cluster_dir: Path) -> Iterator[ClusterUp]:
    cluster = ClusterUp(cluster_dir, ["--brokers", "3"], cluster_dir.parent / "up-1.out")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_up_prints_zookeeper_brokers_logs_and_bootstrap(up: ClusterUp, cluster_dir: Path) -> None:
    assert sorted(up.pids) == ["ZooKeeper", "broker 1", "broker 2", "broker 3"]
    assert up.bootstrap_servers == ",".join(up.addresses[f"broker {b}"] for b in (1, 2, 3))
    for b in (1, 2, 3):
        assert f"log {cluster_dir / f'broker-{b}' / 'broker.log'}" in up.output()
    assert f"zookeeper.connect={up.addresses['ZooKeeper']}/kbroker" in up.output()
    # each broker's operations listener on a port of its own, ready once registered
    assert sorted(up.operations) == ["broker 1", "broker 2", "broker 3"]
    assert len(set(up.operations.values())) == 3
    for url in up.operations.values():
        with urllib.request.urlopen(url + "/readyz", timeout=10) as r:
            assert json.loads(r.read())["checks"]["registered"] is True


def test_status_lists_three_brokers_and_the_controller(up: ClusterUp) -> None:
    done = run_cli("cluster", "status", bootstrap=up.bootstrap_servers.split(",")[1])
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    controller = int(re.search(r"\tController: (\d+)\t", first).group(1))
    assert controller in (1, 2, 3) and "\tBrokers: 3\t" in first
    brokers = [line for line in rest if line.startswith("\tBroker: ")]
    assert brokers == [f"\tBroker: {b}\tHost: {up.addresses[f'broker {b}']}\tRack: none"
                       for b in (1, 2, 3)]
    assert "UnderReplicatedPartitions: 0" in rest and "OfflinePartitions: 0" in rest


def test_create_with_replication_factor_3_and_describe(up: ClusterUp) -> None:
    topic = fresh("rf3")
    created = run_cli("topics", "create", topic, "--partitions", "2", "--replication-factor", "3",
                      bootstrap=up.bootstrap_servers)
    assert created.returncode == 0 and f"Created topic {topic}." in created.stdout, created.stderr
    described = run_cli("topics", "describe", topic, bootstrap=up.bootstrap_servers)
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 2\tReplicationFactor: 3" in described.stdout.splitlines()[0]
    parts = partition_lines(described.stdout)
    assert sorted(parts) == [0, 1]
    for p in parts.values():
        replicas = p["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"]
        assert sorted(p["Isr"].split(",")) == ["1", "2", "3"]
        assert p["Leader"] == replicas[0] and p["Offline"] == ""


def test_create_with_a_replica_assignment(up: ClusterUp) -> None:
    topic = fresh("placed")
    created = run_cli("topics", "create", topic, "--replica-assignment", "1:2,2:3,3:1",
                      bootstrap=up.bootstrap_servers)
    assert created.returncode == 0, created.stderr
    parts = partition_lines(run_cli("topics", "describe", topic, bootstrap=up.bootstrap_servers).stdout)
    assert {p: (f["Leader"], f["Replicas"], f["Isr"]) for p, f in parts.items()} == {
        0: ("1", "1,2", "1,2"), 1: ("2", "2,3", "2,3"), 2: ("3", "3,1", "3,1")}
    both = run_cli("topics", "create", fresh("bad"), "--replica-assignment", "1:2",
                   "--partitions", "1", bootstrap=up.bootstrap_servers)
    assert both.returncode == 2 and "excludes --partitions" in both.stderr
    uneven = run_cli("topics", "create", fresh("bad"), "--replica-assignment", "1:2,3",
                     bootstrap=up.bootstrap_servers)
    assert uneven.returncode == 2 and "different replication factor" in uneven.stderr


def test_elect_leaders_reports_each_partition(up: ClusterUp) -> None:
    topic = fresh("elect")
    assert run_cli("topics", "create", topic, "--partitions", "2", "--replication-factor", "3",
                   bootstrap=up.bootstrap_servers).returncode == 0
    done = run_cli("cluster", "elect-leaders", "--topic", topic, bootstrap=up.bootstrap_servers)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Topic: {topic}\tPartition: {p}\tElection: PREFERRED\tResult: ELECTION_NOT_NEEDED"
        for p in (0, 1)]
    one = run_cli("cluster", "elect-leaders", "--unclean", "--topic", topic, "--partition", "1",
                  bootstrap=up.bootstrap_servers)
    assert one.returncode == 0 and one.stdout.splitlines() == [
        f"Topic: {topic}\tPartition: 1\tElection: UNCLEAN\tResult: ELECTION_NOT_NEEDED"]
    missing = run_cli("cluster", "elect-leaders", "--topic", fresh("missing"),
                      bootstrap=up.bootstrap_servers)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_reassign_moves_a_partition_and_keeps_its_records(up: ClusterUp) -> None:
    topic = fresh("moved")
    assert run_cli("topics", "create", topic, "--replica-assignment", "1:2",
                   bootstrap=up.bootstrap_servers).returncode == 0
    producer = Producer({"bootstrap.servers": up.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})
    for i in range(500):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(30) == 0

    moved = run_cli("topics", "reassign", "--topic", topic, "--partition", "0", "--replicas", "2,3",
                    "--wait", bootstrap=up.bootstrap_servers)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.splitlines() == [
        f"Successfully started partition reassignment for {topic}-0 (replicas 2,3).",
        f"Partition reassignment for {topic}-0 complete (replicas 2,3)."]
    listed = run_cli("topics", "reassign", "--list", bootstrap=up.bootstrap_servers)
    assert listed.returncode == 0 and listed.stdout == "No partition reassignments found.\n"

    def moved_everywhere() -> bool:
        parts = partition_lines(run_cli("topics", "describe", topic, bootstrap=up.bootstrap_servers).stdout)
        return parts.get(0, {}).get("Replicas") == "2,3" and parts[0]["Isr"] in ("2,3", "3,2")

    wait_until(moved_everywhere, "describe to show replicas 2,3 with both in the ISR")
    assert consume_all(up.bootstrap_servers, topic, 500) == [f"record-{i}" for i in range(500)]

    cancel = run_cli("topics", "reassign", "--topic", topic, "--partition", "0", "--cancel",
                     bootstrap=up.bootstrap_servers)
    assert cancel.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in cancel.stderr
    dead = run_cli("topics", "reassign", "--topic", topic, "--partition", "0", "--replicas", "2,9",
                   bootstrap=up.bootstrap_servers)
    assert dead.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in dead.stderr


def consume_all(bootstrap: str, topic: str, count: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": fresh("reader"),
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
        return values
    finally:
        consumer.close()


def test_sigint_stops_zookeeper_and_every_broker(up: ClusterUp, cluster_dir: Path) -> None:
    pids = list(up.pids.values())
    assert wait_gone(pids, 0) == pids  # all running
    assert up.signal(signal.SIGINT) == 0, up.output()
    assert wait_gone(pids) == []
    assert up.output().rstrip().endswith("kbroker cluster: stopped")
    assert (cluster_dir / "broker-1" / "logs" / "meta.properties").exists()  # --dir: kept
    # the next test starts brokers on these dirs: each must have let go of its .lock (a PID
    # whose cmdline is gone may still be a thread group tearing down with the lock held)
    log_dirs = sorted(cluster_dir.glob("broker-*/logs"))
    assert len(log_dirs) == 3
    wait_until(lambda: all(unlocked(d) for d in log_dirs),
               "every broker's log dir .lock to be released", STOP_TIMEOUT_S)


def unlocked(log_dir: Path) -> bool:
    """No process holds `log_dir`'s .lock (the flock a broker takes, storage/log_dir_lock.py)."""
    fd = os.open(log_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # drops the lock taken here, if any
    return True


def test_up_again_on_the_dir_reuses_ports_and_data(cluster_dir: Path) -> None:
    before = json.loads((cluster_dir / "ports.json").read_text())
    again = ClusterUp(cluster_dir, [], cluster_dir.parent / "up-2.out")  # --brokers from the dir
    again.start()
    try:
        assert json.loads((cluster_dir / "ports.json").read_text()) == before
        assert sorted(again.pids) == ["ZooKeeper", "broker 1", "broker 2", "broker 3"]
        listed = run_cli("topics", "list", bootstrap=again.bootstrap_servers)
        assert listed.returncode == 0 and any(t.startswith("moved-") for t in listed.stdout.split())
        pids = list(again.pids.values())
        assert again.signal(signal.SIGTERM) == 0, again.output()
        assert wait_gone(pids) == []
    finally:
        again.stop()


def test_up_without_dir_removes_its_data_on_stop(tmp_path: Path) -> None:
    zookeeper_port = free_port()
    single = ClusterUp(None, ["--brokers", "1", "--zookeeper-port", str(zookeeper_port)],
                       tmp_path / "up.out")
    single.start()
    try:
        assert single.addresses["ZooKeeper"] == f"127.0.0.1:{zookeeper_port}"
        directory = Path(re.search(r"data in ([^,\s]+), removed on stop", single.output()).group(1))
        assert (directory / "broker-1" / "broker.log").exists()
        assert single.signal(signal.SIGTERM) == 0, single.output()
        assert not directory.exists()
        assert wait_gone(list(single.pids.values())) == []
    finally:
        single.stop()


def test_up_refuses_per_broker_overrides() -> None:
    done = run_cli("cluster", "up", "--override", "listeners=PLAINTEXT://127.0.0.1:9092", timeout=30)
    assert done.returncode == 2 and "listeners: set per broker" in done.stderr
    typed = run_cli("cluster", "up", "--override", "num.partitions=many", timeout=30)
    assert typed.returncode == 2 and "num.partitions" in typed.stderr
