"""The partition log: segments, indexes (offset, time, aborted transactions), producer
state, recovery, retention and compaction (the log cleaner: log_cleaner.py, cleaner.py)
(Kafka's storage layer)."""
