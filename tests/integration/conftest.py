"""Brokers for integration tests: a `python -m kbroker serve` subprocess, or in-process.

`broker_process` starts the CLI exactly as a user would, with port 0 and a tmp
log dir, reads the bound port from its ready line ("kbroker listening on
PLAINTEXT://127.0.0.1:PORT ..."), waits until ApiVersions answers, and kills
it by PID in the finalizer (SIGTERM, then SIGKILL after a timeout). If the test
process itself dies (a crash, a killed run), the kernel sends the broker SIGTERM
(PR_SET_PDEATHSIG), so no orphan keeps running.
`kbroker_broker` (the pytest plugin's fixture) is an embedded Broker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kbroker.testing.pytest_plugin import kbroker_broker, kbroker_config  # noqa: F401

from .security_support import pki, secure_broker  # noqa: F401
from .wire import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"kbroker listening on PLAINTEXT://([^ ]+):(\d+)")


def _die_with_parent() -> None:
    """In the child: SIGTERM it when the test process dies, even by a crash (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class BrokerProcess:
    log_dir: Path
    stderr_path: Path
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    bootstrap_servers: str = ""
    preexec: Callable[[], None] | None = None  # also run in the child (e.g. a lower rlimit)
    args: list[str] = field(default_factory=list)  # more `kbroker serve` arguments

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "kbroker", "serve", *self.args]
        props = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.log_dir),
            "group.initial.rebalance.delay.ms": "0",
            "operations.listener": "",  # off in tests, as embedded (tests/ops turn it on)
            **self.overrides,
        }
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.stderr = open(self.stderr_path, "ab")  # noqa: SIM115
        self.stderr_offset = self.stderr_path.stat().st_size
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr, preexec_fn=self._child_setup)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()
            m = READY.search(text)
            if m:
                self.bootstrap_servers = f"{m.group(1)}:{m.group(2)}"
                wait_until_ready(self.bootstrap_servers, deadline - time.monotonic())
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"kbroker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"kbroker did not get ready:\n{self.output()}")

    def _child_setup(self) -> None:
        _die_with_parent()
        if self.preexec is not None:
            self.preexec()

    def output(self) -> str:
        with open(self.stderr_path, "rb") as f:
            f.seek(self.stderr_offset)
            return f.read().decode(errors="replace")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait; SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    """Make BrokerProcess objects sharing this test's tmp dir; all are stopped afterwards."""
    made: list[BrokerProcess] = []

    def factory(overrides: dict[str, str] | None = None, log_dir: Path | None = None,
                args: list[str] | None = None) -> BrokerProcess:
        bp = BrokerProcess(
            log_dir=log_dir or tmp_path / "kbroker-logs",
            stderr_path=tmp_path / "kbroker.stderr",
            overrides=overrides or {},
            args=args or [],
        )
        made.append(bp)
        return bp

    yield factory  # type: ignore[misc]
    for bp in made:
        bp.stop(timeout=20)


@pytest.fixture(scope="module")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One `kbroker serve` subprocess shared by a test module."""
    tmp = tmp_path_factory.mktemp("kbroker")
    bp = BrokerProcess(log_dir=tmp / "logs", stderr_path=tmp / "kbroker.stderr",
                       overrides={"num.partitions": "3"})
    bp.start()
    try:
        yield bp
    finally:
        bp.stop(timeout=20)
