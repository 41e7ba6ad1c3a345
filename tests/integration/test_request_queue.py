"""queued.max.requests / queued.max.request.bytes: the broker stops reading requests while
it holds that many unanswered (all connections together), as Kafka's network threads
stop while its request channel is full, and reads on once answers make room.

Connection A parks two long-poll Fetches on an empty partition (answered after
max_wait_ms); connection B then sends ApiVersions. With the queue bounded at two
requests (or their bytes), B is read, and answered, only after A's Fetches are
answered; with Kafka's default bound (500) B is answered first.
"""

from __future__ import annotations

import select
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker import Broker
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.fetch import FetchRequest

from .wire import WireClient, encode_request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

WAIT_MS = 1500


def long_poll(topic: str) -> bytes:
    request = FetchRequest(max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return encode_request(request, 4, 1)


def first_answered(broker: Broker) -> str:
    """Park two Fetches on A, send ApiVersions on B: which connection hears back first."""
    bootstrap = broker.bootstrap_servers
    queue = broker.server.request_queue
    with WireClient(bootstrap) as a, WireClient(bootstrap) as b:
        a.send_raw(long_poll("empty") + long_poll("empty"))
        deadline = time.monotonic() + 10
        while queue.requests < 2:  # the broker has read both and holds them (parked)
            assert time.monotonic() < deadline, "the Fetches were never read"
            time.sleep(0.01)
        b.send_raw(encode_request(ApiVersionsRequest(), 0, 7))
        ready, _, _ = select.select([a.sock, b.sock], [], [], 30)
        assert ready, "nothing answered"
        answered = "A" if a.sock in ready else "B"  # A, when B could only follow it
        b.recv_frame()  # B is answered in the end either way
    return answered


@pytest.mark.parametrize("kbroker_config", [
    {"num.partitions": "1", "queued.max.requests": "2"},
    {"num.partitions": "1", "socket.request.max.bytes": "120", "queued.max.request.bytes": "120"},
], ids=["requests", "bytes"])
def test_a_full_request_queue_stops_reading(kbroker_broker: Broker) -> None:
    _create(kbroker_broker.bootstrap_servers)
    assert first_answered(kbroker_broker) == "A"


def test_default_queue_bound_serves_others_at_once(kbroker_broker: Broker) -> None:
    _create(kbroker_broker.bootstrap_servers)
    assert first_answered(kbroker_broker) == "B"


def test_queued_max_request_bytes_below_the_request_limit_is_refused(broker_factory: Any) -> None:
    broker = broker_factory({"queued.max.request.bytes": "1000"})
    with pytest.raises(RuntimeError, match="queued.max.request.bytes"):
        broker.start()


def _create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("empty", 1, 1)]).values():
        f.result(30)
