"""How much a consumer's Fetch carries: the client's limits, the broker's fetch.max.bytes
(KIP-541), fetch.partition.response.max.records (kbroker's step per partition) and
fetch.response.max.records (kbroker's record budget of a whole response).

Raw requests show the sizes exactly; a confluent-kafka consumer with throughput settings
then reads everything in order through the steps.
"""

from __future__ import annotations

import uuid

import pytest
from batches import decode_batches, values_batch
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode

from .test_wire import create_topic, fetch_request, produce
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

STEP = 20  # fetch.partition.response.max.records in these tests
BIG = 10 << 20  # what a throughput-tuned client asks per partition and per response


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {"num.partitions": "2", "message.max.bytes": "200000",
            "fetch.partition.response.max.records": str(STEP)}


@pytest.fixture
def client(kbroker_broker: Broker):
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        yield c


def fill(c: WireClient, topic: str, partition: int, batches: int, records: int, size: int) -> list[bytes]:
    out = []
    for i in range(batches):
        batch = values_batch(records, size, prefix=b"p%d-b%d-" % (partition, i))
        resp = produce(c, topic, partition, batch)
        assert resp.error_code == ErrorCode.NONE
        out.append(batch)
    return out


def fetched(c: WireClient, topic: str, offsets: dict[int, int], **kw: object) -> dict[int, bytes]:
    resp = c.call(fetch_request(topic, offsets, **kw), 12)
    assert resp.error_code == ErrorCode.NONE
    parts = resp.responses[0].partitions
    assert all(p.error_code == ErrorCode.NONE for p in parts)
    return {p.partition_index: bytes(p.records) for p in parts}


def records_in(data: bytes) -> list[int]:
    return [o for _base, _epoch, recs in decode_batches(data) for o, _t, _k, _v in recs]


def test_a_partition_answers_in_steps_of_whole_batches(client: WireClient) -> None:
    topic = f"steps-{uuid.uuid4().hex[:6]}"
    create_topic(client, topic)
    for p in (0, 1):
        fill(client, topic, p, batches=10, records=5, size=1000)  # 50 records each
    got = fetched(client, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=BIG)
    for p in (0, 1):
        # Whole batches (no partial one at the end), at most STEP records.
        offsets = records_in(got[p])
        assert offsets == list(range(len(offsets))) and 5 <= len(offsets) <= STEP, (p, offsets)
    # Where the client's bytes come first, they bound the answer, as in Kafka.
    small = fetched(client, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=7_000)
    assert all(0 < len(small[p]) <= 7_000 for p in (1,))
    # Step after step, every record once, in order, and the tail (fewer than a step) whole.
    offset, seen = 0, []
    while offset < 50:
        data = fetched(client, topic, {0: offset}, max_bytes=BIG, pmax=BIG)[0]
        step = [o for o in records_in(data) if o >= offset]
        assert step, "a step must hold at least one whole batch"
        seen += step
        offset = seen[-1] + 1
    assert seen == list(range(50))
    tail = records_in(fetched(client, topic, {0: 35}, max_bytes=BIG, pmax=BIG)[0])
    assert tail == list(range(35, 50))


def test_a_batch_of_more_records_than_a_step_comes_whole_in_any_partition(client: WireClient) -> None:
    topic = f"big-{uuid.uuid4().hex[:6]}"
    create_topic(client, topic)
    for p in (0, 1):
        fill(client, topic, p, batches=3, records=STEP + 10, size=100)
    got = fetched(client, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=BIG)
    for p in (0, 1):
        assert records_in(got[p]) == list(range(STEP + 10)), p


@pytest.fixture
def kafka_sized_broker(tmp_path) -> Broker:
    """Steps off (Kafka's sizes) and the broker's fetch.max.bytes at 150 KB."""
    yield from _started(tmp_path, {"fetch.response.max.records": "0", "fetch.max.bytes": "150000"})


def _started(tmp_path, config: dict[str, str]):
    broker = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                     "num.partitions": "2", "fetch.partition.response.max.records": "0", **config})
    broker.start()
    yield broker
    broker.stop()


def test_step_zero_answers_as_kafka_does(kafka_sized_broker: Broker) -> None:
    with WireClient(kafka_sized_broker.bootstrap_servers) as c:
        topic = "kafka-sizes"
        create_topic(c, topic)
        for p in (0, 1):
            fill(c, topic, p, batches=40, records=5, size=1000)  # ~200 KB each
        got = fetched(c, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=100_000)
        assert len(got[0]) == 100_000  # up to the client's limit, a partial batch at the end
        # The broker's fetch.max.bytes bounds the response whatever the client asks (KIP-541).
        assert len(got[1]) == 50_000


def test_a_throughput_tuned_consumer_reads_everything_in_order(kbroker_broker: Broker) -> None:
    topic = f"tuned-{uuid.uuid4().hex[:6]}"
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        create_topic(c, topic)
        for p in (0, 1):
            fill(c, topic, p, batches=60, records=20, size=100)
    offsets, values = read_all(kbroker_broker, topic, 1200)
    for p in (0, 1):
        assert offsets[p] == list(range(1200))
        assert values[p][0].startswith(b"p%d-b0-0" % p) and values[p][-1].startswith(b"p%d-b59-19" % p)


