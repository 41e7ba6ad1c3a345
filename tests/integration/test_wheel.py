"""kbroker as another project installs it: a wheel built from this checkout, installed into
a fresh virtualenv (no PYTHONPATH, run from a directory outside the checkout, so nothing of
the clone can shadow the installed package), starts a broker that real clients use, and
its console scripts and pytest plugin entry point are there.

The wheel is built as the README's "Installing kbroker into another project" says, with
`pip wheel --no-deps .`, but without build isolation (the checkout's .venv already has
setuptools and Cython, and the in-place build's objects are reused, so this takes seconds
rather than a new compile); the fresh virtualenv installs the wheel's dependencies from the
package index (pip's cache, which scripts/bootstrap filled).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"kbroker listening on PLAINTEXT://([^ ]+):(\d+)")  # as tests/integration/conftest.py


def _run(args: list[str], cwd: Path, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed; returns its bin directory."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist), str(ROOT)], cwd=work, timeout=900)
    wheels = list(dist.glob("kbroker-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=work)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          str(wheels[0])], cwd=work)
    return venv / "bin"


def test_the_installed_package_is_the_wheels_with_its_core(installed: Path, tmp_path: Path) -> None:
    out = _run([str(installed / "python"), "-c",
                "import kbroker, kbroker._core.records as r; from kbroker import Broker; "
                "print(kbroker.__file__); print(r.__file__)"], cwd=tmp_path)
    package, core = out.split()
    site = str(installed.parent / "lib")
    assert package.startswith(site) and core.startswith(site), out
    assert core.endswith(".so"), core  # the compiled core, not a pure-Python fallback
    entry_points = _run([str(installed / "python"), "-c",
                         "from importlib.metadata import entry_points; "
                         "print([e.value for e in entry_points(group='pytest11')])"], cwd=tmp_path)
    assert "kbroker.testing.pytest_plugin" in entry_points


@pytest.fixture
def served(installed: Path, tmp_path: Path) -> Iterator[str]:
    """`kbroker serve` of the fresh virtualenv; yields its bootstrap servers."""
    stderr = tmp_path / "serve.stderr"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [str(installed / "kbroker"), "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={tmp_path / 'logs'}", "--override", "operations.listener="],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not (m := READY.search(stderr.read_text(errors="replace"))):
            assert proc.poll() is None, f"kbroker serve exited {proc.returncode}:\n{stderr.read_text()}"
            assert time.monotonic() < deadline, f"no ready line:\n{stderr.read_text()}"
            time.sleep(0.05)
        yield f"{m.group(1)}:{m.group(2)}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 0, stderr.read_text()


def test_the_installed_broker_serves_real_clients(served: str) -> None:
    topic = f"wheel-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": served, "acks": "all"})
    for i in range(100):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    del producer
    consumer = Consumer({"bootstrap.servers": served, "group.id": "wheel", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [f"v{i}".encode() for i in range(100)]
    finally:
        consumer.close()
