"""What cluster fault tests run and check: an idempotent acks=all producer workload over
several partitions, reading partitions back with their offsets, and the exactly-once check.

The workload writes to every partition of a topic in turn; a record's value is its
sequence number within its partition (b"17"). The delivery reports give, per
partition, the (sequence, offset) pairs acknowledged. After the faults, every
acknowledged record must be read back at its offset, exactly once, and the sequence
numbers read from a partition must increase (order kept, nothing duplicated; records
that were never acknowledged may be there too).

Nothing here sleeps to wait for an event: support.wait_until polls a condition with a
deadline. (support.ProducerRun writes one partition and keeps no offsets; this one spreads
its records over partitions and keeps where each landed.)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kbroker.records.record_iter import Batch

from .support import wait_until

# librdkafka's debug contexts for the workload's producer (e.g. "eos,topic,protocol"): its
# log goes to the test's stderr, kept with a failure's output
DEBUG = os.environ.get("KBROKER_RDKAFKA_DEBUG", "")


# -- the producer workload ------------------------------------------------------------------------
@dataclass
class Acknowledged:
    """Delivery reports of one partition, in the order they came."""

    records: list[tuple[int, int | None]] = field(default_factory=list)  # (sequence, offset or None)
    times: list[float] = field(default_factory=list)  # monotonic time of each report


class ProducerWorkload:
    """An idempotent acks=all confluent-kafka producer on its own thread, writing
    `rate` records a second spread over the topic's partitions. See the module docstring."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 200.0,
                 config: Mapping[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 300000,  # never give a record up while the test runs
            "request.timeout.ms": 10000,  # a leader cut off answers nothing: retry elsewhere
            "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100,
            "retry.backoff.max.ms": 500,
            **({"debug": DEBUG} if DEBUG else {}),
            **(config or {}),
        })
        self.acked: dict[int, Acknowledged] = {p: Acknowledged() for p in range(partitions)}
        self.errors: list[str] = []
        self.fatal: str | None = None
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer-workload", daemon=True)

    def start(self) -> ProducerWorkload:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._produce()
        except KafkaException as e:  # a fatal error (the idempotent producer gave up)
            with self._lock:
                self.fatal = str(e)
                self.errors.append(f"fatal: {e}")

    def _produce(self) -> None:
        seqs = [0] * self.partitions
        interval = 1.0 / self.rate
        next_send = time.monotonic()
        while not self._stop.is_set():
            partition = self.sent % self.partitions
            seq = seqs[partition]
            try:
                self.producer.produce(self.topic, str(seq).encode(), partition=partition,
                                      on_delivery=self._delivered(partition, seq))
            except BufferError:
                self.producer.poll(0.05)
                continue
            seqs[partition] += 1
            self.sent += 1
            next_send += interval
            self.producer.poll(max(0.0, next_send - time.monotonic()))

    def _delivered(self, partition: int, seq: int) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            now = time.monotonic()
            with self._lock:
                if err is not None:
                    self.errors.append(f"partition {partition} sequence {seq}: {err}")
                    return
                acked = self.acked[partition]
                acked.records.append((seq, msg.offset()))
                acked.times.append(now)
        return report

    def acked_count(self) -> int:
        with self._lock:
            assert self.fatal is None, f"the producer failed: {self.fatal}"
            return sum(len(a.records) for a in self.acked.values())

    def wait_acked(self, more: int, timeout: float, what: str = "") -> None:
        """Until `more` records beyond those acknowledged now are acknowledged."""
        target = self.acked_count() + more
        wait_until(lambda: self.acked_count() >= target,
                   what or f"{more} more acknowledged records", timeout)

    def wait_all_partitions_acked(self, after: float, timeout: float) -> float:
        """Until every partition has an acknowledgement later than `after` (monotonic);
        the time the last of them came."""
        def latest() -> float | None:
            with self._lock:
                assert self.fatal is None, f"the producer failed: {self.fatal}"
                last = [a.times[-1] if a.times and a.times[-1] > after else None
                        for a in self.acked.values()]
            return None if None in last else max(t for t in last if t is not None)
        found = wait_until(latest, "an acknowledgement on every partition", timeout)
        assert isinstance(found, float)
        return found

    def largest_gap(self, since: float) -> float:
        """The longest time without any acknowledgement after `since` (a failover's cost)."""
        with self._lock:
            times = sorted(t for a in self.acked.values() for t in a.times if t >= since)
        if not times:
            return 0.0
        gaps = [times[0] - since] + [b - a for a, b in zip(times, times[1:], strict=False)]
        return max(gaps)

    def describe(self) -> str:
        """Where the workload stands, for a failure message."""
        now = time.monotonic()
        with self._lock:
            parts = [f"partition {p}: {len(a.records)} acknowledged, the last "
                     f"{now - a.times[-1]:.1f} s ago" if a.times else f"partition {p}: none"
                     for p, a in self.acked.items()]
            errors = self.errors[-3:]
        return f"{self.sent} sent; {'; '.join(parts)}; last errors {errors}"

    def stop(self, timeout: float = 120.0) -> None:
        """Stop sending and wait until every record sent has its delivery report."""
        self._stop.set()
        self._thread.join(timeout)
        assert self.fatal is None, f"the producer failed: {self.fatal}"
        remaining = self.producer.flush(timeout)
        if remaining:
            raise AssertionError(f"{remaining} records still unacknowledged after {timeout:.0f} s")


