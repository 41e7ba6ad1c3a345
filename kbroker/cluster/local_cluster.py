"""Cluster: ZooKeeper and N kbroker processes on one machine, for `kbroker cluster up`,
tests and benchmarks.

    with kbroker.Cluster(brokers=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})

Layout under `directory` (a fresh temporary one, removed on stop, when none is given):

    zookeeper/                     the ZooKeeper server's (zoo.cfg, data/, zookeeper.log)
    broker-<id>/logs/              a broker's log.dirs
    broker-<id>/broker.log         its output (kbroker serve --log-level INFO)
    ports.json                     the ports of the last start (see below)

A start on a directory that holds a cluster already reuses its data: ZooKeeper's znodes
and each broker's logs (so the same broker ids), and, where they are still free, the
ports of the last start, which ports.json keeps:

    {"zookeeper": 41234, "brokers": {"1": 41235, "2": 41236, "3": 41237},
     "operations": {"1": 41238, "2": 41239, "3": 41240}}

("operations" with `operations=True`: each broker's operations listener, /metrics and
the console; without it operations.listener is set empty, off.)

Each broker is `python -m kbroker serve` with node.id, listeners (a port of its own,
kept across restarts), operations.listener, log.dirs and zookeeper.connect (with the
chroot /kbroker) as overrides, plus the caller's overrides. With `namespaces`, a broker
runs in a network namespace of its own (`ip netns exec`, made by the caller) and listens
on that namespace's address, port 9092 (its operations listener, when on, on port 9404).
Every process is started in a session of its
own, is sent SIGTERM when the process that started it dies (PR_SET_PDEATHSIG), and is signalled by
its PID only: stop() sends SIGTERM (a controlled shutdown), kill() SIGKILL.

start() returns once every broker answers and the controller has told each of them
about all the others (Metadata from every broker lists every broker).

Lock: one thread uses a Cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from kbroker.cluster.zookeeper_ensemble import ZooKeeperEnsemble
from kbroker.cluster.zookeeper_server import ZooKeeperServer, die_with_parent, free_port
from kbroker.utils.atomic_file import write_atomically

CHROOT = "/kbroker"
READY_TIMEOUT_S = 90.0
PORTS_FILE = "ports.json"
NAMESPACE_PORT = 9092  # a broker alone in its network namespace has every port to itself
NAMESPACE_OPERATIONS_PORT = 9404


class ClusterError(RuntimeError):
    pass


class BrokerProcess:
    """One kbroker process of a Cluster."""

    def __init__(self, broker_id: int, directory: Path, port: int, props: Mapping[str, str],
                 host: str = "127.0.0.1", netns: str | None = None,
                 operations_port: int | None = None) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.port = port
        self.operations_port = operations_port  # its operations listener's, when on
        self.host = host
        self.netns = netns  # the network namespace it runs in (None: the caller's)
        self.props = dict(props)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def operations_url(self) -> str | None:
        return f"http://{self.host}:{self.operations_port}" if self.operations_port else None

    def start(self, extra: Mapping[str, str] | None = None, netns: str | None = None) -> None:
        """`netns`: run in this network namespace (default: the broker's own, if any)."""
        netns = netns or self.netns
        if self.is_running():
            raise ClusterError(f"broker {self.broker_id} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        props = {**self.props, **(extra or {})}
        args = [sys.executable, "-m", "kbroker", "serve", "--log-level", "INFO"]
        for key, value in props.items():
            args += ["--override", f"{key}={value}"]
        if netns is not None:
            args = ["ip", "netns", "exec", netns, *args]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reaped()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=die_with_parent)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
        self._reaped(10.0)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL after `timeout`; the exit code."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
        return self._reaped(timeout)

    def _reaped(self, timeout: float) -> int | None:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class Cluster:
    """See the module docstring."""

    def __init__(self, brokers: int = 3, directory: str | os.PathLike[str] | None = None,
                 overrides: Mapping[str, str] | None = None, *, first_id: int = 1,
                 host: str = "127.0.0.1",
                 zookeeper: ZooKeeperServer | None = None,
                 chroot: str = CHROOT, zookeeper_port: int | None = None,
                 ensemble: ZooKeeperEnsemble | None = None,
                 namespaces: Mapping[int, tuple[str, str]] | None = None,
                 operations: bool = False) -> None:
        """`zookeeper`: a running server to use (not stopped by this Cluster; give each
        cluster on it its own `chroot`); by default the Cluster runs its own, on
        `zookeeper_port` if given. `ensemble`: a running ZooKeeper ensemble to use instead
        (not stopped either). `namespaces`: broker id -> (network namespace, its address)
        for brokers that run in one (made by the caller: it must reach ZooKeeper, and the
        caller it). `operations`: each broker's operations listener on a port of its own
        (`kbroker cluster up`); off otherwise."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._temp = directory is None
        self.directory = Path(directory) if directory is not None else Path(
            tempfile.mkdtemp(prefix="kbroker-cluster-"))
        self.host = host
        if zookeeper is not None and zookeeper_port is not None:
            raise ValueError("zookeeper_port is for the Cluster's own ZooKeeper")
        self.ensemble = ensemble
        self._own_zookeeper = zookeeper is None and ensemble is None
        self.zookeeper = zookeeper or ZooKeeperServer(self.directory / "zookeeper",
                                                      zookeeper_port, host)
        self._zookeeper_port = zookeeper_port
        self.chroot = chroot
        self.namespaces = dict(namespaces or {})
        self.overrides = dict(overrides or {})
        self.brokers: dict[int, BrokerProcess] = {}
        self.operations = operations
        self._count = brokers
        self._first_id = first_id

    @property
    def zookeeper_connect(self) -> str:
        quorum = self.ensemble.connect_string if self.ensemble else self.zookeeper.connect_string
        return quorum + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def broker_props(self, broker_id: int, port: int, host: str | None = None,
                     operations_port: int | None = None) -> dict[str, str]:
        directory = self.directory / f"broker-{broker_id}"
        rf = str(min(3, self._count))
        return {
            "node.id": str(broker_id),
            "listeners": f"PLAINTEXT://{host or self.host}:{port}",
            # off unless given a port: `kbroker serve` would take its default port otherwise
            "operations.listener": f"{host or self.host}:{operations_port}" if operations_port else "",
            "log.dirs": str(directory / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }

    def start(self, timeout: float = READY_TIMEOUT_S) -> Cluster:
        last = last_ports(self.directory)
        try:
            if self._own_zookeeper:
                if self._zookeeper_port is None:
                    self.zookeeper.port = self._reusable(last.get("zookeeper"))
                self.zookeeper.start()
            for i in range(self._count):
                broker_id = self._first_id + i
                netns, host = self.namespaces.get(broker_id, (None, self.host))
                ops_port = None
                if netns is not None:
                    port = NAMESPACE_PORT
                    ops_port = NAMESPACE_OPERATIONS_PORT if self.operations else None
                else:
                    port = self._reusable(last.get("brokers", {}).get(str(broker_id))) or free_port(host)
                    if self.operations:
                        ops_port = (self._reusable(last.get("operations", {}).get(str(broker_id)))
                                    or free_port(host))
                broker = BrokerProcess(broker_id, self.directory / f"broker-{broker_id}", port,
                                       self.broker_props(broker_id, port, host, ops_port), host,
                                       netns, ops_port)
                self.brokers[broker_id] = broker
                broker.start()
            self._write_ports()
            self.wait_formed(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _reusable(self, port: int | None) -> int | None:
        """`port` if nothing listens on it now, else None."""
        if not port:
            return None
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as listeners bind
            try:
                sock.bind((self.host, port))
            except OSError:
                return None
        return port

    def _write_ports(self) -> None:
        ports: dict[str, Any] = {"zookeeper": self.zookeeper.port,
                                 "brokers": {str(b): p.port for b, p in self.brokers.items()}}
        if self.operations:
            ports["operations"] = {str(b): p.operations_port for b, p in self.brokers.items()}
        write_atomically(str(self.directory / PORTS_FILE), json.dumps(ports) + "\n", sync=False)

    def wait_formed(self, timeout: float = READY_TIMEOUT_S, brokers: list[int] | None = None) -> None:
        """Until every running broker lists every running broker and a controller."""
        from kbroker.client.connection import BrokerConnection, KafkaClientError
        from kbroker.protocol.messages.metadata import MetadataRequest

        want_ids = set(brokers) if brokers is not None else {
            b for b, p in self.brokers.items() if p.is_running()}
        deadline = time.monotonic() + timeout
        pending = set(want_ids)
        while pending:
            for broker_id in list(pending):
                proc = self.brokers[broker_id]
                if not proc.is_running():
                    raise ClusterError(f"broker {broker_id} exited; see {proc.log_path}:\n"
                                       f"{proc.output()[-3000:]}")
                try:
                    with BrokerConnection(proc.host, proc.port, timeout_s=2.0) as conn:
                        md = conn.request(MetadataRequest(topics=[]), 12)
                except (KafkaClientError, OSError):
                    continue
                if {b.node_id for b in md.brokers} >= want_ids and md.controller_id >= 0:
                    pending.discard(broker_id)
            if pending and time.monotonic() > deadline:
                raise ClusterError(f"brokers {sorted(pending)} did not see the whole cluster "
                                   f"within {timeout:.0f} s")
            if pending:
                time.sleep(0.1)

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> int | None:
        return self.brokers[broker_id].stop(timeout)

    def restart(self, broker_id: int, wait: bool = True) -> None:
        broker = self.brokers[broker_id]
        broker.start()
        if wait:
            self.wait_formed()

    def stop(self) -> None:
        """SIGTERM every broker (in parallel), then ZooKeeper; remove a temporary directory."""
        for broker in self.brokers.values():
            if broker.is_running():
                assert broker.proc is not None
                broker.proc.send_signal(signal.SIGTERM)
        for broker in self.brokers.values():
            broker._reaped(60.0)
        if self._own_zookeeper:
            self.zookeeper.stop()
        if self._temp:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def last_ports(directory: Path) -> dict[str, Any]:
    """ports.json of the last start in `directory` ({} when there is none or it is unreadable)."""
    try:
        found = json.loads((directory / PORTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