def read_all(broker: Broker, topic: str, per_partition: int) -> tuple[dict[int, list[int]], dict[int, list[bytes]]]:
    """Offsets and values of partitions 0 and 1 as a throughput-tuned confluent-kafka consumer reads them."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"tuned-{topic}",
                         "fetch.max.bytes": BIG, "max.partition.fetch.bytes": BIG,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        offsets: dict[int, list[int]] = {0: [], 1: []}
        values: dict[int, list[bytes]] = {0: [], 1: []}
        while sum(len(v) for v in offsets.values()) < 2 * per_partition:
            msgs = consumer.consume(1000, timeout=10)
            assert msgs, "the consumer stopped getting records"
            for m in msgs:
                assert m.error() is None, m.error()
                offsets[m.partition()].append(m.offset())
                values[m.partition()].append(m.value())
        return offsets, values
    finally:
        consumer.close()


BUDGET = 12  # fetch.response.max.records in the tests below


@pytest.fixture
def budget_broker(tmp_path) -> Broker:
    """A record budget per response, no step per partition."""
    yield from _started(tmp_path, {"fetch.response.max.records": str(BUDGET)})


def test_a_response_shares_its_record_budget_over_its_partitions(budget_broker: Broker) -> None:
    with WireClient(budget_broker.bootstrap_servers) as c:
        topic = "budget"
        create_topic(c, topic)
        for p in (0, 1):
            fill(c, topic, p, batches=10, records=5, size=1000)  # 50 records each
        resp = c.call(fetch_request(topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=BIG), 12)
        first, second = resp.responses[0].partitions
        assert first.error_code == second.error_code == ErrorCode.NONE
        # The first partition takes what the budget allows in whole batches; the second
        # what is left, at most a batch beyond it.
        offsets = records_in(bytes(first.records))
        assert offsets == list(range(len(offsets))) and 5 <= len(offsets) <= BUDGET, offsets
        assert len(offsets) + len(records_in(bytes(second.records))) <= BUDGET + 5
        assert second.high_watermark == 50
        # The client's next Fetch names the other partition first (librdkafka rotates): it
        # gets the budget.
        got = fetched(c, topic, {1: 0, 0: len(offsets)}, max_bytes=BIG, pmax=BIG)
        assert 5 <= len(records_in(got[1])) <= BUDGET
        # A batch larger than the budget still comes whole; the partitions after it are not
        # read this time, yet one out of range answers so as a read would.
        big = f"budget-big-{uuid.uuid4().hex[:6]}"
        create_topic(c, big)
        for p in (0, 1):
            fill(c, big, p, batches=2, records=BUDGET * 3, size=10)
        got = fetched(c, big, {0: 0, 1: 0}, max_bytes=BIG, pmax=BIG)
        assert records_in(got[0]) == list(range(BUDGET * 3)) and got[1] == b""
        resp = c.call(fetch_request(big, {0: 0, 1: 999}, max_bytes=BIG, pmax=BIG), 12)
        first, second = resp.responses[0].partitions
        assert first.error_code == ErrorCode.NONE and records_in(bytes(first.records))
        assert second.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and second.high_watermark == BUDGET * 6
        # A partition cut short by the client's bytes is charged the records it can hold,
        # not the whole budget: the other partition still gets its bytes.
        small = f"budget-small-{uuid.uuid4().hex[:6]}"
        create_topic(c, small)
        for p in (0, 1):
            fill(c, small, p, batches=10, records=1, size=1000)
        got = fetched(c, small, {0: 0, 1: 0}, max_bytes=BIG, pmax=3_000)
        assert len(got[0]) == len(got[1]) == 3_000


def test_budget_zero_leaves_every_partition_its_bytes(kafka_sized_broker: Broker) -> None:
    with WireClient(kafka_sized_broker.bootstrap_servers) as c:
        topic = "no-budget"
        create_topic(c, topic)
        for p in (0, 1):
            fill(c, topic, p, batches=10, records=5, size=1000)
        got = fetched(c, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=20_000)
        assert all(len(got[p]) == 20_000 for p in (0, 1))


def test_a_tuned_consumer_reads_everything_through_the_budget(budget_broker: Broker) -> None:
    topic = "budget-consumer"
    with WireClient(budget_broker.bootstrap_servers) as c:
        create_topic(c, topic)
        for p in (0, 1):
            fill(c, topic, p, batches=40, records=5, size=100)
    offsets, _ = read_all(budget_broker, topic, 200)
    assert offsets == {0: list(range(200)), 1: list(range(200))}


# min_bytes above everything there is and a minute's wait: a request left parked would not
# be answered within WireClient's 10 s socket timeout.
PARKED = {"min_bytes": BIG, "max_wait_ms": 60_000}


def test_a_fetch_the_budget_cut_is_answered_without_waiting_for_min_bytes(budget_broker: Broker) -> None:
    with WireClient(budget_broker.bootstrap_servers) as c:
        topic = "budget-min-bytes"
        create_topic(c, topic)
        fill(c, topic, 0, batches=10, records=5, size=1000)  # 50 records, ~50 KB
        got = fetched(c, topic, {0: 0, 1: 0}, max_bytes=BIG, pmax=BIG, **PARKED)
        assert 5 <= len(records_in(got[0])) <= BUDGET and got[1] == b""


def test_a_fetch_the_step_cut_is_answered_without_waiting_for_min_bytes(client: WireClient) -> None:
    topic = f"step-min-bytes-{uuid.uuid4().hex[:6]}"
    create_topic(client, topic)
    fill(client, topic, 0, batches=10, records=5, size=1000)
    got = fetched(client, topic, {0: 0}, max_bytes=BIG, pmax=BIG, **PARKED)
    assert 5 <= len(records_in(got[0])) <= STEP

