"""kbroker: a Kafka-compatible message broker."""

__version__ = "0.1.0"
