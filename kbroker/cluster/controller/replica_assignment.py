"""Where a new topic's replicas go (Kafka's AdminUtils.assignReplicasToBrokers).

Without racks: partition p's first replica is broker (p + start) of the sorted broker
list, the others follow it at a shift that grows by one every len(brokers) partitions,
so leaders and followers spread evenly. With `broker.rack` on every broker: the broker
list alternates racks, and each partition's replicas take a broker of a rack without a
replica first (then a broker without one), so a rack's loss leaves a copy when there
are at least as many racks as replicas. `start` and the first shift are random, as in
Kafka (fixed in tests).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError


class AssignmentError(KafkaError):
    pass


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
                    start_index: int = -1, first_partition: int = 0,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition -> replicas for partitions first_partition .. first_partition+partitions-1.
    `brokers` maps each live broker id to its rack (None: no rack)."""
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.",
                              ErrorCode.INVALID_REPLICATION_FACTOR)
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            ErrorCode.INVALID_REPLICATION_FACTOR)
    rng = rng or random.Random()
    racks = {b: r for b, r in brokers.items() if r is not None}
    if not racks:
        return _rack_unaware(sorted(brokers), partitions, replication_factor, start_index,
                             first_partition, rng)
    if len(racks) != len(brokers):
        raise AssignmentError("Not all brokers have rack information for replica rack aware "
                              "assignment.", ErrorCode.INVALID_REPLICATION_FACTOR)
    return _rack_aware(racks, partitions, replication_factor, start_index, first_partition, rng)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _starts(n: int, partitions: int, start_index: int, first_partition: int,
            rng: random.Random) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its first replica, shift) for each partition to place."""
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    for current in range(first_partition, first_partition + partitions):
        if current > 0 and current % n == 0:
            shift += 1
        yield current, (current + start) % n, shift


def _rack_unaware(brokers: Sequence[int], partitions: int, rf: int, start_index: int,
                  first_partition: int, rng: random.Random) -> dict[int, list[int]]:
    n = len(brokers)
    return {p: [brokers[first]] + [brokers[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
            for p, first, shift in _starts(n, partitions, start_index, first_partition, rng)}


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that racks take turns: rack1's first, rack2's first, ..."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    iterators = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for brokers in iterators:
            if i < len(brokers):
                out.append(brokers[i])
        i += 1
    return out


def _rack_aware(racks: Mapping[int, str], partitions: int, rf: int, start_index: int,
                first_partition: int, rng: random.Random) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    for p, first, shift in _starts(n, partitions, start_index, first_partition, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_with = {racks[leader]}
        brokers_with = {leader}
        k = 0
        for _r in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                if ((rack not in racks_with or len(racks_with) == num_racks)
                        and (broker not in brokers_with or len(brokers_with) == n)):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[p] = replicas
    return out
