"""A flood of connections that never finish their TLS or SASL handshake on a SASL_SSL
listener (`kbroker serve` in a subprocess): each costs the broker a bounded amount of
memory, a normal client is served all the while, and the broker closes them all once
they have not authenticated within its 10 s bound."""

from __future__ import annotations

import os
import re
import resource
import socket
import ssl
import time
from typing import Any

import pytest

from kbroker.protocol.messages.api_versions import ApiVersionsRequest

from .security_support import PLAIN_JAAS
from .test_idle_connections import rss_kb
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONNECTIONS = 400


def test_a_handshake_flood_is_bounded_and_closed(broker_factory: Any, pki: Any) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * CONNECTIONS + 100:
        pytest.skip("open-file limit too low for the client side")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2 * CONNECTIONS + 100), hard))
    broker = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("server")),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}).start()
    pid = broker.proc.pid
    port = int(re.search(r"SASL_SSL://127.0.0.1:(\d+)", broker.stderr_path.read_text()).group(1))
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with WireClient(f"127.0.0.1:{port}", ssl_context=ctx) as warm:  # shared buffers, first use
        assert warm.call(ApiVersionsRequest(), 0).error_code == 0
    before = rss_kb(pid)
    socks: list[socket.socket] = []
    try:
        for i in range(CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2:  # half send the start of a ClientHello and stall; half send nothing
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(40))
            socks.append(s)
        time.sleep(1)
        per_connection = (rss_kb(pid) - before) * 1024 / CONNECTIONS
        assert per_connection <= 64 * 1024, f"{per_connection:.0f} bytes per pending handshake"
        with WireClient(broker.bootstrap_servers) as c:  # everyone else is served
            assert c.call(ApiVersionsRequest(), 0).error_code == 0
        deadline = time.monotonic() + 20
        closed = 0
        for s in socks:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                if s.recv(4096) == b"":
                    closed += 1
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
        assert closed == CONNECTIONS
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
