"""/healthz and /readyz during startup, recovery and shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kbroker import Broker
from kbroker.cluster.zookeeper_server import free_port
from kbroker.server.listener import SocketServer
from kbroker.storage.log_manager import LogManager

from .support import get, scrape, value, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _ready(url: str) -> tuple[int, dict[str, Any]]:
    status, body = get(url + "/readyz")
    return status, json.loads(body)


@pytest.fixture
def held() -> Iterator[dict[str, threading.Event]]:
    """Events that hold the logs' load and shutdown until the test releases them."""
    events = {"load": threading.Event(), "shutdown": threading.Event()}
    yield events
    for event in events.values():
        event.set()


def test_health_while_logs_load_and_during_shutdown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        held: dict[str, threading.Event]) -> None:
    load, drain = LogManager.startup, SocketServer.drain

    def slow_load(self: LogManager) -> None:  # on the worker thread that loads the logs
        held["load"].wait(60)
        load(self)

    async def slow_drain(self: SocketServer, timeout: float) -> None:  # the loop serves on
        await asyncio.get_running_loop().run_in_executor(None, held["shutdown"].wait, 60)
        await drain(self, timeout)

    monkeypatch.setattr(LogManager, "startup", slow_load)
    monkeypatch.setattr(SocketServer, "drain", slow_drain)
    broker = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                     "operations.listener": "127.0.0.1:0"})
    starter = threading.Thread(target=broker.start)
    starter.start()
    try:
        url = wait_until(lambda: broker.operations_url, "the operations listener")
        # the logs are loading: alive, not ready, and /metrics has the broker state only
        assert json.loads(get(url + "/healthz")[1]) == {
            "status": "alive", "phase": "RECOVERY", "node_id": 0}
        status, body = _ready(url)
        assert status == 503 and body["checks"]["logs_loaded"] is False
        assert value(scrape(url), "kafka_server_kafkaserver_brokerstate") == 2
        assert get(url + "/api/topics")[0] == 503
        held["load"].set()
        starter.join(60)
        status, body = _ready(url)
        assert status == 200 and all(body["checks"].values()), body
        assert value(scrape(url), "kafka_server_kafkaserver_brokerstate") == 3
        # shutting down: still alive, no longer ready
        stopper = threading.Thread(target=broker.stop)
        stopper.start()
        wait_until(lambda: _ready(url)[0] == 503, "/readyz to answer 503")
        status, body = _ready(url)
        assert body["phase"] == "SHUTTING_DOWN" and body["checks"]["not_shutting_down"] is False
        assert get(url + "/healthz")[0] == 200
        held["shutdown"].set()
        stopper.join(60)
        with pytest.raises(OSError):  # stopped with the broker
            get(url + "/healthz", timeout=2)
    finally:
        held["load"].set()
        held["shutdown"].set()
        starter.join(60)
        broker.stop()


def _serve(log_dir: Path, ops_port: int, stderr: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kbroker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={log_dir}", "--override", f"operations.listener=127.0.0.1:{ops_port}"],
        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, start_new_session=True)


def test_ready_after_recovery_from_a_crash(tmp_path: Path) -> None:
    """kbroker serve, SIGKILLed after writes, starts again: ready once recovered, and the
    recovery shows in /metrics."""
    log_dir, port = tmp_path / "logs", free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "broker.log", "ab") as out:
        proc = _serve(log_dir, port, out)
        try:
            wait_until(lambda: _ready_or_none(url) == 200, "the first start to be ready")
            bootstrap = json.loads(get(url + "/api/overview")[1])["bootstrap_servers"]
            producer = Producer({"bootstrap.servers": bootstrap})
            for i in range(200):
                producer.produce("crash", value=b"r%d" % i)
            assert producer.flush(30) == 0
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            proc = _serve(log_dir, port, out)
            wait_until(lambda: _ready_or_none(url) == 200, "the restart to be ready")
            samples = scrape(url)
            assert (value(samples, "kbroker_log_manager_recovered_logs") or 0) >= 1
            assert value(samples, "kafka_log_log_logendoffset", topic="crash",
                         partition="0") == 200
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def _ready_or_none(url: str) -> int | None:
    try:
        return get(url + "/readyz", timeout=2)[0]
    except OSError:
        return None
