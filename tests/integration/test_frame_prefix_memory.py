"""A size prefix alone costs the broker little: clients that announce frames as large as
socket.request.max.bytes (100 MB) and send a kilobyte of them make the broker hold memory
in proportion to what they sent (a large frame is received in place, into a buffer that
grows to the announced size as the bytes arrive), not what they announced: when the
buffer was made whole at once, the ten clients here cost 1 GB. On PLAINTEXT and, past the
TLS handshake, on SSL."""

from __future__ import annotations

import os
import re
import socket
import ssl
import struct
from typing import Any

import pytest
from batches import make_batch

from kbroker.protocol.messages.api_versions import ApiVersionsRequest

from .test_idle_connections import rss_kb
from .test_wire import create_topic, fetch_request, produce
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENTS = 10
ANNOUNCED = 104857600  # socket.request.max.bytes' default


def _broker(broker_factory: Any, pki: Any, protocol: str, extra: dict[str, str] | None = None,
            ) -> tuple[Any, str, ssl.SSLContext | None]:
    """A broker with PLAINTEXT and SSL listeners; the bootstrap and TLS context of `protocol`."""
    broker = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("server")),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca), **(extra or {})}).start()
    if protocol == "PLAINTEXT":
        return broker, broker.bootstrap_servers, None
    port = int(re.search(r"SSL://127.0.0.1:(\d+)", broker.stderr_path.read_text()).group(1))
    return broker, f"127.0.0.1:{port}", ssl.create_default_context(cafile=str(pki.ca))


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_announced_frames_cost_what_was_sent(broker_factory: Any, pki: Any, protocol: str) -> None:
    broker, bootstrap, ctx = _broker(broker_factory, pki, protocol)
    with WireClient(bootstrap, ssl_context=ctx) as warm:
        assert warm.call(ApiVersionsRequest(), 0).error_code == 0
    before = rss_kb(broker.proc.pid)
    clients: list[socket.socket] = []
    try:
        for _ in range(CLIENTS):
            c = WireClient(bootstrap, ssl_context=ctx)
            # the prefix, the start of a header and a little of the body
            c.send_raw(struct.pack(">ihhi", ANNOUNCED, 0, 9, 1) + b"x" * 1000)
            clients.append(c.sock)
        # a later client answered: the broker's loop has read what the others sent
        with WireClient(bootstrap, ssl_context=ctx) as other:  # the broker serves on
            assert other.call(ApiVersionsRequest(), 0).error_code == 0
        grown_mb = (rss_kb(broker.proc.pid) - before) / 1024
        assert grown_mb < 64, f"{CLIENTS} announced frames grew the broker by {grown_mb:.0f} MB"
    finally:
        for s in clients:
            s.close()


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_large_produce_frames_arrive_whole(broker_factory: Any, pki: Any, protocol: str) -> None:
    """Frames larger than the first buffer (1 MB) grow it as they arrive: a 7 MB Produce
    of 8 batches is stored byte for byte, on PLAINTEXT and over TLS (decrypted in place)."""
    _, bootstrap, ctx = _broker(broker_factory, pki, protocol, {"message.max.bytes": "2000000"})
    batches = [make_batch([os.urandom(900_000)]) for _ in range(8)]
    with WireClient(bootstrap, timeout=30, ssl_context=ctx) as c:
        create_topic(c, "big")
        assert produce(c, "big", 0, b"".join(batches)).error_code == 0
        fetched = c.call(fetch_request("big", {0: 0}, max_bytes=16 << 20, pmax=16 << 20), 12)
    data = bytes(fetched.responses[0].partitions[0].records)
    assert len(data) == sum(map(len, batches))
    pos = 0
    for i, batch in enumerate(batches):
        chunk = data[pos : pos + len(batch)]
        assert struct.unpack(">q", chunk[:8])[0] == i and chunk[12:] == batch[12:]
        pos += len(batch)
