"""The range assignor (Kafka's server-side RangeAssignor): per topic, the members
subscribed to it split its partitions in contiguous ranges, the first members one
more when the count does not divide; co-partitioned topics with the same subscribers
give the same member the same partition numbers.

Learned from Apache Kafka's RangeAssignor (read, not copied). Members are ordered by
member id, so the result depends only on the subscriptions (`previous` is not used:
range is not sticky beyond what its ranges give).

Lock: none (a pure function).
"""

from __future__ import annotations

import uuid

from kbroker.coordinator.consumer_group_member import Assignment


def assign(subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict[uuid.UUID, int],
           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in subscriptions}
    for topic in sorted({t for s in subscriptions.values() for t in s}):
        count = partitions.get(topic, 0)
        members = sorted(m for m, s in subscriptions.items() if topic in s)
        if not count or not members:
            continue
        quota, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = quota + (1 if i < extra else 0)
            if n:
                out[m][topic] = frozenset(range(start, start + n))
            start += n
    return {m: a for m, a in out.items()}
