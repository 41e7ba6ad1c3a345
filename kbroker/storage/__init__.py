"""The partition log: segments, indexes (offset, time, aborted transactions), producer
state, recovery, retention (Kafka's storage layer)."""
