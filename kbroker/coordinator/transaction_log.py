"""Kafka's record formats for __transaction_state (TransactionLog), through the codecs
generated from TransactionLogKey.json / TransactionLogValue.json. Big-endian; strings
int16 length + UTF-8 (compact in the flexible value version 1).

    key:   version int16 (0) | transactional_id string
    value: version int16 (0; 1 is the flexible version, read too) |
           producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 |
           transaction_status int8 (TransactionState id) |
           transaction_partitions nullable array of (topic string | partition_ids [int32]) |
           transaction_last_update_timestamp_ms int64 | transaction_start_timestamp_ms int64

A null value is a tombstone: the transactional id expired. An Empty state is written with
null partitions, as Kafka writes it. A key of another version is skipped by the loader
(Kafka logs and ignores it).
"""

from __future__ import annotations

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.transaction_metadata import (
    EMPTY,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages.internal_records.transaction_log_key import TransactionLogKey
from kbroker.protocol.messages.internal_records.transaction_log_value import TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 0  # Kafka 3.9 writes 0 until transaction.version 2 (KIP-890)


def key_to_bytes(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    TransactionLogKey(transactional_id=transactional_id).encode(w, KEY_VERSION)
    return bytes(w.to_bytes())


def value_to_bytes(t: TxnTransitMetadata) -> bytes:
    partitions: list[TransactionLogValue.PartitionsSchema] | None = None
    if t.state is not EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(t.topic_partitions, key=lambda x: (x.topic, x.partition)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = [TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids)
                      for topic, ids in by_topic.items()]
    w = Writer()
    w.int16(VALUE_VERSION)
    TransactionLogValue(
        producer_id=t.producer_id, producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms, transaction_status=t.state.id,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp).encode(w, VALUE_VERSION)
    return bytes(w.to_bytes())


def read_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key of another version."""
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        return None
    return TransactionLogKey.decode(r, version).transactional_id


def read_value(transactional_id: str, data: bytes | None) -> TransactionMetadata | None:
    """The metadata a value holds; None for a tombstone. ValueError when unreadable."""
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    try:
        v = TransactionLogValue.decode(r, version)
    except DecodeError as e:
        raise ValueError(f"transaction log value of {transactional_id!r}: {e}") from e
    state = TransactionState.from_id(v.transaction_status)
    metadata = TransactionMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state,
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms)
    if state is not EMPTY:
        for p in v.transaction_partitions or ():
            metadata.topic_partitions.update(TopicPartition(p.topic, i) for i in p.partition_ids)
    return metadata
