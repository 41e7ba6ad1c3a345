"""The uniform assignor (Kafka's UniformAssignor, the default of consumer groups):
every member gets as many partitions as the others, within one, sticking to what it
had.

Learned from Apache Kafka's UniformAssignor (read, not copied): members keep the
partitions of their previous target that they still subscribe to; partitions nobody
kept go one by one to the subscribed member with the fewest; then, while a member
subscribed to a partition has two fewer than its holder, the partition moves. With
the same subscription everywhere this is the balanced sticky result (counts differ by
at most one); with different subscriptions it balances as far as they allow.

Lock: none (a pure function).
"""

from __future__ import annotations

import uuid

from kbroker.coordinator.consumer_group_member import Assignment

Partition = tuple[uuid.UUID, int]


def assign(subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict[uuid.UUID, int],
           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    holder: dict[Partition, str] = {}
    owned: dict[str, set[Partition]] = {m: set() for m in members}
    for m in members:
        for topic, ps in previous.get(m, {}).items():
            if topic not in subscriptions[m]:
                continue
            for p in ps:
                if p < partitions.get(topic, 0) and (topic, p) not in holder:
                    holder[(topic, p)] = m
                    owned[m].add((topic, p))
    _trim_to_quota(subscriptions, partitions, owned, holder)
    every = sorted((t, p) for t in {t for s in subscriptions.values() for t in s} if t in partitions
                   for p in range(partitions[t]))
    for tp in every:
        if tp not in holder:
            eligible = [m for m in members if tp[0] in subscriptions[m]]
            m = min(eligible, key=lambda x: (len(owned[x]), x))
            holder[tp] = m
            owned[m].add(tp)
    _balance(subscriptions, owned, holder)
    return {m: _by_topic(owned[m]) for m in members}


def _trim_to_quota(subscriptions: dict[str, frozenset[uuid.UUID]], partitions: dict[uuid.UUID, int],
                   owned: dict[str, set[Partition]], holder: dict[Partition, str]) -> None:
    """Same subscriptions everywhere: a member keeps at most its share (the first
    `extra` members by count may keep one more), so new members get theirs at once."""
    if not owned or len(set(subscriptions.values())) != 1:
        return
    total = sum(partitions.get(t, 0) for t in next(iter(subscriptions.values())))
    quota, extra = divmod(total, len(owned))
    for m in sorted(owned, key=lambda x: (-len(owned[x]), x)):
        keep = quota
        if extra and len(owned[m]) > quota:
            keep, extra = quota + 1, extra - 1
        for tp in sorted(owned[m])[keep:]:
            owned[m].discard(tp)
            del holder[tp]


def _balance(subscriptions: dict[str, frozenset[uuid.UUID]], owned: dict[str, set[Partition]],
             holder: dict[Partition, str]) -> None:
    moved = True
    while moved:
        moved = False
        for tp in sorted(holder):
            src = holder[tp]
            eligible = [m for m in owned if tp[0] in subscriptions[m]]
            dst = min(eligible, key=lambda x: (len(owned[x]), x))
            if len(owned[dst]) + 1 < len(owned[src]):
                owned[src].discard(tp)
                owned[dst].add(tp)
                holder[tp] = dst
                moved = True


def _by_topic(tps: set[Partition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}
