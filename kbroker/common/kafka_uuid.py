"""Kafka's text form of a Uuid, as org.apache.kafka.common.Uuid's toString and fromString:
the 16 bytes in URL-safe base64 without padding, 22 characters.

    uuid.UUID("63094593-93f9-4c40-825e-0d6f0bc37a10")  <->  "YwlFk5P5TECCXg1vC8N6EA"

Topic ids and the cluster id are written and shown in it everywhere: partition.metadata,
meta.properties, ZooKeeper's /brokers/topics/<topic>, the broker's log and request log,
`kbroker topics describe` (as kafka-topics.sh --describe prints TopicId).
"""

from __future__ import annotations

import base64
import uuid


def uuid_to_base64(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    """ValueError if `text` is not 16 bytes of URL-safe base64."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
