"""A client on an SSL listener that sends Fetch requests and never reads the answers
(`kbroker serve` in a subprocess): the broker stops reading its requests once its unsent
responses pass the connection's bound (MAX_QUEUED_OUTPUT, the same as on PLAINTEXT, which
the same test checks), encrypts at most one TLS_CHUNK of them at a time, so its memory
stays bounded however many Fetches the client pipelines (with the bound removed, three
such readers grew it by 1.2 GB); everyone else is served meanwhile; and after
connections.max.idle.ms with output that does not move the connection is closed, as on
PLAINTEXT (test_slice_lifetime.py)."""

from __future__ import annotations

import fcntl
import re
import ssl
import struct
import termios
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.server.response_writer import INLINE_SLICE_BYTES

from .test_idle_connections import rss_kb
from .wire import WireClient, encode_request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 64
RECORD = 1000
RECORDS = 20  # per partition: each partition answers 16 KB, read into memory (inline)
FETCHES = 2000  # pipelined by a slow reader: 2 GB of answers held if nothing stopped it


def _broker(broker_factory: Any, pki: Any, idle_ms: int) -> tuple[Any, str]:
    broker = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("server")),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        "connections.max.idle.ms": str(idle_ms)}).start()
    port = int(re.search(r"SSL://127.0.0.1:(\d+)", broker.stderr_path.read_text()).group(1))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic("many", PARTITIONS, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                  "compression.type": "none", "enable.idempotence": False})
    for i in range(RECORDS * PARTITIONS):
        p.produce("many", value=b"B" * RECORD, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return broker, f"127.0.0.1:{port}"


def _fetch(correlation_id: int) -> bytes:
    """A Fetch of every partition, at most INLINE_SLICE_BYTES from each: its answer (about
    1 MB) is bytes in the broker's memory, not file slices."""
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, topics=[
        FetchRequest.FetchTopic(topic="many", partitions=[
            FetchRequest.FetchPartition(partition=i, fetch_offset=0,
                                        partition_max_bytes=INLINE_SLICE_BYTES)
            for i in range(PARTITIONS)])])
    return encode_request(request, 4, correlation_id)


def _stalled_reader(bootstrap: str, ctx: ssl.SSLContext | None,
                    closed_ok: bool = False) -> tuple[WireClient, int]:
    """A client (TLS with a context) that pipelines up to FETCHES Fetches, reads nothing, and waits until the
    broker's sending has stalled: the client, and how many Fetches it got out. With
    `closed_ok`, a broker that closes the connection while the client is still sending
    (a short idle bound on a loaded machine) returns the client as it is."""
    c = WireClient(bootstrap, timeout=30, rcvbuf=16384, ssl_context=ctx)
    c.sock.settimeout(0.5)
    sent = 0
    deadline = time.monotonic() + 20
    try:
        while sent < FETCHES and time.monotonic() < deadline:
            c.sock.sendall(_fetch(sent + 1))
            sent += 1
    except TimeoutError:  # the broker stopped reading: its receive window is full
        pass
    except (ConnectionError, ssl.SSLError):
        if not closed_ok:
            raise
        return c, sent
    c.sock.settimeout(30)
    last = -1
    deadline = time.monotonic() + 20
    while True:  # the receive queue fills and then stops growing: the broker's send is stuck
        queued = struct.unpack("i", fcntl.ioctl(c.sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        if queued > 0 and queued == last:
            return c, sent
        assert time.monotonic() < deadline, "the answers never started"
        last = queued
        time.sleep(0.2)


@pytest.mark.parametrize("protocol", ["SSL", "PLAINTEXT"])
def test_a_reader_that_never_reads_holds_bounded_memory(broker_factory: Any, pki: Any,
                                                        protocol: str) -> None:
    broker, ssl_bootstrap = _broker(broker_factory, pki, idle_ms=600_000)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    bootstrap, reader_ctx = ((ssl_bootstrap, ctx) if protocol == "SSL"
                             else (broker.bootstrap_servers, None))
    with WireClient(bootstrap, timeout=30, ssl_context=reader_ctx) as warm:  # one whole answer
        warm.send_raw(_fetch(1))
        assert len(warm.recv_frame()) > PARTITIONS * INLINE_SLICE_BYTES // 2
    before = rss_kb(broker.proc.pid)
    readers = []
    try:
        for _ in range(3):
            readers.append(_stalled_reader(bootstrap, reader_ctx))
        assert sum(sent for _, sent in readers) > 3 * 64  # more than the pipelining bound
        # each reader's receive queue has stopped growing (_stalled_reader): the broker
        # holds what it will hold
        grown_mb = (rss_kb(broker.proc.pid) - before) / 1024
        # each holds at most MAX_QUEUED_OUTPUT (8 MB) and one answer; 3.6 GB without a bound
        assert grown_mb < 48, f"3 stalled {protocol} readers grew the broker by {grown_mb:.0f} MB"
        with WireClient(ssl_bootstrap, timeout=10, ssl_context=ctx) as other:  # still served
            assert other.call(ApiVersionsRequest(), 0).error_code == 0
            other.send_raw(_fetch(7))
            assert len(other.recv_frame()) > PARTITIONS * INLINE_SLICE_BYTES // 2
        with WireClient(broker.bootstrap_servers, timeout=10) as plain:
            assert plain.call(ApiVersionsRequest(), 0).error_code == 0
    finally:
        for c, _ in readers:
            c.close()


def test_a_tls_reader_that_never_reads_is_disconnected(broker_factory: Any, pki: Any) -> None:
    broker, ssl_bootstrap = _broker(broker_factory, pki, idle_ms=1000)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    reader, _ = _stalled_reader(ssl_bootstrap, ctx, closed_ok=True)
    try:
        deadline = time.monotonic() + 30
        while "read none of" not in broker.output():
            assert time.monotonic() < deadline, "the stalled TLS connection was never closed"
            time.sleep(0.1)
        reader.sock.settimeout(10)
        with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
            while True:  # what was in flight, then the close
                if not reader.sock.recv(1 << 20):
                    raise ConnectionError("closed")
    finally:
        reader.close()
    with WireClient(broker.bootstrap_servers, timeout=10) as plain:
        assert plain.call(ApiVersionsRequest(), 0).error_code == 0


