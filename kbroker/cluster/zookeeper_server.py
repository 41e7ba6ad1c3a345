"""A real ZooKeeper server for a local cluster: Debian's `zookeeper` package (3.8) run as a
foreground JVM on loopback, as its init script runs it (QuorumPeerMain with a zoo.cfg; with
no `server.N` lines it is a standalone server, with a `Quorum` it is one member of an
ensemble: see zookeeper_ensemble.py).

Used by `kbroker cluster up`, `kbroker.Cluster` and the tests. It writes, in its directory:

    zoo.cfg        tickTime, dataDir, clientPort (a free port on 127.0.0.1, chosen here:
                   ZooKeeper reads clientPort=0 as "not set"), the admin server off,
                   the `ruok`/`srvr` four-letter words on (the readiness probe)
    data/          snapshots and transaction logs (and `myid`, an ensemble member's id)
    zookeeper.log  the JVM's output

start() returns once the server answers `ruok` with `imok` (a standalone server) or
`srvr` with a `Mode:` (an ensemble member: it has joined a quorum and serves); stop()
sends SIGTERM to the JVM's PID and SIGKILL after a grace period, kill() SIGKILL at once.
Nothing else is ever signalled.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"  # its manifest's Class-Path names the deps
SLF4J_BINDING = "/usr/share/java/slf4j-simple.jar"  # log to stderr, i.e. zookeeper.log
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEBIAN_PACKAGE = "zookeeper"
# ZooKeeper expires a session at the first tick after its timeout: with 100 ms ticks a dead
# broker's znode goes within 0.1 s of zookeeper.session.timeout.ms (ZooKeeper's own default,
# 2000, would let it live up to 2 s longer). Sessions may be 0.2 s (2 ticks) to 60 s long.
TICK_TIME_MS = 100
INIT_LIMIT_MS = 5000  # an ensemble follower's time to connect and sync with its leader
SYNC_LIMIT_MS = 2500  # how far behind its leader a follower may fall


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be found, installed or started; the message says why."""


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")  # "32768\t60999"
LOWEST_PORT = 10000


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now for a server to bind, below the kernel's ephemeral range when it
    leaves room: a port the kernel hands out (bind to 0) may be given next to an outgoing
    connection's socket before the server binds it ("Address already in use"), and the
    clients of a test make thousands of connections."""
    try:
        low = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low - LOWEST_PORT >= 1000:
        for _attempt in range(100):
            port = random.randrange(LOWEST_PORT, low)
            with socket.socket() as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (`ruok`, `srvr`) and return the answer ("" if none)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def find_java() -> str:
    java = shutil.which("java") or "/usr/bin/java"
    if not os.access(java, os.X_OK):
        raise ZooKeeperError("ZooKeeper needs a Java runtime: apt-get install openjdk-17-jre-headless")
    return java


def ensure_installed(log: Callable[[str], None] = print) -> None:
    """Install Debian's zookeeper package when its jar is missing (root with apt-get only);
    apt's lock can be held for a minute on a fresh machine: wait and retry, as
    scripts/bootstrap does."""
    if os.path.exists(ZOOKEEPER_JAR):
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise ZooKeeperError(
            f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): install Debian's "
            f"`{DEBIAN_PACKAGE}` package (apt-get install {DEBIAN_PACKAGE}) or run scripts/bootstrap test")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for attempt in range(1, 21):
        log(f"installing Debian's {DEBIAN_PACKAGE} package (apt-get, attempt {attempt})")
        update = subprocess.run([apt, "update", "-qq"], env=env, capture_output=True)
        install = subprocess.run([apt, "install", "-y", "-qq", DEBIAN_PACKAGE], env=env,
                                 capture_output=True)
        if update.returncode == 0 and install.returncode == 0 and os.path.exists(ZOOKEEPER_JAR):
            return
        time.sleep(10)
    raise ZooKeeperError(f"could not install {DEBIAN_PACKAGE}: {install.stderr.decode(errors='replace')}")


@dataclass(frozen=True)
class QuorumPeer:
    """One ensemble member as zoo.cfg names it: server.<server_id>=host:quorum_port:election_port."""

    server_id: int
    host: str
    quorum_port: int
    election_port: int

    def config_line(self) -> str:
        return f"server.{self.server_id}={self.host}:{self.quorum_port}:{self.election_port}"


@dataclass(frozen=True)
class Quorum:
    """An ensemble member's view of the ensemble: its own id and every member."""

    server_id: int
    peers: tuple[QuorumPeer, ...]


