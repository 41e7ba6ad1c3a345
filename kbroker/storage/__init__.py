"""The partition log: segments, indexes, recovery, retention (Kafka's storage layer)."""
