"""`kbroker top` against a broker, and `kbroker serve`'s operations listener defaults."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kbroker import Broker
from kbroker.common.configs import DEFAULT_OPERATIONS_LISTENER

from .support import get, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                 "operations.listener": "127.0.0.1:0"}) as b:
        yield b


def _kbroker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_top_prints_rates_per_topic_and_latency_per_api(broker: Broker) -> None:
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 10})
        while not stop.is_set():
            producer.produce("top-topic", value=b"x" * 200)
            producer.poll(0)
            stop.wait(0.002)  # the producer's pace
        producer.flush(30)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        done = _kbroker("top", "--url", str(broker.operations_url), "--once")
    finally:
        stop.set()
        thread.join(60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kbroker ") and "(RUNNING)" in lines[0]
    row = next(line for line in lines if line.startswith("top-topic"))
    assert float(re.split(r"\s+", row)[1].rstrip("KMG")) > 0  # messages in per second
    assert any(line.startswith("Produce ") for line in lines)


def test_top_reports_an_unreachable_listener() -> None:
    done = _kbroker("top", "--url", "http://127.0.0.1:1", "--once")
    assert done.returncode == 1 and "cannot read http://127.0.0.1:1" in done.stderr


def _serve_output(tmp_path: Path, *overrides: str) -> str:
    """Start `kbroker serve`, wait for its ready line, stop it with SIGTERM; its log."""
    log = tmp_path / "serve.log"
    args = [sys.executable, "-m", "kbroker", "serve", "--override",
            "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / 'logs'}"]
    for pair in overrides:
        args += ["--override", pair]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_until(lambda: "kbroker listening on" in log.read_text() or proc.poll() is not None,
                       "kbroker serve's ready line")
            text = log.read_text()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
    return text


def test_serve_listens_on_the_default_port_or_says_why_not(tmp_path: Path) -> None:
    text = _serve_output(tmp_path)
    on = f"operations listener on http://{DEFAULT_OPERATIONS_LISTENER}"
    taken = f"the operations listener is off: cannot listen on {DEFAULT_OPERATIONS_LISTENER}"
    assert (on in text) != (taken in text), text


def test_serve_with_an_empty_key_has_no_listener(tmp_path: Path) -> None:
    text = _serve_output(tmp_path, "operations.listener=")
    assert "operations listener" not in text


def test_serve_with_a_port_of_its_own(tmp_path: Path) -> None:
    text = _serve_output(tmp_path, "operations.listener=127.0.0.1:0")
    found = re.search(r"operations listener on (http://127\.0\.0\.1:\d+)", text)
    assert found is not None, text
    with pytest.raises(OSError):  # stopped with the broker
        get(found.group(1) + "/healthz", timeout=2)
