"""The "kbroker" Spark data source against an embedded kbroker broker.

Data is produced with confluent-kafka (an independent client) and read back
through Spark: batch reads, options, streaming with maxOffsetsPerTrigger,
failOnDataLoss after retention removed offsets, and writes.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import TopicPartition
from kbroker.spark.offsets import rate_limit

ck = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def produce(servers: str, topic: str, n: int, *, headers: bool = True, **conf: Any,
            ) -> dict[tuple[int, int], dict[str, Any]]:
    """n records with keys, values, some headers and explicit timestamps; returns them by
    (partition, offset) as the broker acknowledged them."""
    producer = ck.Producer({"bootstrap.servers": servers, "linger.ms": 2, **conf})
    acked: dict[tuple[int, int], dict[str, Any]] = {}

    def delivered(sent: dict[str, Any]) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            assert err is None, err
            acked[(msg.partition(), msg.offset())] = {**sent, "timestamp": msg.timestamp()[1]}
        return on_delivery

    for i in range(n):
        hdrs = [("i", b"%d" % i), ("none", None)] if headers and i % 2 else None
        key, value = (b"k%d" % i if i % 5 else None), b"value-%d" % i
        sent = {"key": key, "value": value,
                "headers": [{"key": k, "value": v} for k, v in hdrs] if hdrs else None}
        producer.produce(topic, key=key, value=value, headers=hdrs,
                         timestamp=1_700_000_000_000 + i, on_delivery=delivered(sent))
    assert producer.flush(30) == 0
    assert len(acked) == n
    return acked


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def read(spark: Any, servers: str, **options: str) -> Any:
    reader = spark.read.format("kbroker").option("kafka.bootstrap.servers", servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_matches_what_was_produced(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 600)
    df = read(spark, servers, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = df.collect()
    assert len(rows) == 600
    got = {}
    for r in rows:
        assert r.topic == topic and r.timestampType == 0
        got[(r.partition, r.offset)] = {
            "key": r.key, "value": r.value,
            "timestamp": round(r.timestamp.timestamp() * 1000),
            "headers": None if r.headers is None else
            [{"key": h.key, "value": h.value} for h in r.headers]}
    got = {k: {**v, "key": None if v["key"] is None else bytes(v["key"]),
               "value": bytes(v["value"]),
               "headers": v["headers"] and [{"key": h["key"], "value": None if h["value"] is None
                                             else bytes(h["value"])} for h in v["headers"]]}
           for k, v in got.items()}
    assert got == acked
    assert {p for p, _ in acked} == {0, 1, 2}
    assert "headers" not in read(spark, servers, subscribe=topic).columns


def test_read_committed_skips_aborted_and_open_transactions(spark: Any, broker: Broker,
                                                            topic: str) -> None:
    servers = broker.bootstrap_servers
    p = ck.Producer({"bootstrap.servers": servers, "transactional.id": f"spark-{topic}"})
    p.init_transactions(30)
    for txn in range(6):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, b"%d-%d" % (txn, i), partition=i % 3)
        p.flush(30)
        if txn % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(30)
    committed = sorted(bytes(r.value) for r in read(
        spark, servers, subscribe=topic, **{"kafka.isolation.level": "read_committed"}).collect())
    assert committed == sorted(b"%d-%d" % (t, i) for t in (0, 2, 4) for i in range(10))
    everything = [bytes(r.value) for r in read(spark, servers, subscribe=topic).collect()]
    assert len(everything) == 61 and b"open" in everything
    p.abort_transaction(30)


def test_streaming_read_committed_waits_for_an_open_transaction(
        spark: Any, broker: Broker, topic: str, tmp_path: Path) -> None:
    """A checkpointed streaming query with read_committed while producer "a" commits and
    aborts transactions and producer "b" keeps one open on partition 0: the query reads
    the other partitions on, stops partition 0 at the open transaction's first offset
    (its last stable offset) across a restart from the checkpoint, and once "b" commits,
    the parquet output holds every committed record exactly once and nothing aborted."""
    servers = broker.bootstrap_servers
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    a = ck.Producer({"bootstrap.servers": servers, "transactional.id": f"{topic}-a",
                     "linger.ms": 2})
    b = ck.Producer({"bootstrap.servers": servers, "transactional.id": f"{topic}-b",
                     "transaction.timeout.ms": 300000})
    placed: dict[bytes, tuple[int, int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[msg.value()] = (msg.partition(), msg.offset())

    def transaction(producer: Any, name: str, partitions: range, n: int,
                    commit: bool | None) -> list[bytes]:
        producer.begin_transaction()
        values = [b"%s-%d" % (name.encode(), i) for i in range(n)]
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=partitions[i % len(partitions)],
                             on_delivery=delivered)
        assert producer.flush(30) == 0
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
        return values

    def start() -> Any:
        return (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("kafka.isolation.level", "read_committed").load()
                .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
                .writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="200 milliseconds").start())

    def output() -> list[tuple[int, int, bytes]]:
        if not (out / "_spark_metadata").exists():
            return []
        rows = spark.read.schema("partition INT, offset BIGINT, value STRING").parquet(str(out))
        return sorted((r.partition, r.offset, r.value.encode()) for r in rows.collect())

    def expected(values: list[bytes]) -> list[tuple[int, int, bytes]]:
        return sorted((*placed[v], v) for v in values)

    def checkpointed_partition_0() -> int:
        offsets = sorted((f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()),
                         key=lambda f: int(f.name))
        return json.loads(offsets[-1].read_text().splitlines()[-1])[topic]["0"]

    a.init_transactions(30)
    b.init_transactions(30)
    committed = transaction(a, "a0", range(3), 12, True)
    transaction(a, "a1", range(3), 12, False)
    query = start()
    try:
        wait_for(lambda: output() == expected(committed), 120, "the first transaction")
        open_values = transaction(b, "b", range(1), 5, None)  # open on partition 0 only
        stable = min(placed[v][1] for v in open_values)  # partition 0's last stable offset
        later = transaction(a, "a2", range(3), 12, True)
        transaction(a, "a3", range(3), 12, False)
        later += transaction(a, "a4", range(3), 12, True)
        readable = committed + [v for v in later if placed[v][0] != 0]
        wait_for(lambda: output() == expected(readable), 120, "partitions 1 and 2 read on")
        query.stop()
        assert checkpointed_partition_0() == stable
        query = start()  # from the checkpoint, the transaction still open
        time.sleep(3)  # triggers at 200 ms: none may read partition 0 past the open transaction
        assert output() == expected(readable)
        assert checkpointed_partition_0() == stable
        b.commit_transaction(30)
        everything = committed + later + open_values
        wait_for(lambda: output() == expected(everything), 120, "the committed transaction")
        rows = output()
        assert len({(p, o) for p, o, _ in rows}) == len(rows) == 12 * 3 + 5
    finally:
        query.stop()
        del a, b


def test_offsets_options(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 300, headers=False)
    counts = {p: sum(1 for q, _ in acked if q == p) for p in range(3)}
    df = read(spark, servers, assign=json.dumps({topic: [0, 2]}),
              startingOffsets=json.dumps({topic: {"0": 5, "2": -2}}),
              endingOffsets=json.dumps({topic: {"0": 10, "2": -1}}))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 10)] + [(2, o) for o in range(counts[2])]

    pattern = read(spark, servers, subscribePattern=topic.rsplit("-", 1)[0] + "-.*",
                   minPartitions="6").where(f"topic = '{topic}'")
    assert 6 <= pattern.rdd.getNumPartitions() <= 8  # a hint, split in proportion (as Spark)
    assert pattern.count() == 300

    middle = 1_700_000_000_000 + 150
    by_ts = read(spark, servers, subscribe=topic, startingTimestamp=str(middle))
    assert by_ts.count() == sum(1 for v in acked.values() if v["timestamp"] >= middle)

    with pytest.raises(Exception, match="startingOffsets=latest"):
        read(spark, servers, subscribe=topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("kbroker").schema("value binary")
         .option("kafka.bootstrap.servers", servers).option("subscribe", topic).load().collect())
    with pytest.raises(Exception, match="exactly one of"):
        read(spark, servers, subscribe=topic, assign=json.dumps({topic: [0]})).collect()


def run_available_now(spark: Any, servers: str, topic: str, checkpoint: Path, out: Path,
                      **options: str) -> Any:
    """One availableNow run into a parquet file sink at `out` (recoverable from the
    checkpoint, unlike the memory sink)."""
    reader = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return query


def test_streaming_max_offsets_per_trigger(spark: Any, broker: Broker, topic: str,
                                           tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 500, headers=False)
    ends = {TopicPartition(topic, p): sum(1 for q, _ in acked if q == p) for p in range(3)}
    query = run_available_now(spark, servers, topic, tmp_path / "ckpt", tmp_path / "out",
                              startingOffsets="earliest", maxOffsetsPerTrigger="120")
    steps = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    expect = []
    start = {tp: 0 for tp in ends}
    while start != ends:  # Spark's proportional rounding, step by step
        nxt = rate_limit(120, start, ends)
        expect.append(sum(nxt[tp] - start[tp] for tp in ends))
        start = nxt
    assert steps == expect
    assert all(s <= 120 for s in steps) and sum(steps) == 500
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(acked)

    # the checkpoint holds Spark's offset JSON: {"topic": {"partition": next offset}}
    offset_files = sorted((p for p in (tmp_path / "ckpt" / "offsets").iterdir()
                           if p.name.isdigit()), key=lambda p: int(p.name))
    last = json.loads(offset_files[-1].read_text().splitlines()[-1])
    assert last == {topic: {str(tp.partition): n for tp, n in sorted(ends.items())}}

    # more data, same checkpoint: only the new records
    produce(servers, topic, 50, headers=False)
    query = run_available_now(spark, servers, topic, tmp_path / "ckpt", tmp_path / "out")
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50
    assert spark.read.parquet(str(tmp_path / "out")).count() == 550


@pytest.fixture
def small_retention_broker(tmp_path: Path) -> Any:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "num.partitions": "1", "log.segment.bytes": "1024",
             "log.retention.bytes": "2048", "log.retention.check.interval.ms": "100"}
    with Broker(props) as b:
        yield b


def wait_log_start(servers: str, topic: str, above: int, timeout_s: float = 30.0) -> int:
    from kbroker.client import KafkaClient

    tp = TopicPartition(topic, 0)
    with KafkaClient(servers) as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            earliest = client.list_offsets({tp: -2})[tp]
            if earliest > above:
                return earliest
            time.sleep(0.1)
    raise AssertionError(f"log start offset of {tp} stayed <= {above}")


def test_fail_on_data_loss_after_retention(spark: Any, small_retention_broker: Broker,
                                           topic: str, tmp_path: Path) -> None:
    servers = small_retention_broker.bootstrap_servers
    produce(servers, topic, 5, headers=False, **{"linger.ms": 0})
    run_available_now(spark, servers, topic, tmp_path / "ckpt", tmp_path / "out",
                      startingOffsets="earliest")
    assert spark.read.parquet(str(tmp_path / "out")).count() == 5

    producer = ck.Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(60):  # one small batch each: many segments, the old ones deleted
        producer.produce(topic, value=b"later-%d" % i)
        producer.flush(10)
    earliest = wait_log_start(servers, topic, 5)

    shutil.copytree(tmp_path / "ckpt", tmp_path / "ckpt2")
    shutil.copytree(tmp_path / "out", tmp_path / "out2")
    with pytest.raises(Exception, match="failOnDataLoss"):
        run_available_now(spark, servers, topic, tmp_path / "ckpt", tmp_path / "out")
    run_available_now(spark, servers, topic, tmp_path / "ckpt2", tmp_path / "out2",
                      failOnDataLoss="false")
    offsets = sorted(r.offset for r in spark.read.parquet(str(tmp_path / "out2")).collect()
                     if r.offset >= 5)  # the second run: from the log start on
    assert offsets[0] >= earliest
    assert offsets == list(range(offsets[0], 65))
    # batch reads check it too
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, servers, subscribe=topic,
             startingOffsets=json.dumps({topic: {"0": 0}})).collect()

    # and so do the tasks, when offsets go between planning and reading
    from kbroker.spark.offsets import DataLossError, OffsetRange
    from kbroker.spark.options import source_options
    from kbroker.spark.partition_reader import PartitionReader
    from kbroker.spark.source import arrow_schema, kafka_schema

    opts = source_options({"kafka.bootstrap.servers": servers, "subscribe": topic}, False)
    planned = OffsetRange(topic, 0, 0, 65)
    with pytest.raises(DataLossError, match="removed"):
        list(PartitionReader(opts.client, planned, arrow_schema(kafka_schema())))
    rows = [o for b in PartitionReader(opts.client, planned, arrow_schema(kafka_schema()),
                                       fail_on_data_loss=False)
            for o in b.column("offset").to_pylist()]
    assert rows == list(range(rows[0], 65)) and rows[0] >= earliest


def test_write_then_read_back(spark: Any, broker: Broker, topic: str, tmp_path: Path) -> None:
    from kbroker._core.batch_encode import partition_for_key

    servers = broker.bootstrap_servers
    source = spark.createDataFrame(
        [(f"user-{i}" if i % 4 else None, f"payload-{i}", i % 3 if i % 10 == 0 else None)
         for i in range(400)], "key string, value string, partition int")
    (source.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", topic).save())
    rows = read(spark, servers, subscribe=topic).collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(f"payload-{i}"
                                                                  for i in range(400))
    for r in rows:
        i = int(bytes(r.value).decode().split("-")[1])
        if i % 10 == 0:
            assert r.partition == i % 3
        elif r.key is not None:
            assert r.partition == partition_for_key(bytes(r.key), 3)

    # a streaming write of the same rows, with headers, to a topic column
    target = topic + "-copy"
    query = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("includeHeaders", "true").load()
             .selectExpr("key", "value", f"'{target}' AS topic",
                         "array(named_struct('key', 'src', 'value', CAST(offset AS STRING)"
                         "::binary)) AS headers")
             .writeStream.format("kbroker").option("kafka.bootstrap.servers", servers)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    copied = read(spark, servers, subscribe=target, includeHeaders="true").collect()
    assert len(copied) == 400
    assert all(r.headers[0].key == "src" for r in copied)
