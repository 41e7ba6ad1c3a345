"""partition.metadata: the topic id of a partition directory, as Kafka writes it:

    version: 0
    topic_id: <topic id in Kafka's URL-safe base64, no padding (22 characters)>
"""

from __future__ import annotations

import os
import uuid

from kbroker.common.kafka_uuid import uuid_from_base64, uuid_to_base64
from kbroker.utils.atomic_file import write_atomically

PARTITION_METADATA_FILE = "partition.metadata"


def write_partition_metadata(directory: str, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    text = f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}"
    write_atomically(os.path.join(directory, PARTITION_METADATA_FILE), text, sync=sync)


def read_partition_metadata(directory: str) -> uuid.UUID | None:
    """The topic id, or None when the file is missing. ValueError if malformed."""
    try:
        with open(os.path.join(directory, PARTITION_METADATA_FILE), encoding="utf-8") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except FileNotFoundError:
        return None
    if fields.get("version", "").strip() != "0" or "topic_id" not in fields:
        raise ValueError(f"{directory}: malformed {PARTITION_METADATA_FILE}")
    return uuid_from_base64(fields["topic_id"].strip())
