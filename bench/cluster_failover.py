"""Failover probes for bench/bench_cluster.py: a paced idempotent acks=all producer, and
the leader as the brokers' Metadata shows it.

One probe kills (SIGKILL) or stops (SIGTERM: a controlled shutdown) the leader of a
one-partition topic (RF 3, min.insync.replicas 2) while the producer runs, and times,
from the signal:

    metadata_leader_s   until a surviving broker's Metadata names another leader
                        (polled every POLL_S over the Kafka protocol)
    resumed_s           until the first record produced after the signal is
                        acknowledged: produce works again (the idempotent producer keeps
                        order, so every earlier record was acknowledged before it)
    stall_s             the longest gap between two acknowledgements around the signal
    exited_s            (SIGTERM) until the broker process exited

The signal comes once the producer has `settle_records` acknowledged, after a random
0-1 s more (`phase_s`), so that it falls anywhere in the clients' periodic timers.

The leader is a broker that is not the controller (an explicit replica assignment puts it
first), so the figure is the common case: the controller itself survives.

The producer is librdkafka's (confluent-kafka), kafka-python's or aiokafka's (`client`).
They learn the new leader differently: librdkafka re-queries the leader of a partition
whose broker is down once a second (from the producer's start), and (2.10 and later)
destroys the handle of a broker that leaves the Metadata, parking that broker's
partitions until its next query, even when the same Metadata names their new leader;
kbroker's Metadata lists a departed broker 3 s more for that reason
(kbroker/cluster/metadata_cache.py). kafka-python asks for metadata when a connect to the
dead leader fails, and those connects back off exponentially. aiokafka retries a send
that cannot reach the leader every retry_backoff_ms (100 ms), asking for metadata each time.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.cluster.local_cluster import Cluster
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse

POLL_S = 0.005
DEADLINE_S = 90.0


class _LibrdkafkaSender:
    """PacedProducer's records through confluent-kafka; delivery reports are served by
    poll() in the producing thread."""

    def __init__(self, paced: PacedProducer) -> None:
        self.paced = paced
        self.producer = Producer({"bootstrap.servers": paced.bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 1, "message.timeout.ms": 120000,
                                  **paced.config})

    def send(self, seq: int, value: bytes) -> bool:
        """Record `seq` handed to the client; False when its queue is full (try later)."""
        try:
            self.producer.produce(self.paced.topic, value, partition=0, on_delivery=self._delivered)
        except BufferError:
            return False
        return True

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.paced.errors.append(str(err))
        else:
            self.paced.acked(int.from_bytes(msg.value()[:8], "big"))

    def idle(self, seconds: float) -> None:
        self.producer.poll(seconds)

    def close(self) -> None:
        self.producer.flush(120)


class _KafkaPythonSender:
    """PacedProducer's records through kafka-python; its sender thread calls back."""

    def __init__(self, paced: PacedProducer) -> None:
        self.paced = paced
        self.producer = KafkaProducer(bootstrap_servers=paced.bootstrap, enable_idempotence=True,
                                      acks="all", linger_ms=1, delivery_timeout_ms=120000,
                                      request_timeout_ms=30000, **paced.config)

    def send(self, seq: int, value: bytes) -> bool:
        future = self.producer.send(self.paced.topic, value, partition=0)
        future.add_callback(lambda _metadata: self.paced.acked(seq))
        future.add_errback(lambda e: self.paced.errors.append(str(e)))
        return True

    def idle(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        self.producer.flush(120)
        self.producer.close(10)


class _AiokafkaSender:
    """PacedProducer's records through aiokafka, on an event loop of the producing thread:
    it runs while the thread idles, and delivery callbacks come from it."""

    def __init__(self, paced: PacedProducer) -> None:
        self.paced = paced
        self.loop = asyncio.new_event_loop()
        self.producer: AIOKafkaProducer | None = None  # made on the loop, in the thread

    def send(self, seq: int, value: bytes) -> bool:
        self.loop.run_until_complete(self._send(seq, value))
        return True

    async def _send(self, seq: int, value: bytes) -> None:
        if self.producer is None:
            self.producer = AIOKafkaProducer(
                bootstrap_servers=self.paced.bootstrap, enable_idempotence=True, acks="all",
                linger_ms=1, request_timeout_ms=30000, **self.paced.config)
            await self.producer.start()
        delivery = await self.producer.send(self.paced.topic, value, partition=0)
        delivery.add_done_callback(lambda f: self._delivered(seq, f))

    def _delivered(self, seq: int, delivery: asyncio.Future[Any]) -> None:
        if delivery.cancelled():
            self.paced.errors.append("cancelled")
        elif (error := delivery.exception()) is not None:
            self.paced.errors.append(str(error))
        else:
            self.paced.acked(seq)

    def idle(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))

    def close(self) -> None:
        if self.producer is not None:
            self.loop.run_until_complete(self.producer.flush())
            self.loop.run_until_complete(self.producer.stop())
        self.loop.close()


