"""The network harness (network.py) itself: cuts drop what they should and nothing else,
remove() leaves nothing behind (processes killed by PID, namespaces and links gone), and
remove_leftovers() cleans up after a run that died, but not after one that still runs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from . import network as network_module
from .network import Network, made_network, remove_leftovers, unavailable
from .support import wait_until

pytestmark = pytest.mark.timeout(120)

SERVER = ("import socket\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('{address}', 9092)); s.listen()\n"
          "while True:\n"
          "    c, _ = s.accept(); c.sendall(b'hi'); c.close()\n")
CLIENT = ("import socket\n"
          "try:\n"
          "    print(socket.create_connection(('{address}', 9092), timeout=1).recv(2).decode())\n"
          "except OSError as e:\n"
          "    print(type(e).__name__)\n")


@pytest.fixture
def net() -> Iterator[Network]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with made_network([1, 2, 3]) as made:
        yield made


def in_namespace(namespace: str | None, code: str) -> list[str]:
    args = [sys.executable, "-c", code]
    return ["ip", "netns", "exec", namespace, *args] if namespace else args


def reach(net: Network, source: int | None, target: int) -> str:
    """What a client in broker `source`'s namespace (None: the test's) gets from `target`."""
    ns = net.namespace(source) if source is not None else None
    done = subprocess.run(in_namespace(ns, CLIENT.format(address=net.address(target))),
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


def test_cuts_isolate_and_heal(net: Network) -> None:
    server = subprocess.Popen(in_namespace(net.namespace(1), SERVER.format(address=net.address(1))))
    try:
        wait_until(lambda: reach(net, None, 1) == "hi", "the server in broker 1's namespace")
        assert reach(net, 2, 1) == "hi" and reach(net, 3, 1) == "hi"
        net.cut(1, 2)
        assert (reach(net, 2, 1), reach(net, 3, 1), reach(net, None, 1)) == ("TimeoutError", "hi", "hi")
        net.heal()
        net.isolate(1)
        assert (reach(net, 2, 1), reach(net, 3, 1), reach(net, None, 1)) == ("TimeoutError",) * 3
        net.heal()
        assert reach(net, 2, 1) == "hi" and reach(net, None, 1) == "hi"
    finally:
        net.remove()  # kills the server, by the PIDs in its namespace
        server.wait(10)
    left = namespaces()
    assert all(ns not in left for ns in [net.router, *map(net.namespace, net.broker_ids)])
    assert net.host_link not in links()


def test_leftovers_of_a_dead_run_are_removed_and_a_live_run_is_left_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    dead = subprocess.Popen(["true"])
    dead.wait()
    monkeypatch.setattr(network_module.os, "getpid", lambda: dead.pid)
    left = Network([1]).create()  # as if made by the run that has died
    monkeypatch.undo()
    sleeper = subprocess.Popen(["ip", "netns", "exec", left.namespace(1), "sleep", "600"])
    live = Network([1]).create()  # this run's: left alone
    try:
        removed = remove_leftovers()
        assert sorted(removed) == sorted([left.namespace(1), left.router])
        assert live.router in namespaces() and live.host_link in links()
        assert sleeper.wait(10) == -9  # SIGKILLed by its PID
        deadline = time.monotonic() + 10
        while left.host_link in links() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left.host_link not in links()
    finally:
        live.remove()
    assert live.router not in namespaces()