class ZooKeeperServer:
    """One ZooKeeper on 127.0.0.1 (standalone, or a member of a `quorum`). See the module
    docstring."""

    def __init__(self, directory: str | os.PathLike[str], port: int | None = None,
                 host: str = "127.0.0.1", quorum: Quorum | None = None) -> None:
        self.directory = Path(directory)
        self.host = host
        self.port = port
        self.quorum = quorum
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_offset = 0

    @property
    def connect_string(self) -> str:
        """host:port, for `zookeeper.connect` (add a chroot after it, e.g. /kbroker)."""
        if self.port is None:
            raise ZooKeeperError("ZooKeeper is not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        fixed_port = self.port is not None
        for _attempt in range(1 if fixed_port else 5):  # a free port can be taken meanwhile
            if not fixed_port:
                self.port = free_port(self.host)
            self.spawn()
            if self.wait_ready(timeout):
                return self
            self.stop()
            if "Address already in use" not in self.output():
                break
        raise ZooKeeperError(f"ZooKeeper did not start on {self.host}:{self.port}:\n{self.output()[-4000:]}")

    def spawn(self) -> None:
        """Start the JVM without waiting for it (an ensemble starts its members together:
        none serves before a quorum is up). Needs a port."""
        if not os.path.exists(ZOOKEEPER_JAR):
            raise ZooKeeperError(f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): "
                                 f"apt-get install {DEBIAN_PACKAGE}, or run scripts/bootstrap test")
        if self.port is None:
            raise ZooKeeperError("spawn() needs a client port")
        self._spawn(find_java())

    def _spawn(self, java: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "data").mkdir(exist_ok=True)
        cfg = self.directory / "zoo.cfg"
        cfg.write_text(
            f"tickTime={TICK_TIME_MS}\n"
            f"initLimit={INIT_LIMIT_MS // TICK_TIME_MS}\nsyncLimit={SYNC_LIMIT_MS // TICK_TIME_MS}\n"
            f"dataDir={self.directory / 'data'}\n"
            f"clientPortAddress={self.host}\nclientPort={self.port}\n"
            "maxSessionTimeout=60000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            "maxClientCnxns=0\n"
            + self._quorum_config()
        )
        classpath = ":".join([str(self.directory), ZOOKEEPER_JAR, SLF4J_BINDING])
        args = [java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.jmx.log4j.disable=true",
                "-cp", classpath, MAIN_CLASS, str(cfg)]
        self._log_file = log_file = open(self.log_path, "ab")  # noqa: SIM115
        self._log_offset = self.log_path.stat().st_size
        self.proc = subprocess.Popen(args, cwd=self.directory, stdin=subprocess.DEVNULL,
                                     stdout=log_file, stderr=subprocess.STDOUT,
                                     preexec_fn=die_with_parent, start_new_session=True)

    def _quorum_config(self) -> str:
        """An ensemble member's lines (and its dataDir/myid); "" for a standalone server."""
        if self.quorum is None:
            return ""
        (self.directory / "data" / "myid").write_text(f"{self.quorum.server_id}\n")
        lines = [p.config_line() for p in self.quorum.peers]
        return "\n".join(lines) + "\n"

    def wait_ready(self, timeout: float) -> bool:
        """Until the server serves (see the module docstring); False if it exited or the
        timeout passed."""
        assert self.proc is not None and self.port is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.quorum is None:
                if four_letter_word(self.host, self.port, "ruok", 0.5) == "imok":
                    return True
            elif self.mode() is not None:
                return True
            time.sleep(0.1)
        return False

    def mode(self) -> str | None:
        """What `srvr` says: "standalone", "leader" or "follower"; None when the server
        does not answer or does not serve (an ensemble member without a quorum)."""
        if self.port is None:
            return None
        for line in four_letter_word(self.host, self.port, "srvr", 0.5).splitlines():
            if line.startswith("Mode: "):
                return line[len("Mode: "):].strip()
        return None

    def output(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the JVM (by PID), SIGKILL it if it has not exited after `timeout`."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def kill(self) -> None:
        """SIGKILL the JVM (by PID): a crash."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def die_with_parent() -> None:
    """In the child: SIGTERM it when the process that started it dies, even by a crash."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