@dataclass
class PacedProducer:
    """An idempotent acks=all producer at `rate` records/s to partition 0, in a thread:
    librdkafka's (`client` "librdkafka"), kafka-python's ("kafka-python") or aiokafka's
    ("aiokafka"). `sent_at[i]` and `acked_at[i]` are time.monotonic() of record i's
    produce() call and of its delivery report."""

    bootstrap: str
    topic: str
    rate: float
    record_size: int = 1024
    config: dict[str, Any] = field(default_factory=dict)
    client: str = "librdkafka"
    sent_at: list[float] = field(default_factory=list)
    acked_at: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        senders = {"librdkafka": _LibrdkafkaSender, "kafka-python": _KafkaPythonSender,
                   "aiokafka": _AiokafkaSender}
        if self.client not in senders:
            raise ValueError(f"unknown client {self.client!r}: one of {', '.join(senders)}")
        self._sender = senders[self.client](self)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def acked(self, seq: int) -> None:
        self.acked_at[seq] = time.monotonic()

    def _run(self) -> None:
        padding = os.urandom(max(self.record_size - 8, 0))
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate) + 1
            while len(self.sent_at) < due:
                seq = len(self.sent_at)
                if not self._sender.send(seq, seq.to_bytes(8, "big") + padding):
                    break
                self.sent_at.append(time.monotonic())
            self._sender.idle(0.001)
        self._sender.close()

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def wait_acked(self, count: int, timeout: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked_at) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} records not acknowledged within {timeout:.0f} s "
                                   f"(errors: {self.errors[:3]})")
            time.sleep(0.01)

    def first_ack_of_record_sent_after(self, t: float, timeout: float = DEADLINE_S) -> float:
        """The delivery time of the first record produced at or after `t` (waits for it)."""
        deadline = time.monotonic() + timeout
        while True:
            first = bisect.bisect_left(self.sent_at, t)
            acked = self.acked_at.get(first)
            if acked is not None:
                return acked
            if time.monotonic() > deadline:
                raise TimeoutError(f"no record produced after the signal was acknowledged within "
                                   f"{timeout:.0f} s (errors: {self.errors[:3]})")
            time.sleep(0.002)

    def longest_gap(self, since: float, until: float) -> float:
        """The longest time without a delivery report within [since, until]."""
        times = sorted(t for t in self.acked_at.values() if since <= t <= until)
        edges = [since, *times, until]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def metadata_at(host: str, port: int, topics: list[str] | None) -> MetadataResponse | None:
    """Metadata for `topics` (None: all) as the broker at host:port answers; None if it does not."""
    request = MetadataRequest(topics=None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False)
    try:
        with BrokerConnection(host, port, timeout_s=2.0) as conn:
            response: MetadataResponse = conn.request(request, 12)
            return response
    except (KafkaClientError, OSError):
        return None


def topic_ready_at(host: str, port: int, topic: str, partitions: int | None = None) -> bool:
    """Whether that broker's Metadata shows `topic` with (`partitions`, or some) partitions,
    each with a leader and a full ISR."""
    md = metadata_at(host, port, [topic])
    found = next((t for t in md.topics if t.name == topic), None) if md is not None else None
    if found is None or found.error_code != 0 or not found.partitions:
        return False
    return ((partitions is None or len(found.partitions) == partitions)
            and all(p.leader_id >= 0 and len(p.isr_nodes) == len(p.replica_nodes)
                    for p in found.partitions))


def metadata(cluster: Cluster, broker_ids: list[int], topic: str) -> MetadataResponse | None:
    """Metadata for `topic` from the first of `broker_ids` that answers."""
    for broker_id in broker_ids:
        b = cluster.brokers[broker_id]
        md = metadata_at(b.host, b.port, [topic])
        if md is not None:
            return md
    return None


def leader_and_isr(cluster: Cluster, broker_ids: list[int], topic: str) -> tuple[int, int, list[int]]:
    """(leader, leader epoch, ISR) of partition 0 as a broker answers; leader -1 if unknown."""
    md = metadata(cluster, broker_ids, topic)
    for t in md.topics if md is not None else []:
        for p in t.partitions:
            if t.name == topic and p.partition_index == 0:
                return p.leader_id, p.leader_epoch, list(p.isr_nodes)
    return -1, -1, []


def controller_id(cluster: Cluster) -> int:
    md = metadata(cluster, running(cluster), "__no_such_topic__")
    return md.controller_id if md is not None else -1


def running(cluster: Cluster) -> list[int]:
    return [i for i, b in cluster.brokers.items() if b.is_running()]


