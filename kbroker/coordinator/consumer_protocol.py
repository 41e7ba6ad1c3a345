"""The `consumer` protocol's embedded subscription, read for OffsetDelete.

    version int16 | ConsumerProtocolSubscription (that version; generated codec)

Only the topic list is used: a group may not delete offsets of a topic its
members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC). As Kafka's ClassicGroup
(computeSubscribedTopics) does, the subscription is read as version 0 whatever
version it declares: version 0 (topics, user_data) prefixes every version, so a
subscription that ends early for its declared version (a v1 without
owned_partitions, as @platformatic/kafka sends it) or comes from a future
version still gives its topics. Bytes left after that prefix are not read.
"""

from __future__ import annotations

from kbroker.protocol.codec import DecodeError, Reader
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription


def subscription_topics(metadata: bytes) -> set[str]:
    """The subscription's topics; ValueError when not even its version-0 prefix reads."""
    r = Reader(bytearray(metadata))
    try:
        r.int16()  # the declared version: its version-0 prefix is all that is read
        sub = ConsumerProtocolSubscription.decode(r, 0)
    except (DecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"bad consumer subscription: {e}") from e
    return set(sub.topics)
