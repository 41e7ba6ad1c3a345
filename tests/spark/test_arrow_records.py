"""Record batches <-> Arrow columns (kbroker._core.batch_decode / batch_encode), no Spark.

Batches to decode come from tests/batches.py, an independent writer (its own
varints, the crc32c package); batches we encode are read back with kbroker's
record iterator, and keyed partitions are checked against librdkafka's
murmur2_random and Kafka's published murmur2 values.
"""

from __future__ import annotations

import importlib.machinery
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from kbroker._core import batch_decode, batch_encode  # noqa: E402
from kbroker._core.batch_decode import ColumnarRecords, CorruptRecordError, scan_next_offset  # noqa: E402
from kbroker._core.batch_encode import murmur2, partition_for_key  # noqa: E402
from kbroker.records.compression import Codec  # noqa: E402
from kbroker.spark.arrow import decode_to_batch  # noqa: E402
from kbroker.spark.sink import RecordBatchProducer, _binary_column, _headers_column  # noqa: E402
from kbroker.spark.source import arrow_schema, kafka_schema  # noqa: E402
from tests.batches import Rec, decode_batches, make_batch  # noqa: E402

SCHEMA = arrow_schema(kafka_schema(include_headers=True))
TS = 1_700_000_000_000


@pytest.mark.parametrize("module", [batch_decode, batch_encode])
def test_modules_are_compiled(module: object) -> None:
    path = getattr(module, "__file__", "") or ""
    assert path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), path


def sample_records() -> list[Rec]:
    return [
        Rec(b"v0", key=b"k0", headers=[("a", b"1"), ("b", None)]),
        Rec(None, key=b"k1", timestamp_delta=5),
        Rec(b"", key=None, timestamp_delta=7, headers=[("c", b"")]),
        Rec(b"x" * 300, key=b"k3" * 100, timestamp_delta=-3),
    ]


def expected_rows(base_offset: int, log_append: bool = False, max_ts: int = 0) -> list[dict]:
    rows = []
    for i, r in enumerate(sample_records()):
        ts = max_ts if log_append else TS + r.timestamp_delta
        rows.append({"key": r.key, "value": r.value, "topic": "t", "partition": 2,
                     "offset": base_offset + i, "timestamp": ts, "timestampType": int(log_append),
                     "headers": [{"key": k, "value": v} for k, v in r.headers] or None})
    return rows


def as_rows(batch: Any) -> list[dict]:
    batch.validate(full=True)
    rows = batch.to_pylist()
    for row in rows:  # back to Kafka's milliseconds
        row["timestamp"] = int(row["timestamp"].timestamp() * 1000)
    return rows


@pytest.mark.parametrize("codec", list(Codec))
def test_decode_every_codec(codec: Codec) -> None:
    data = make_batch(sample_records(), base_offset=40, base_timestamp=TS, codec=codec)
    assert as_rows(decode_to_batch(data, 0, 100, "t", 2, SCHEMA)) == expected_rows(40)


def test_compressed_batch_needs_a_decompress() -> None:
    data = make_batch(sample_records(), base_offset=40, base_timestamp=TS, codec=Codec.GZIP)
    with pytest.raises(CorruptRecordError, match="offset 40 is compressed and no decompress"):
        ColumnarRecords().add_records(data, 0, 100)


def test_log_append_time_uses_max_timestamp() -> None:
    data = make_batch(sample_records(), base_offset=0, base_timestamp=TS, attributes=0x08,
                      max_timestamp=TS + 1000)
    assert as_rows(decode_to_batch(data, 0, 100, "t", 2, SCHEMA)) == \
        expected_rows(0, log_append=True, max_ts=TS + 1000)


def test_range_cuts_inside_batches_and_skips_control_batches() -> None:
    b1 = make_batch(sample_records(), base_offset=10, base_timestamp=TS)
    control = make_batch([Rec(b"\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")], base_offset=14,
                         attributes=0x30)
    b2 = make_batch(sample_records(), base_offset=15, base_timestamp=TS)
    cols = ColumnarRecords(include_headers=False)
    next_offset, first = cols.add_records(b1 + control + b2, 12, 17)
    assert (next_offset, first) == (17, 12)
    batch = decode_to_batch(b1 + control + b2, 12, 17, "t", 2,
                            arrow_schema(kafka_schema(include_headers=False)))
    assert batch.column("offset").to_pylist() == [12, 13, 15, 16]
    assert "headers" not in batch.schema.names


def test_read_committed_skips_aborted_transactions() -> None:
    from kbroker.records.control_record import end_txn_marker

    def txn(pid: int, base: int, n: int = 2) -> bytes:
        return make_batch([Rec(b"%d-%d" % (pid, i)) for i in range(n)], base_offset=base,
                          producer_id=pid, producer_epoch=0, base_sequence=0, attributes=0x10)

    def marker(pid: int, offset: int, commit: bool) -> bytes:
        data = bytearray(end_txn_marker(pid, 0, commit, 0, TS))
        data[0:8] = offset.to_bytes(8, "big")
        return bytes(data)

    # pid 1 aborted (0-1, marker 4), pid 2 committed (2-3, marker 5), pid 1 again (6-7) open
    data = txn(1, 0) + txn(2, 2) + marker(1, 4, False) + marker(2, 5, True) + txn(1, 6)
    cols = ColumnarRecords()
    assert cols.add_records(data, 0, 8, [(1, 0)]) == (8, 2)
    assert cols.num_rows == 4  # 2, 3 (pid 2) and 6, 7 (pid 1's next transaction)
    batch = decode_to_batch(data, 0, 8, "t", 0, arrow_schema(kafka_schema(include_headers=False)))
    assert batch.column("offset").to_pylist() == [0, 1, 2, 3, 6, 7]  # read_uncommitted
    cols = ColumnarRecords()
    cols.add_records(data, 1, 8, [(1, 0)])
    assert cols.num_rows == 4  # offsets 2, 3, 6, 7: the abort marker ended pid 1's skipping