def wait_for(condition: Any, what: str, timeout: float = DEADLINE_S, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return value


def create_led_topic(cluster: Cluster, leader: int) -> str:
    """A one-partition RF=3 topic (min.insync.replicas 2) led by `leader`, with a full ISR."""
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    others = [b for b in sorted(cluster.brokers) if b != leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, *others[:2]]],
                                            config={"min.insync.replicas": "2"})],
                                  operation_timeout=30, request_timeout=40)
    for f in futures.values():
        f.result(timeout=60)
    wait_for(lambda: (lambda s: s[0] == leader and len(s[2]) == 3)(
        leader_and_isr(cluster, running(cluster), topic)), f"{topic} led by {leader} with a full ISR")
    return topic


def probe(cluster: Cluster, kind: str, victim: int, rate: float, record_size: int,
          settle_records: int, client_config: dict[str, Any] | None = None,
          client: str = "librdkafka") -> dict[str, Any]:
    """Kill (`kind` "kill") or stop ("term") `victim`, the leader of a fresh topic, under
    a running `client` producer; then restart it and wait for the cluster to be whole again."""
    topic = create_led_topic(cluster, victim)
    _, epoch, _ = leader_and_isr(cluster, [victim], topic)
    watch = LeaderWatch(cluster, [b for b in running(cluster) if b != victim], topic)
    watch.moved(victim, epoch)  # connect now, not after the signal
    producer = PacedProducer(cluster.bootstrap_servers, topic, rate, record_size,
                             dict(client_config or {}), client).start()
    result: dict[str, Any] = {"kind": kind, "client": client, "victim": victim, "topic": topic}
    try:
        producer.wait_acked(settle_records)
        # The signal falls at a random point of the clients' periodic timers (librdkafka's
        # once-a-second leader query runs from the producer's start): without this, every
        # probe sent it at the same phase, about a whole second after the start.
        phase = random.uniform(0.0, 1.0)
        time.sleep(phase)
        result["phase_s"] = round(phase, 3)
        proc = cluster.brokers[victim].proc
        assert proc is not None
        exited: list[float] = []  # when the process exited, seen by a thread waiting for it
        waiter = threading.Thread(target=_note_exit, args=(proc, exited), daemon=True)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGKILL if kind == "kill" else signal.SIGTERM)
        waiter.start()
        new_leader = wait_for(lambda: watch.moved(victim, epoch), "a new leader in Metadata",
                              interval=POLL_S)
        result["metadata_leader_s"] = time.monotonic() - signalled
        result["new_leader"] = new_leader
        result["resumed_s"] = producer.first_ack_of_record_sent_after(signalled) - signalled
        waiter.join(DEADLINE_S)
        if kind == "term" and exited:
            result["exited_s"] = exited[0] - signalled
            result["exit_code"] = proc.returncode
        time.sleep(0.5)  # let a few records pass the new leader before measuring the gap
        result["stall_s"] = producer.longest_gap(signalled - 0.5, time.monotonic())
    finally:
        watch.close()
        producer.stop()
    result["errors"] = len(producer.errors)
    result["first_errors"] = producer.errors[:3]
    result["acked"] = len(producer.acked_at)
    cluster.brokers[victim]._reaped(DEADLINE_S)
    cluster.restart(victim)
    wait_for(lambda: len(leader_and_isr(cluster, running(cluster), topic)[2]) == 3,
             f"{victim} back in the ISR of {topic}")
    return result


def _note_exit(proc: subprocess.Popen[bytes], exited: list[float]) -> None:
    proc.wait(DEADLINE_S)
    exited.append(time.monotonic())


class LeaderWatch:
    """Metadata for one topic from the `broker_ids`, over a connection kept to each (a poll
    every few ms must not cost a connect and an ApiVersions each time)."""

    def __init__(self, cluster: Cluster, broker_ids: list[int], topic: str) -> None:
        self.cluster, self.broker_ids, self.topic = cluster, broker_ids, topic
        self._conns: dict[int, BrokerConnection] = {}
        self._request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                        allow_auto_topic_creation=False)

    def state(self, broker_id: int) -> tuple[int, int]:
        """(leader, leader epoch) of partition 0 as `broker_id` answers; (-1, -1) if it does not."""
        try:
            conn = self._conns.get(broker_id)
            if conn is None:
                b = self.cluster.brokers[broker_id]
                conn = self._conns[broker_id] = BrokerConnection(b.host, b.port, timeout_s=2.0)
            md: MetadataResponse = conn.request(self._request, 12)
        except (KafkaClientError, OSError):
            self._drop(broker_id)
            return -1, -1
        for t in md.topics:
            for p in t.partitions:
                if t.name == self.topic and p.partition_index == 0:
                    return p.leader_id, p.leader_epoch
        return -1, -1

    def moved(self, victim: int, epoch: int) -> int:
        """The new leader once a broker's Metadata names one other than `victim` at a newer
        epoch; else 0."""
        for broker_id in self.broker_ids:
            leader, new_epoch = self.state(broker_id)
            if leader >= 0 and leader != victim and new_epoch > epoch:
                return leader
        return 0

    def _drop(self, broker_id: int) -> None:
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for broker_id in list(self._conns):
            self._drop(broker_id)
