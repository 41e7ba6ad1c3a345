"""Classic-protocol members for the migration tests, with the interface of
groups_support.Member (poll_once, commit, close, assignment, values, closed), so
poll_until and covers drive them beside confluent-kafka members:

- KafkaPythonMember: a kafka-python KafkaConsumer (range, roundrobin), polled in the
  test's thread (its heartbeats run in kafka-python's own thread);
- AiokafkaMember: an aiokafka AIOKafkaConsumer (roundrobin) on an event loop of its own
  thread, which reads and commits after each batch; stopped (LeaveGroup) by close().
"""

from __future__ import annotations

import asyncio
import threading

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError as AioCommitFailed
from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError, KafkaError

CLASSIC = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000}


class KafkaPythonMember:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                      enable_auto_commit=False, client_id="kafka-python-member", **CLASSIC)
        self.assignment: set[int] = set()
        self.values: list[str] = []
        self.closed = False

    def poll_once(self, timeout: float = 0.05) -> None:
        if self.closed:
            return
        for records in self.consumer.poll(timeout_ms=int(timeout * 1000)).values():
            self.values.extend(r.value.decode() for r in records)
        self.assignment = {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        if self.values and not self.closed:
            try:
                self.consumer.commit()
            except (CommitFailedError, KafkaError):
                pass  # a rebalance under way: the test commits again once the group is stable

    def close(self) -> None:
        if not self.closed:
            self.consumer.close()  # LeaveGroup
            self.closed = True


class AiokafkaMember:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.assignment: set[int] = set()
        self.values: list[str] = []
        self.closed = False
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._started = threading.Event()
        self._args = (bootstrap, group, topic)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()
        assert self._started.wait(30), "aiokafka did not start"

    async def _run(self) -> None:
        bootstrap, group, topic = self._args
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, client_id="aiokafka-member", **CLASSIC)
        try:
            await c.start()
        finally:
            self._started.set()
        try:
            while not self._stop.is_set():
                batch = await c.getmany(timeout_ms=100)
                for records in batch.values():
                    self.values.extend(r.value.decode() for r in records)
                if batch:
                    try:
                        await c.commit()
                    except (AioCommitFailed, AioKafkaError):
                        pass  # a rebalance under way: the next batch's commit covers it
                self.assignment = {tp.partition for tp in c.assignment()}
        except BaseException as e:  # noqa: BLE001 - reported to the test by close()
            self.errors.append(e)
        finally:
            await c.stop()  # LeaveGroup

    def poll_once(self, timeout: float = 0.05) -> None:
        """Its own thread polls; a failure there fails the test here."""
        assert not self.errors, self.errors

    def commit(self) -> None:
        """It commits after each batch it reads."""

    def close(self) -> None:
        if not self.closed:
            self._stop.set()
            self._thread.join(30)
            self.closed = True
            assert not self.errors, self.errors


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets of the topic (-1: none), as confluent-kafka's admin reads them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result is in
    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group].result(timeout=30)
    by_partition = {tp.partition: tp.offset for tp in got.topic_partitions if tp.error is None}
    return [max(by_partition.get(p, -1), -1) for p in range(partitions)]
