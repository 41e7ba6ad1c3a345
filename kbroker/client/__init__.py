"""A small synchronous Kafka protocol client on kbroker's generated codecs.

Used by kbroker.spark to read raw record batches (Fetch) and write them (Produce)
against any Kafka-compatible broker. See client.py and connection.py.
"""

from kbroker.client.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ClusterMetadata,
    FetchedPartition,
    KafkaClient,
    TopicPartition,
)
from kbroker.client.connection import BrokerConnection, KafkaClientError, UnsupportedVersionError

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "BrokerConnection",
    "ClusterMetadata",
    "FetchedPartition",
    "KafkaClient",
    "KafkaClientError",
    "TopicPartition",
    "UnsupportedVersionError",
]
