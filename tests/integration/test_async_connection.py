"""AsyncBrokerConnection (what brokers use to talk to each other) against `kbroker serve`:
pipelined requests each get their own answer, a request that outlives its timeout fails
with REQUEST_TIMED_OUT and closes the connection, a parked Fetch is answered when a
record arrives (its max wait is longer than the test waits for the answer), a connection
the broker drops fails every pending request, a connection reset as it is made is a
failed connect, and answers of megabytes (read into a buffer of their own, as a follower's
Fetch answers are; tens of megabytes: one that grows) come whole and in order among small
ones. A Fetch is known to be parked once the broker's /metrics count its read
(tests.ops.support.partition_reads)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from confluent_kafka import Producer

from kbroker.client.async_connection import AsyncBrokerConnection
from kbroker.client.connection import KafkaClientError
from kbroker.cluster.zookeeper_server import free_port
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.records.record_iter import iter_records
from tests.ops.support import partition_reads

from .conftest import BrokerProcess

TOPIC = "async-conn"
# a parked Fetch's max wait, longer than the test waits for its answer (30 s): an answer
# in time is one that a record woke, not the deadline
PARKED_MS = 120_000


def _with_metrics(broker_factory: type[BrokerProcess]) -> tuple[BrokerProcess, str]:
    """A started broker with its operations listener on, and its URL."""
    port = free_port()
    bp = broker_factory({"operations.listener": f"127.0.0.1:{port}"}).start()  # type: ignore[call-arg]
    return bp, f"http://127.0.0.1:{port}"


async def _parked(url: str, before: float, sent: asyncio.Future[FetchResponse]) -> None:
    """Wait until the broker has read (and parked) the Fetch `sent`: the partition reads of
    TOPIC went up from `before`, read before it was sent."""
    loop = asyncio.get_running_loop()
    for _ in range(3000):  # 60 s
        await asyncio.sleep(0.02)
        assert not sent.done(), "the Fetch was answered before anything arrived"
        if await loop.run_in_executor(None, partition_reads, url, TOPIC) > before:
            return
    raise AssertionError("the broker did not read the Fetch")


def _address(bp: BrokerProcess) -> tuple[str, int]:
    host, port = bp.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def _fetch(offset: int, max_wait_ms: int, max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=max_bytes)])],
        forgotten_topics_data=[], rack_id="")


def _produce(bootstrap: str, count: int, size: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(TOPIC, str(i).encode().ljust(size, b"."), partition=0)
    assert p.flush(30) == 0


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                           allow_auto_topic_creation=True)


def test_pipelined_requests_timeouts_and_parked_fetches(broker_factory: type[BrokerProcess]) -> None:
    broker_process, url = _with_metrics(broker_factory)
    host, port = _address(broker_process)

    async def scenario() -> None:
        conn = await AsyncBrokerConnection.open(host, port, "async-test", 10)
        try:
            # several requests in flight at once, each matched to its own answer
            answers = await asyncio.gather(*(conn.request(_metadata(), 9, 10) for _ in range(5)))
            assert all(a.topics[0].name == TOPIC for a in answers)
            await asyncio.get_running_loop().run_in_executor(
                None, _produce, broker_process.bootstrap_servers, 3)
            # a parked Fetch answered when a record arrives
            before = partition_reads(url, TOPIC)
            parked = asyncio.ensure_future(conn.request(_fetch(3, PARKED_MS), 12, 60))
            await _parked(url, before, parked)
            await asyncio.get_running_loop().run_in_executor(
                None, _produce, broker_process.bootstrap_servers, 1)
            woken: FetchResponse = await asyncio.wait_for(parked, 30)
            assert woken.responses[0].partitions[0].high_watermark == 4
            assert len(woken.responses[0].partitions[0].records or b"") > 0
        finally:
            conn.close()

        # a request that outlives its timeout fails and closes the connection
        conn = await AsyncBrokerConnection.open(host, port, "async-test", 10)
        with pytest.raises(KafkaClientError) as timed_out:
            await conn.request(_fetch(4, 10_000), 12, 0.3)
        assert timed_out.value.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert conn.closed
        with pytest.raises(KafkaClientError):
            await conn.request(_metadata(), 9, 5)

    asyncio.run(asyncio.wait_for(scenario(), 90))


@pytest.mark.parametrize("count", [3000, 20_000])
def test_answers_of_megabytes_come_whole_among_small_ones(broker_factory: type[BrokerProcess],
                                                           count: int) -> None:
    """Fetch answers of ~3 MiB (larger than what one read of the connection takes when no
    large frame is being read: each is read into a buffer of its own over many reads) and
    of ~20 MiB (more than that buffer's first size: it grows as the bytes arrive)
    pipelined between Metadata answers (frames that share a read with a large frame's
    end or beginning): each answer is its own request's, and every record is there."""
    bp = broker_factory().start()  # type: ignore[call-arg]
    host, port = _address(bp)
    size = 1024
    _produce(bp.bootstrap_servers, count, size)
    fetches = 5 if count < 10_000 else 2

    async def scenario() -> list[object]:
        conn = await AsyncBrokerConnection.open(host, port, "async-test", 10)
        try:
            requests = [(_metadata(), 9) if i % 2 else (_fetch(0, 0, 32 << 20), 12)
                        for i in range(2 * fetches - 1)]
            return await asyncio.gather(*(conn.request(r, v, 60) for r, v in requests))
        finally:
            conn.close()

    answers = asyncio.run(asyncio.wait_for(scenario(), 90))
    for i, answer in enumerate(answers):
        if i % 2:
            assert answer.topics[0].name == TOPIC
            continue
        records = answer.responses[0].partitions[0].records
        assert records is not None and len(records) > 3 * size * count // 4
        values = [r.value for r in iter_records(records)]
        assert values == [str(n).encode().ljust(size, b".") for n in range(count)]


def test_a_dropped_connection_fails_its_pending_requests(broker_factory: type[BrokerProcess]) -> None:
    bp, url = _with_metrics(broker_factory)
    host, port = _address(bp)

    async def scenario() -> None:
        conn = await AsyncBrokerConnection.open(host, port, "async-test", 10)
        await conn.request(_metadata(), 9, 10)
        before = partition_reads(url, TOPIC)
        pending = asyncio.ensure_future(conn.request(_fetch(0, 30_000), 12, 60))
        await _parked(url, before, pending)  # the broker holds it when it goes
        await asyncio.get_running_loop().run_in_executor(None, bp.kill)
        with pytest.raises(KafkaClientError) as lost:
            await asyncio.wait_for(pending, 30)
        assert lost.value.error_code == ErrorCode.NETWORK_EXCEPTION
        assert conn.closed

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_a_connection_reset_as_it_is_made_is_a_failed_connect() -> None:
    """A peer that accepts and resets at once (a broker going down): each open either
    connects or fails with KafkaClientError, as a refused connect does; never with the
    OSError of setting up a socket the transport had already closed (EBADF: it reached
    the replica fetcher's catch-all and logged a traceback)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    port = server.getsockname()[1]

    def reset_every_connection() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed: the test is over
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=reset_every_connection, daemon=True).start()

    async def open_many() -> list[str]:
        outcomes = []
        for _ in range(3000):
            try:
                conn = await AsyncBrokerConnection.open("127.0.0.1", port, "reset-test", timeout_s=5)
            except KafkaClientError:
                outcomes.append("failed")
            else:
                conn.close()
                outcomes.append("connected")
        return outcomes

    try:
        outcomes = asyncio.run(asyncio.wait_for(open_many(), 60))
    finally:
        server.close()
    assert len(outcomes) == 3000 and "failed" in outcomes
