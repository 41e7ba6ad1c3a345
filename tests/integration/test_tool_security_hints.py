"""A tool pointed at a listener that wants TLS or SASL, without settings: after the
transport failure it says what the listener wants and which option sets it
(kbroker.tools.listener_probe), instead of librdkafka's `_TRANSPORT` alone; a port where
nothing listens gets no such line."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from kbroker.broker import Broker

from .conftest import ROOT
from .security_support import endpoint

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _kbroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize("listener", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_topics_list_says_the_listener_wants_tls_or_sasl(secure_broker: Broker, listener: str) -> None:
    address = endpoint(secure_broker, listener)
    done = _kbroker("topics", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1
    assert (f"kbroker topics: the listener at {address} closed the connection because the "
            f"client did not start") in done.stderr, done.stderr
    assert f"it is a {listener} listener" in done.stderr
    assert "kbroker topics connects with PLAINTEXT only" in done.stderr


def test_acls_names_its_command_config_option(secure_broker: Broker) -> None:
    address = endpoint(secure_broker, "SASL_PLAINTEXT")
    done = _kbroker("acls", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1
    assert ("it is a SASL_PLAINTEXT listener. Give the client settings with --command-config "
            "FILE (security.protocol=SASL_PLAINTEXT, sasl.mechanism, sasl.jaas.config)") in done.stderr


def test_transactions_over_tls_says_so(secure_broker: Broker) -> None:
    address = endpoint(secure_broker, "SASL_SSL")
    done = _kbroker("transactions", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1 and "it is a SASL_SSL listener" in done.stderr, done.stderr


def test_a_plaintext_listener_and_a_dead_port_get_no_hint(secure_broker: Broker) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # bound, never listening
        done = _kbroker("topics", "list", "--bootstrap-server", dead, "--timeout", "3")
    assert done.returncode == 1 and "closed the connection" not in done.stderr
    ok = _kbroker("topics", "list", "--bootstrap-server", endpoint(secure_broker, "PLAINTEXT"))
    assert ok.returncode == 0 and "listener" not in ok.stderr