# -- reading back and checking ----------------------------------------------------------------------
def high_watermark(bootstrap: str, topic: str, partition: int, timeout: float = 30.0) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}"})
    try:
        _low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition),
                                                    timeout=timeout)
        return int(high)
    finally:
        consumer.close()


def read_partition(bootstrap: str, topic: str, partition: int, timeout: float = 60.0
                   ) -> list[tuple[int, bytes]]:
    """Every record of the partition below its high watermark: (offset, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        deadline = time.monotonic() + timeout
        _low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition),
                                                    timeout=timeout)
        consumer.assign([KafkaTopicPartition(topic, partition, 0)])
        out: list[tuple[int, bytes]] = []
        next_offset = 0
        while next_offset < high:
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic}-{partition}: at offset {next_offset} of "
                                     f"{high} after {timeout:.0f} s")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.value()))
            next_offset = msg.offset() + 1
        return out
    finally:
        consumer.close()


def check_acknowledged(acked: Mapping[int, Acknowledged],
                       read: Mapping[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged record is read at the offset its delivery report gave, and
    acknowledged records follow each other in the order they were sent.

    A report may carry no offset (None): librdkafka acknowledges a record it was about to
    send again "implicitly" when a later batch of the partition succeeds
    (rd_kafka_dr_implicit_ack: the broker took the later sequence, so it holds the earlier
    one), without learning where it is. Such a record must be read after the acknowledged
    record before it; its first copy there is where the order is checked."""
    for partition, acknowledged in acked.items():
        at_offset = dict(read[partition])
        offsets_of: dict[bytes, list[int]] = {}
        for offset, value in read[partition]:
            offsets_of.setdefault(value, []).append(offset)
        placed: list[tuple[int, int]] = []  # (sequence, offset), in report order
        for seq, offset in acknowledged.records:
            expected = str(seq).encode()
            if offset is None:
                after = max((o for _s, o in placed if _s < seq), default=-1)
                found = [o for o in offsets_of.get(expected, []) if o > after]
                assert found, (f"partition {partition}: sequence {seq}, acknowledged without an "
                               f"offset, is not in the log after offset {after}")
                offset = found[0]
            else:
                value = at_offset.get(offset)
                assert value == expected, (
                    f"partition {partition}: acknowledged sequence {seq} at offset {offset}, "
                    f"read {value!r} there")
            placed.append((seq, offset))
        in_log_order = [seq for seq, _offset in sorted(placed, key=lambda r: r[1])]
        assert in_log_order == sorted(in_log_order), (
            f"partition {partition}: acknowledged records are out of order in the log")


def check_exactly_once(acked: Mapping[int, Acknowledged], read: Mapping[int, list[tuple[int, bytes]]]
                       ) -> dict[int, int]:
    """The module docstring's invariant; returns the records read per partition."""
    check_acknowledged(acked, read)
    for partition, records in read.items():
        seqs = [int(v) for _o, v in records]
        for i in range(1, len(seqs)):
            assert seqs[i] > seqs[i - 1], (
                f"partition {partition}: sequence {seqs[i]} at offset {records[i][0]} follows "
                f"{seqs[i - 1]} (a duplicate or a reordering)")
    return {p: len(r) for p, r in read.items()}


@dataclass(frozen=True)
class LoggedRecord:
    """A workload record as a replica's log holds it, with its batch's producer epoch."""

    offset: int
    producer_epoch: int
    sequence: int


def logged_records(batches: list[Batch], high_watermark: int) -> list[LoggedRecord]:
    return [LoggedRecord(r.offset, b.header.producer_epoch, int(r.value or b"-1"))
            for b in batches if b.header.base_offset < high_watermark
            for r in b.records() if r.offset < high_watermark]


def check_idempotent_log(partition: int, acknowledged: Acknowledged,
                         records: list[LoggedRecord]) -> int:
    """The broker's side of exactly once, from a replica's log: within one producer
    epoch, sequences strictly increase (no duplicate, no reordering); a record may appear
    again only in a later producer epoch, its earlier copies never acknowledged. That is
    the client's doing: librdkafka's idempotent producer bumps its epoch to recover
    from a sequence gap on any partition (KIP-360) and sends again, with new sequence
    numbers, the records whose outcome it did not know (a request that timed out, or
    whose broker died) even if they had been written; Kafka brokers cannot tell those
    copies apart either. Returns how many such copies the log holds."""
    last_in_epoch: dict[int, LoggedRecord] = {}
    copies: dict[int, list[LoggedRecord]] = {}
    for r in records:
        previous = last_in_epoch.get(r.producer_epoch)
        assert previous is None or r.sequence > previous.sequence, (
            f"partition {partition}: sequence {r.sequence} at offset {r.offset} follows "
            f"{previous.sequence} at offset {previous.offset} in producer epoch "
            f"{r.producer_epoch} (a duplicate or a reordering)")
        last_in_epoch[r.producer_epoch] = r
        copies.setdefault(r.sequence, []).append(r)
    acked_offsets = {offset for _seq, offset in acknowledged.records}
    resent = 0
    for seq, found in copies.items():
        if len(found) == 1:
            continue
        epochs = [r.producer_epoch for r in found]
        assert epochs == sorted(set(epochs)), (
            f"partition {partition}: sequence {seq} at offsets {[r.offset for r in found]} "
            f"in producer epochs {epochs}")
        early = [r.offset for r in found[:-1] if r.offset in acked_offsets]
        assert not early, (f"partition {partition}: sequence {seq} acknowledged at {early} and "
                           f"written again at {found[-1].offset}")
        resent += len(found) - 1
    return resent
