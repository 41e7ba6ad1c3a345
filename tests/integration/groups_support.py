"""Helpers for the consumer group tests: confluent-kafka members polled round-robin."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)


def produce(bootstrap: str, topic: str, values: Iterable[tuple[int, str]], **conf: Any) -> None:
    """(partition, value) pairs; waits until all are acknowledged."""
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for partition, value in values:
        p.produce(topic, value.encode(), partition=partition,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert not errors, errors


class Member:
    """One confluent-kafka consumer in a group, with its assignment and what it read."""

    def __init__(self, bootstrap: str, group: str, topic: str | list[str], **conf: Any) -> None:
        # KIP-848 (group.protocol=consumer): the broker owns the session timeout and the
        # assignment is incremental (callbacks name what is added or revoked)
        self.incremental = conf.get("group.protocol") == "consumer"
        session = {} if self.incremental else {"session.timeout.ms": 6000}
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, **session, **conf})
        self.assignment: set[int] = set()
        self.values: list[str] = []
        self.closed = False
        self.revocations = 0  # revoked or lost partitions, as the callbacks saw them
        self.consumer.subscribe([topic] if isinstance(topic, str) else topic,
                                on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[Any]) -> None:
        if self.incremental:
            self.assignment |= {p.partition for p in partitions}
        else:
            self.assignment = {p.partition for p in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[Any]) -> None:
        self.revocations += bool(partitions)
        if self.incremental:
            self.assignment -= {p.partition for p in partitions}
        else:
            self.assignment = set()

    def poll_once(self, timeout: float = 0.05) -> None:
        if self.closed:
            return
        m = self.consumer.poll(timeout)
        if m is None:
            return
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            return
        self.values.append(m.value().decode())

    def commit(self) -> None:
        """Commit what was read; nothing read since the last commit (librdkafka's _NO_OFFSET)
        is no error (a caller may commit again until the coordinator holds every member's)."""
        if self.values:
            try:
                self.consumer.commit(asynchronous=False)
            except KafkaException as e:
                if e.args[0].code() != KafkaError._NO_OFFSET:
                    raise

    def close(self) -> None:
        if not self.closed:
            self.consumer.close()
            self.closed = True


def poll_until(members: list[Member], done: Callable[[], bool], timeout: float = 30.0) -> float:
    """Poll every open member until done(); returns the seconds it took."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < timeout, "timed out: " + repr([sorted(m.assignment) for m in members])
        for m in members:
            m.poll_once()
    return time.monotonic() - start


def covers(members: list[Member], partitions: int) -> bool:
    """Assignments are disjoint and cover every partition."""
    live = [m for m in members if not m.closed]
    total = sum(len(m.assignment) for m in live)
    union = set().union(*(m.assignment for m in live)) if live else set()
    return total == partitions and union == set(range(partitions)) and all(m.assignment for m in live)


def end_offsets(member: Member, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark, as the broker answers it now."""
    return {p: member.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)}


def read_to(members: list[Member], topic: str, ends: dict[int, int]) -> bool:
    """Every partition of `ends` is assigned to a live member that has read it up to its end
    offset there: nothing more will come (a record read twice would have come before). A
    partition it has read nothing of since it got it is where its committed offset is."""
    live = [m for m in members if not m.closed]
    for m in live:
        if m.assignment:
            tps = m.consumer.position([TopicPartition(topic, p) for p in sorted(m.assignment)])
            unread = [tp for tp in tps if tp.offset < 0]  # OFFSET_INVALID: no record read
            if unread:
                tps = [tp for tp in tps if tp.offset >= 0] + m.consumer.committed(unread, timeout=10)
            if any(tp.offset < ends[tp.partition] for tp in tps):
                return False
    return set().union(*(m.assignment for m in live)) >= set(ends) if live else not ends


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(30)
