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
    PendingProduce,
    TopicPartition,
)
from kbroker.client.connection import (
    AuthenticationError,
    BrokerConnection,
    KafkaClientError,
    UnsupportedVersionError,
)
from kbroker.client.sasl import ConnectionSecurity

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AuthenticationError",
    "BrokerConnection",
    "ClusterMetadata",
    "ConnectionSecurity",
    "FetchedPartition",
    "KafkaClient",
    "KafkaClientError",
    "PendingProduce",
    "TopicPartition",
    "UnsupportedVersionError",
]
