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
from kbroker._core.batch_decode import (  # noqa: E402
    BufferPool,
    ColumnarRecords,
    CorruptRecordError,
    scan_next_offset,
)
from kbroker._core.batch_encode import murmur2, partition_for_key  # noqa: E402
from kbroker.records.compression import Codec  # noqa: E402
from kbroker.spark.arrow import decode_to_batch, record_batch  # noqa: E402
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


def step_records(partition: int, step: int, n: int) -> list[Rec]:
    """Records of one decode step: sizes, nulls and headers change from step to step, so
    a buffer lent again holds other bytes (and other null bits) than its new contents."""
    return [Rec(None if (i + step) % 5 == 0 else b"%d-%d-%d|" % (partition, step, i) * (1 + (i + step) % 9),
                key=None if (i + step) % 3 == 0 else b"k%d" % (step * n + i),
                headers=[(f"h{i}", b"%d" % step), ("n", None)] if (i + step) % 2 else [])
            for i in range(n)]


def step_rows(partition: int, step: int, n: int, base: int) -> list[dict]:
    return [{"key": r.key, "value": r.value, "topic": "t", "partition": partition,
             "offset": base + i, "timestamp": TS, "timestampType": 0,
             "headers": [{"key": k, "value": v} for k, v in r.headers] or None}
            for i, r in enumerate(step_records(partition, step, n))]


def test_buffers_lent_again_leave_earlier_batches_intact() -> None:
    """Two partitions' decoders share a pool, as the Spark reader's decoders do. Each
    step's batch is checked when made; every other one is kept, the rest are dropped, so
    their memory goes back to the pool and the next steps decode into it. At the end,
    every kept batch still holds exactly its own records."""
    pool = BufferPool()
    decoders = {p: ColumnarRecords(include_headers=True, pool=pool) for p in (0, 1)}
    kept = []
    for step in range(8):
        n = 40 + 13 * (step % 3)
        for p, cols in decoders.items():
            base = 1000 * step
            data = make_batch(step_records(p, step, n), base_offset=base, base_timestamp=TS)
            assert cols.add_records(data, base, base + n) == (base + n, base)
            batch = record_batch(cols.take(), "t", p, SCHEMA)
            want = step_rows(p, step, n, base)
            assert as_rows(batch) == want
            if step % 2 == 0:
                kept.append((batch, want))
            del batch
    assert pool.lent >= 16 * 7  # every column of every step after the first, from spares
    for batch, want in kept:
        assert as_rows(batch) == want


def test_the_pool_keeps_within_its_bounds() -> None:
    data = make_batch(sample_records(), base_offset=0, base_timestamp=TS)
    none_kept = BufferPool(max_bytes=0)
    cols = ColumnarRecords(include_headers=True, pool=none_kept)
    for _ in range(3):
        cols.add_records(data, 0, 100)
        assert as_rows(record_batch(cols.take(), "t", 2, SCHEMA)) == expected_rows(0)
    assert (none_kept.lent, none_kept.held_bytes) == (0, 0)
    pool = BufferPool(max_bytes=1 << 20)
    cols = ColumnarRecords(include_headers=True, pool=pool)
    batches = []
    for _ in range(5):  # five batches alive, then all freed: at most two spares per column
        cols.add_records(data, 0, 100)
        batches.append(cols.take())
    batches.clear()
    assert 0 < pool.held_bytes <= 2 * 16 * 4096
    del cols  # the decoder's own buffers go back too, within the bounds
    assert pool.held_bytes <= 2 * 16 * 4096


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


def test_reader_batches_of_several_partitions_survive_reuse(broker, topic) -> None:  # type: ignore[no-untyped-def]
    """PartitionReaders of three partitions over one process's pool, their batches held
    as pyspark holds them (a task's first batch to its end, each other one until the
    next arrives) and some to the end of the test: every batch holds exactly the records
    produced, in offset order, and later batches were decoded into memory lent again."""
    ck = pytest.importorskip("confluent_kafka")
    from kbroker.spark.arrow import BUFFER_POOL
    from kbroker.spark.offsets import OffsetRange
    from kbroker.spark.options import source_options
    from kbroker.spark.partition_reader import PartitionReader

    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers,
                            "linger.ms": 0, "batch.num.messages": 25})
    sent: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: [], 2: []}
    for i in range(1800):
        p = i % 3
        key, value = b"k%d" % i, b"%d:%d;" % (p, i) * (1 + i % 17)
        producer.produce(topic, value, key, partition=p)
        sent[p].append((key, value))
        if i % 100 == 99:
            producer.flush(30)
    assert producer.flush(30) == 0
    del producer
    opts = source_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                           "subscribe": topic, "kafka.max.partition.fetch.bytes": "4096",
                           "maxRecordsPerArrowBatch": "100"}, False)
    schema = arrow_schema(kafka_schema())
    lent = BUFFER_POOL.lent
    kept = []
    for p, records in sent.items():
        got = []
        first = previous = None
        reader = PartitionReader(opts.client, OffsetRange(topic, p, 0, len(records)), schema,
                                 max_records_per_arrow_batch=opts.max_records_per_arrow_batch)
        for i, batch in enumerate(reader):
            rows = [(r["offset"], r["key"], r["value"]) for r in batch.to_pylist()]
            got += rows
            first = batch if first is None else first
            previous = batch
            if i % 3 == 1:
                kept.append((batch, rows))
        assert got == [(o, k, v) for o, (k, v) in enumerate(records)]
        del first, previous
    assert BUFFER_POOL.lent > lent and len(kept) >= 3
    for batch, rows in kept:
        assert [(r["offset"], r["key"], r["value"]) for r in batch.to_pylist()] == rows
