"""kbroker's one batch encoder (kbroker/_core/batch_encode.pyx via kbroker.records.builder),
checked against code it does not share: kafka-python's DefaultRecordBatchBuilder must
write the same bytes, and kafka-python's DefaultRecordBatch must read ours back (CRC
included) for every codec it has a library for here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kbroker._core import batch_encode
from kbroker.records.batch_header import BatchHeader
from kbroker.records.builder import RecordValues, build_batch
from kbroker.records.record_iter import iter_records
from tests.sanitized import examples

TS = 1_700_000_000_000

header_st = st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20))
record_st = st.tuples(
    st.none() | st.binary(max_size=40),            # key
    st.none() | st.binary(max_size=300),           # value
    st.integers(-(1 << 40), 1 << 40),              # timestamp delta
    st.lists(header_st, max_size=3),               # headers
)
producer_st = st.sampled_from([(-1, -1, -1, False), (4000, 3, 17, False), (1 << 40, 0, 0x7FFFFFF0, True)])


def kafka_python_batch(records: list[RecordValues], producer: tuple[int, int, int, bool],
                       codec: int = 0) -> bytes:
    pid, epoch, seq, transactional = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 30)
    for i, (key, value, delta, headers) in enumerate(records):
        builder.append(i, TS + delta, key, value, list(headers))
    return bytes(builder.build())  # baseTimestamp: the first record's timestamp


def ours(records: list[RecordValues], producer: tuple[int, int, int, bool], codec: int = 0) -> bytes:
    pid, epoch, seq, transactional = producer
    base = TS + records[0][2]  # as kafka-python: deltas from the first record
    rebased = [(k, v, TS + d - base, h) for k, v, d, h in records]
    return build_batch(rebased, base, codec=codec, partition_leader_epoch=0,
                       attributes=0x10 if transactional else 0,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(record_st, min_size=1, max_size=20), producer_st)
def test_same_bytes_as_kafka_python(records: list[RecordValues], producer: tuple[int, int, int, bool]) -> None:
    assert ours(records, producer) == kafka_python_batch(records, producer)


@pytest.mark.parametrize("codec", [1, 3, 4])  # gzip, lz4, zstd: kafka-python has no snappy library here
@settings(max_examples=examples(30), deadline=None)
@given(st.lists(record_st, min_size=1, max_size=20))
def test_kafka_python_reads_compressed_batches(codec: int, records: list[RecordValues]) -> None:
    data = ours(records, (-1, -1, -1, False), codec)
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    assert batch.compression_type == codec
    got = [(r.key, r.value, r.timestamp, [(k, v) for k, v in r.headers]) for r in batch]
    base = TS + records[0][2]
    assert got == [(k, v, base + (TS + d - base), list(h)) for k, v, d, h in records]


def test_frame_keeps_every_header_field() -> None:
    section = batch_encode.encode_records([(b"k", b"v", 5, [("h", None)]), (None, None, 9, ())])
    data = batch_encode.frame_batch(section, 2, TS, TS + 9, base_offset=1 << 40, partition_leader_epoch=7,
                                    attributes=0x30, last_offset_delta=4, producer_id=99,
                                    producer_epoch=3, base_sequence=11)
    h = BatchHeader.parse(data)
    assert h == BatchHeader(1 << 40, len(data) - 12, 7, 2, h.crc, 0x30, 4, TS, TS + 9, 99, 3, 11, 2)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(data)] == [
        ((1 << 40), TS + 5, b"k", b"v", [("h", None)]),
        ((1 << 40) + 1, TS + 9, None, None, []),
    ]


def test_only_bytes_or_none() -> None:
    with pytest.raises(TypeError):
        batch_encode.encode_records([(bytearray(b"k"), b"v", 0, ())])
    with pytest.raises(TypeError):
        batch_encode.encode_records([(b"k", "v", 0, ())])
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([], TS)
