"""`kbroker top` against a broker, and `kbroker serve`'s operations listener defaults."""

from __future__ import annotations

import contextlib
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
        # port 0: the broker names the port it bound (DescribeConfigs operations.listener)
        done = _kbroker("top", "--bootstrap-server", broker.bootstrap_servers, "--once")
    finally:
        stop.set()
        thread.join(60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kbroker ") and "(RUNNING)" in lines[0]
    row = next(line for line in lines if line.startswith("top-topic"))
    assert float(re.split(r"\s+", row)[1].rstrip("KMG")) > 0  # messages in per second
    assert any(line.startswith("Produce ") for line in lines)


def test_top_into_a_reader_that_stops_ends_quietly(broker: Broker) -> None:
    done = subprocess.run(f"{sys.executable} -m kbroker top --url {broker.operations_url} "
                          "--samples 5 | head -1", shell=True, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.startswith("kbroker ") and done.stderr == "", done.stderr


def test_top_reports_an_unreachable_listener() -> None:
    done = _kbroker("top", "--url", "http://127.0.0.1:1", "--once")
    assert done.returncode == 1 and "cannot read http://127.0.0.1:1" in done.stderr


READY = re.compile(r"kbroker listening on PLAINTEXT://(\S+) \(log\.dirs=[^)]*\)"
                   r"(?:, console at (http://\S+))?")


@contextlib.contextmanager
def _serving(tmp_path: Path, name: str, *overrides: str) -> Iterator[tuple[str, str | None, Path]]:
    """`kbroker serve` running (its logs in tmp_path/name): (bootstrap, console URL, its
    log), stopped with SIGTERM afterwards."""
    log = tmp_path / f"{name}.log"
    args = [sys.executable, "-m", "kbroker", "serve", "--override",
            "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / name}"]
    for pair in overrides:
        args += ["--override", pair]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        ready = wait_until(lambda: READY.search(log.read_text()) or proc.poll() is not None,
                           "kbroker serve's ready line")
        assert isinstance(ready, re.Match), log.read_text()
        yield ready.group(1), ready.group(2), log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()


def _serve_output(tmp_path: Path, *overrides: str) -> str:
    """Start `kbroker serve`, wait for its ready line, stop it with SIGTERM; its log."""
    with _serving(tmp_path, "logs", *overrides) as (_bs, _url, log):
        pass
    return log.read_text()


def test_two_default_brokers_each_serve_a_console_that_top_finds(tmp_path: Path) -> None:
    """The default operations port (9404, maybe taken by a broker outside the test too)
    gives way to a free one; `kbroker top --bootstrap-server` asks each broker where."""
    with _serving(tmp_path, "a") as (bs_a, url_a, log_a), \
            _serving(tmp_path, "b") as (bs_b, url_b, log_b):
        assert url_a is not None and url_b is not None and url_a != url_b
        default = f"http://{DEFAULT_OPERATIONS_LISTENER}"
        for url, log in ((url_a, log_a), (url_b, log_b)):
            assert get(url + "/healthz")[0] == 200
            if url != default:  # it says why it is not on the default port
                assert (f"operations listener: {DEFAULT_OPERATIONS_LISTENER} is taken "
                        f"(another broker?), listening on {url} instead") in log.read_text()
        for bs in (bs_a, bs_b):
            done = _kbroker("top", "--bootstrap-server", bs, "--once")
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines()[0].endswith(f"bootstrap {bs}"), done.stdout


def test_a_taken_port_that_is_configured_stops_serve(tmp_path: Path, broker: Broker) -> None:
    taken = str(broker.operations_url).removeprefix("http://")
    done = subprocess.run(
        [sys.executable, "-m", "kbroker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}", "--override", f"operations.listener={taken}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"kbroker: cannot start: [Errno 98] operations.listener {taken}: " in done.stderr


def test_top_says_when_a_broker_has_no_operations_listener(tmp_path: Path) -> None:
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}) as b:
        done = _kbroker("top", "--bootstrap-server", b.bootstrap_servers, "--once")
    assert done.returncode == 1
    assert "runs no operations listener (operations.listener is not set)" in done.stderr


def test_serve_with_an_empty_key_has_no_listener(tmp_path: Path) -> None:
    text = _serve_output(tmp_path, "operations.listener=")
    assert "operations listener" not in text


def test_serve_with_a_port_of_its_own(tmp_path: Path) -> None:
    text = _serve_output(tmp_path, "operations.listener=127.0.0.1:0")
    found = re.search(r"operations listener on (http://127\.0\.0\.1:\d+)", text)
    assert found is not None, text
    with pytest.raises(OSError):  # stopped with the broker
        get(found.group(1) + "/healthz", timeout=2)
