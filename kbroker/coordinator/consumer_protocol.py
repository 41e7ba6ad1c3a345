"""The `consumer` protocol's embedded subscription and assignment: the bytes classic
members put in JoinGroup's protocol metadata and get back in SyncGroup.

    subscription: version int16 | ConsumerProtocolSubscription (that version)
    assignment:   version int16 | ConsumerProtocolAssignment (that version)

(generated codecs, kbroker/protocol/messages/). The subscription carries the topics
(v0), the partitions the member owns (v1+, cooperative clients), its generation (v2+)
and rack (v3+).

For OffsetDelete only the topic list is used (`subscription_topics`): as Kafka's
ClassicGroup (computeSubscribedTopics) does, the subscription is read as version 0
whatever version it declares: version 0 (topics, user_data) prefixes every version,
so a subscription that ends early for its declared version (a v1 without
owned_partitions, as @platformatic/kafka sends it) or comes from a future version
still gives its topics. Bytes left after that prefix are not read.

A classic member inside a KIP-848 consumer group (coordinator/consumer_group_classic.py)
is read in full (`decode_subscription`, Kafka's deserializeConsumerProtocolSubscription:
a version above 3 is read as 3), falling back to the version-0 prefix for a
subscription that ends early; its assignment is written back at the version of its
subscription (`encode_assignment`), as Kafka's prepareAssignment.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

HIGHEST_VERSION = 3


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # topic name -> partitions (v1+; empty for v0)
    rack_id: str | None = None


def subscription_topics(metadata: bytes) -> set[str]:
    """The subscription's topics; ValueError when not even its version-0 prefix reads."""
    r = Reader(bytearray(metadata))
    try:
        r.int16()  # the declared version: its version-0 prefix is all that is read
        sub = ConsumerProtocolSubscription.decode(r, 0)
    except (DecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"bad consumer subscription: {e}") from e
    return set(sub.topics)


def version_of(metadata: bytes) -> int:
    """The declared version, capped to the highest this broker reads (0 when unreadable)."""
    if len(metadata) < 2:
        return 0
    return max(0, min(int.from_bytes(metadata[:2], "big", signed=True), HIGHEST_VERSION))


def decode_subscription(metadata: bytes) -> Subscription:
    """The whole subscription; ValueError when not even its version-0 prefix reads."""
    version = version_of(metadata)
    for attempt in (version, 0):
        r = Reader(bytearray(metadata))
        try:
            r.int16()
            sub = ConsumerProtocolSubscription.decode(r, attempt)
        except (DecodeError, UnicodeDecodeError, IndexError):
            continue
        owned: dict[str, frozenset[int]] = {}
        for tp in (sub.owned_partitions if attempt >= 1 else []):
            owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
        return Subscription(tuple(sub.topics), {t: ps for t, ps in owned.items() if ps},
                            sub.rack_id if attempt >= 3 else None)
    raise ValueError("bad consumer subscription: not even its version-0 prefix reads")


def encode_assignment(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment of `version` (no user data)."""
    version = max(0, min(version, HIGHEST_VERSION))
    w = Writer()
    w.int16(version)
    ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
        for t, ps in sorted(partitions.items()) if ps]).encode(w, version)
    return bytes(w.to_bytes())


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """A classic member's assignment by topic name ({} for none); ValueError if unreadable."""
    if not data:
        return {}
    r = Reader(bytearray(data))
    try:
        r.int16()
        a = ConsumerProtocolAssignment.decode(r, 0)  # v0 is every version's layout
    except (DecodeError, UnicodeDecodeError, IndexError) as e:
        raise ValueError(f"bad consumer assignment: {e}") from e
    out: dict[str, frozenset[int]] = {}
    for tp in a.assigned_partitions:
        out[tp.topic] = out.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return out
