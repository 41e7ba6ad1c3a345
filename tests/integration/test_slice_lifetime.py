"""A Fetch response that waits in the broker's output queue keeps the bytes it sliced.

A Fetch of more than the inline limit is sent with sendfile from the segment file.
If the client stops reading mid-response, the slice waits in the connection's
output queue while storage goes on: here the topic is deleted (its files closed at
once: log.segment.delete.delay.ms=0) and a new topic's segments are opened, which
take the lowest free descriptor numbers. The stalled reader must then receive the
deleted topic's bytes or a closed connection, never the new topic's bytes.
A second test: a client that never reads is disconnected after
connections.max.idle.ms, as Kafka's Selector does, so it cannot pin files forever.
"""

from __future__ import annotations

import fcntl
import struct
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.protocol.messages.fetch import FetchRequest

from .wire import WireClient, encode_request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECORD = 100_000
RECORDS = 120  # 12 MB: more than the kernel socket buffers hold (tcp_wmem max 4 MB)


def _produce(bootstrap: str, topic: str, fill: bytes, partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "none",
                  "enable.idempotence": False})
    for i in range(RECORDS):
        p.produce(topic, value=fill * RECORD, partition=i % partitions)
    assert p.flush(30) == 0


def _create(admin: AdminClient, topic: str, partitions: int) -> None:
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def _wait_gone(admin: AdminClient, topic: str) -> None:
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed"
        time.sleep(0.05)


def _stalled_fetch(bootstrap: str, topic: str) -> WireClient:
    """Send a Fetch of the whole partition and read nothing until the send has stalled."""
    c = WireClient(bootstrap, timeout=30, rcvbuf=16384)
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20)])])
    c.send_raw(encode_request(request, 4, 1))
    deadline = time.monotonic() + 20
    last = -1
    while True:  # the receive queue fills and then stops growing: the broker's send is stuck
        queued = struct.unpack("i", fcntl.ioctl(c.sock, termios.FIONREAD, b"\0\0\0\0"))[0]
        if queued > 0 and queued == last:
            return c
        assert time.monotonic() < deadline, "the response never started"
        last = queued
        time.sleep(0.05)


def _read_response(c: WireClient) -> bytes | None:
    """The whole response frame, or None when the broker closed the connection."""
    try:
        return c.recv_frame()
    except (ConnectionError, OSError):
        return None


def test_stalled_fetch_keeps_the_deleted_segments_bytes(broker_factory: Any, tmp_path: Path) -> None:
    broker = broker_factory({"log.segment.delete.delay.ms": "0", "fetch.partition.response.max.records": "0"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    _create(admin, "old", 1)
    _produce(broker.bootstrap_servers, "old", b"O")
    segment = next((broker.log_dir / "old-0").glob("*.log")).read_bytes()
    assert len(segment) > RECORD * RECORDS

    reader = _stalled_fetch(broker.bootstrap_servers, "old")
    try:
        for f in admin.delete_topics(["old"]).values():
            f.result(30)
        _wait_gone(admin, "old")
        _create(admin, "new", 1)  # opens files that take the freed descriptor numbers
        _produce(broker.bootstrap_servers, "new", b"N")

        frame = _read_response(reader)
    finally:
        reader.close()
    if frame is not None:
        assert b"NNNNNNNN" not in frame, "the stalled Fetch sent another topic's bytes"
        assert segment[:RECORD] in frame  # the old records, as they were stored
        assert frame.count(b"O" * 1000) >= RECORDS * (RECORD // 1000) - RECORDS
    # Whatever the reader got, the broker serves on.
    assert "new" in admin.list_topics(timeout=10).topics


def test_reader_that_never_reads_is_disconnected(broker_factory: Any) -> None:
    broker = broker_factory({"connections.max.idle.ms": "1000", "fetch.partition.response.max.records": "0"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    _create(admin, "big", 1)
    _produce(broker.bootstrap_servers, "big", b"B")
    reader = _stalled_fetch(broker.bootstrap_servers, "big")
    try:
        deadline = time.monotonic() + 30
        while "read none of" not in broker.output():
            assert time.monotonic() < deadline, "the stalled connection was never closed"
            time.sleep(0.1)
        assert _read_response(reader) is None  # the response was cut: the connection closed
    finally:
        reader.close()
