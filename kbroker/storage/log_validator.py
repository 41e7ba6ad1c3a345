"""What an append checks before anything is written (Kafka's LogValidator, and the
follower side of UnifiedLog.analyzeAndValidateRecords), over the core's walks.

A leader's append (validate_as_leader): every batch checked by the core (frame,
CRC-32C, record counts, timestamps for a client's batches, keys for a compacted topic:
compacted_keys), then re-encoded with the topic's codec when compression.type is not
`producer`. A follower's append (validate_as_follower): the batches the leader wrote,
checked in one walk that also yields the offsets the append needs (the core's
validate_follower_batches: each batch's CRC-32C computed once); the offsets are the
Log's to judge against its log end offset.

Every rejection is an InvalidRecordsError carrying the Kafka error code; nothing here
touches the log. Lock: none; the Log calls it on the event-loop thread.
"""

from __future__ import annotations

from kbroker._core.batch_validation import (
    BatchesInfo,
    FollowerBatchesInfo,
    validate_batches,
    validate_follower_batches,
)
from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.records.compression import CODEC_BY_NAME, DECOMPRESSION_RATIO_LIMIT, Codec
from kbroker.records.recompress import recompress_batches
from kbroker.storage.compacted_keys import check_keys
from kbroker.storage.errors import InvalidRecordsError
from kbroker.storage.log_config import LogConfig


def max_uncompressed(config: LogConfig) -> int:
    """The most a batch of a log may expand to when the broker inflates it."""
    return DECOMPRESSION_RATIO_LIMIT * max(config.max_message_bytes, 1)


def validate_as_leader(tp: TopicPartition, view: memoryview, config: LogConfig, now: int, *,
                       from_client: bool) -> tuple[memoryview, BatchesInfo]:
    """The payload to write (re-encoded when the topic's codec asks) and what the core
    learnt of it; from_client: a producer's batches (timestamps checked, control batches
    refused), else the coordinator's."""
    require_keys = config.compact  # Kafka's LogValidator: the leader checks keys
    try:
        info = validate_batches(
            view, config.max_message_bytes, now_ms=now,
            timestamp_before_max_ms=config.timestamp_before_max_ms,
            timestamp_after_max_ms=config.timestamp_after_max_ms,
            check_timestamps=from_client and not config.log_append_time,
            from_client=from_client, require_keys=require_keys,
        )
    except RecordValidationError as e:
        if e.error_code == ErrorCode.INVALID_RECORD and require_keys:
            check_keys(tp, view, compressed_only=False, max_uncompressed=max_uncompressed(config))
        raise InvalidRecordsError(str(e), e.error_code) from e
    if info.batch_count == 0:
        return view, info
    if require_keys and info.compressed:
        check_keys(tp, view, compressed_only=True, max_uncompressed=max_uncompressed(config))
    if config.compression_type != "producer":
        return recompress(view, info, config, now)
    return view, info


def validate_as_follower(view: memoryview, config: LogConfig) -> FollowerBatchesInfo:
    """The leader's batches checked as they are (empty batches and offset gaps that the
    cleaner left are accepted), with the offsets and leader epochs they carry."""
    try:
        return validate_follower_batches(view, config.max_message_bytes)
    except RecordValidationError as e:
        raise InvalidRecordsError(str(e), e.error_code) from e


def recompress(view: memoryview, info: BatchesInfo, config: LogConfig,
               now: int) -> tuple[memoryview, BatchesInfo]:
    """compression.type other than `producer`: re-encode batches with the topic's codec."""
    codec = CODEC_BY_NAME[config.compression_type]
    if info.codecs == 1 << codec:
        return view, info
    level = {Codec.GZIP: config.compression_gzip_level, Codec.LZ4: config.compression_lz4_level,
             Codec.ZSTD: config.compression_zstd_level}.get(codec)
    try:
        data = recompress_batches(view, codec, level, max_uncompressed(config))
    except Exception as e:  # any codec's error (zlib.error, ZstdError, ...) on the way in
        raise InvalidRecordsError(f"cannot decompress batch: {e}") from e
    out = memoryview(data)
    try:
        return out, validate_batches(out, config.max_message_bytes, now_ms=now)
    except RecordValidationError as e:
        raise InvalidRecordsError(str(e), e.error_code) from e
