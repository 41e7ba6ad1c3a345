"""Classic-protocol members for the migration tests, with the interface of
groups_support.Member (poll_once, commit, close, assignment, values, closed), so
poll_until and covers drive them beside confluent-kafka members:

- KafkaPythonMember: a kafka-python KafkaConsumer (range, roundrobin), polled on a
  thread of its own, which commits when the test asks;
- AiokafkaMember: an aiokafka AIOKafkaConsumer (roundrobin) on an event loop of its own
  thread, which reads and commits after each batch; stopped (LeaveGroup) by close().
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError as AioCommitFailed
from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError, KafkaError

CLASSIC = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000}


class ThreadedMember:
    """A classic member whose client polls on a thread of its own (`_run`, stopping when
    `_stop` is set and leaving the group as it ends); a failure there fails the test at
    its next poll_once or at close()."""

    def __init__(self, run: Callable[[], None]) -> None:
        self.assignment: set[int] = set()
        self.values: list[str] = []
        self.closed = False
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def poll_once(self, timeout: float = 0.05) -> None:
        assert not self.errors, self.errors

    def close(self) -> None:
        if not self.closed:
            self._stop.set()
            self._thread.join(30)
            self.closed = True
            assert not self._thread.is_alive(), f"{type(self).__name__} did not stop"
            assert not self.errors, self.errors


class KafkaPythonMember(ThreadedMember):
    """kafka-python, each poll long enough to outlast a rebalance: kafka-python 3.0.12
    loses an assignment when its join-and-sync task completes while no poll waits for it
    (ensure_active_group returns early on a short poll timeout, and the leader's next poll
    sees no need to rejoin), so short polls would leave it holding nothing while the
    broker counts it a member."""

    POLL_MS = 5000

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                      enable_auto_commit=False, client_id="kafka-python-member", **CLASSIC)
        self._commit = threading.Event()
        super().__init__(self._run)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for records in self.consumer.poll(timeout_ms=self.POLL_MS).values():
                    self.values.extend(r.value.decode() for r in records)
                self.assignment = {tp.partition for tp in self.consumer.assignment()}
                if self._commit.is_set() and self.values:
                    self._commit.clear()
                    try:
                        self.consumer.commit()
                    except (CommitFailedError, KafkaError):
                        pass  # a rebalance under way: the test asks again once the group is stable
        except BaseException as e:  # noqa: BLE001 - reported to the test by poll_once and close()
            self.errors.append(e)
        finally:
            self.consumer.close()  # LeaveGroup

    def commit(self) -> None:
        """Asks its thread to commit what it has read, after its current poll."""
        self._commit.set()


class AiokafkaMember(ThreadedMember):
    """aiokafka on an event loop of its thread; it commits after each batch it reads."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self._started = threading.Event()
        self._args = (bootstrap, group, topic)
        super().__init__(lambda: asyncio.run(self._run()))
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

    def commit(self) -> None:
        """It commits after each batch it reads."""


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets of the topic (-1: none), as confluent-kafka's admin reads them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result is in
    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group].result(timeout=30)
    by_partition = {tp.partition: tp.offset for tp in got.topic_partitions if tp.error is None}
    return [max(by_partition.get(p, -1), -1) for p in range(partitions)]