def test_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    b1 = make_batch(sample_records(), base_offset=0, base_timestamp=TS)
    b2 = make_batch(sample_records(), base_offset=4, base_timestamp=TS)
    data = b1 + b2[: len(b2) - 5]
    assert scan_next_offset(data, 0) == 4
    cols = ColumnarRecords(include_headers=True)
    assert cols.add_records(data, 0, 100) == (4, 0)
    assert cols.num_rows == 4
    assert scan_next_offset(b"", 7) == 7


def test_crc_mismatch_is_an_error() -> None:
    data = bytearray(make_batch(sample_records(), base_offset=0, base_timestamp=TS))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        ColumnarRecords().add_records(bytes(data), 0, 100)
    ColumnarRecords(check_crcs=False).add_records(bytes(data), 0, 100)


def test_take_starts_over() -> None:
    data = make_batch(sample_records(), base_offset=0, base_timestamp=TS)
    cols = ColumnarRecords(include_headers=True)
    cols.add_records(data, 0, 2)
    assert cols.take()["num_rows"] == 2
    cols.add_records(data, 2, 4)
    assert cols.num_rows == 2


def test_murmur2_matches_kafka() -> None:
    # values from Kafka's UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482,
             b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}
    assert {k: murmur2(k) for k in cases} == cases


def arrow_input(n: int) -> Any:
    keys = pa.array([None if i % 7 == 0 else f"key-{i}" for i in range(n)], pa.string())
    values = pa.array([None if i % 11 == 0 else b"v" * (i % 50) for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "h", "value": b"%d" % i}, {"key": "n", "value": None}]
                        if i % 3 == 0 else None for i in range(n)],
                       SCHEMA.field("headers").type)
    return pa.RecordBatch.from_arrays([keys, values, headers], ["key", "value", "headers"])


def test_encode_round_trip_and_partitions() -> None:
    rb = arrow_input(1000).slice(3)  # a non-zero array offset
    out = batch_encode.encode_batches(rb.num_rows, _binary_column(rb.column("key")),
                                      _binary_column(rb.column("value")), None,
                                      _headers_column(rb.column("headers")), 5, 4, TS, 4096)
    assert len(out) > 5  # max_batch_bytes split the partitions' rows into several batches
    rows: dict[int, list] = {}
    for partition, data in out:
        (base, _, records), = decode_batches(data)
        assert base == 0
        rows.setdefault(partition, []).extend((k, v) for _, _, k, v in records)
    expect: dict[int, list] = {}
    for i in range(3, 1000):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        p = 4 if key is None else partition_for_key(key, 5)
        expect.setdefault(p, []).append((key, None if i % 11 == 0 else b"v" * (i % 50)))
    assert rows == expect
    cols = ColumnarRecords(include_headers=True)
    for _, data in out:
        cols.add_records(data, 0, 1 << 40)
    assert cols.num_headers == 2 * len([i for i in range(3, 1000) if i % 3 == 0])


def test_keyed_partitions_match_librdkafka_murmur2_random(broker, topic) -> None:  # type: ignore[no-untyped-def]
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers,
                            "partitioner": "murmur2_random"})
    placed: dict[bytes, int] = {}

    def record(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None
        placed[msg.key()] = msg.partition()

    for i in range(300):
        producer.produce(topic, key=b"user-%d" % i, value=b"x", on_delivery=record)
    assert producer.flush(30) == 0
    assert placed == {k: partition_for_key(k, 3) for k in placed}


def test_producer_writes_what_the_reader_reads(broker, topic) -> None:  # type: ignore[no-untyped-def]
    from kbroker.spark.offsets import OffsetPlanner, OffsetRange
    from kbroker.spark.options import sink_options, source_options
    from kbroker.spark.partition_reader import PartitionReader

    servers = broker.bootstrap_servers
    producer = RecordBatchProducer(sink_options({"kafka.bootstrap.servers": servers,
                                                 "topic": topic}))
    rb = arrow_input(500)
    producer.write(rb)
    producer.close()
    opts = source_options({"kafka.bootstrap.servers": servers, "subscribe": topic}, False)
    planner = OffsetPlanner(opts)
    ends = planner.latest(planner.topic_partitions())
    planner.close()
    assert sum(ends.values()) == 500
    got = []
    for tp, end in ends.items():
        for batch in PartitionReader(opts.client, OffsetRange(topic, tp.partition, 0, end),
                                     SCHEMA):
            got += [(r["key"], r["value"], r["headers"]) for r in batch.to_pylist()]
    want = [(k.encode() if k else None, v, h) for k, v, h in
            zip(*(rb.column(c).to_pylist() for c in ("key", "value", "headers")), strict=True)]
    assert sorted(got, key=repr) == sorted(want, key=repr)
