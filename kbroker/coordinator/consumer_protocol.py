"""The `consumer` protocol's embedded subscription, read for OffsetDelete.

    version int16 | ConsumerProtocolSubscription (that version; generated codec)

Only the topic list is used: a group may not delete offsets of a topic its
members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
"""

from __future__ import annotations

from kbroker.protocol.codec import DecodeError, Reader
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription


def subscription_topics(metadata: bytes) -> set[str]:
    r = Reader(bytearray(metadata))
    try:
        version = r.int16()
        sub = ConsumerProtocolSubscription.decode(r, min(max(version, 0), 3))
    except (DecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"bad consumer subscription: {e}") from e
    return set(sub.topics)
