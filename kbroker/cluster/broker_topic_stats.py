"""BrokerTopicStats: Kafka's BrokerTopicMetrics counters, per topic (kafka.server).

Produce and Fetch count here once per partition of a request, never per record or per
batch: an append adds its LogAppendInfo's record count and valid bytes, a Fetch response
the size of each partition's records. The counters are plain ints on the event loop
thread (no lock, no object per count); /metrics (kbroker.ops.metrics) reads them when
scraped, the all-topics figures as the sum over topics plus what deleted topics had
counted, so totals never go back.

    counter                     Kafka's meter (kafka.server:type=BrokerTopicMetrics)
    messages_in                 MessagesInPerSec
    bytes_in / bytes_out        BytesInPerSec / BytesOutPerSec (clients' Produce / Fetch)
    bytes_rejected              BytesRejectedPerSec (batches too large)
    replication_bytes_out       ReplicationBytesOutPerSec (what followers fetched)
    total_produce_requests      TotalProduceRequestsPerSec (per partition of a request)
    total_fetch_requests        TotalFetchRequestsPerSec (per partition of a request)
    failed_produce_requests     FailedProduceRequestsPerSec
    failed_fetch_requests       FailedFetchRequestsPerSec

Failures count as Kafka counts them: a partition this broker holds whose append or
read failed; a request for an unknown partition or one led elsewhere is not a failure
of the topic (Kafka neither marks it), so a client cannot grow the table with made-up
topic names.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Iterator

COUNTERS = (
    "messages_in", "bytes_in", "bytes_out", "bytes_rejected", "replication_bytes_out", "total_produce_requests", "total_fetch_requests",
    "failed_produce_requests", "failed_fetch_requests",
)


class TopicStats:
    __slots__ = COUNTERS

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.replication_bytes_out = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0

    def add(self, other: TopicStats) -> None:
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    """See the module docstring."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicStats] = {}
        self._removed = TopicStats()  # what deleted topics counted: part of every total

    def topic(self, name: str) -> TopicStats:
        stats = self._topics.get(name)
        if stats is None:
            stats = self._topics[name] = TopicStats()
        return stats

    def remove_topic(self, name: str) -> None:
        """A deleted topic: its series go, its counts stay in the totals."""
        stats = self._topics.pop(name, None)
        if stats is not None:
            self._removed.add(stats)

    def topics(self) -> Iterator[tuple[str, TopicStats]]:
        return iter(list(self._topics.items()))

    def all_topics(self) -> TopicStats:
        total = TopicStats()
        total.add(self._removed)
        for stats in self._topics.values():
            total.add(stats)
        return total
