"""Spark's Kafka options end to end: each one changes what is read or written as Spark's
built-in source and sink do, or is refused.

Records are produced with confluent-kafka, read back through Spark and, for the sink,
inspected as the record batches the broker stored (codec, producer id, sequences,
timestamps), fetched with kbroker's client.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import KafkaClient, TopicPartition
from tests.spark.test_spark_source import produce, read, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def stored_batches(servers: str, topic: str, partitions: int = 3) -> list[dict[str, Any]]:
    """The v2 batch headers of every batch in `topic`, as stored."""
    out = []
    with KafkaClient(servers) as client:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            end = client.list_offsets({tp: -1})[tp]
            offset = 0
            while offset < end:
                leader = client.leader_for(tp)
                client.send_fetch(leader, client.fetch_request({tp: offset}, 8 << 20))
                records = bytes(client.receive_fetch(leader)[tp].records or b"")
                pos = 0
                while pos + 61 <= len(records):
                    size = 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
                    b = records[pos:pos + size]
                    count = int.from_bytes(b[57:61], "big")
                    out.append({
                        "partition": p, "base_offset": int.from_bytes(b[0:8], "big"),
                        "size": size, "codec": int.from_bytes(b[21:23], "big") & 7,
                        "base_timestamp": int.from_bytes(b[27:35], "big", signed=True),
                        "max_timestamp": int.from_bytes(b[35:43], "big", signed=True),
                        "producer_id": int.from_bytes(b[43:51], "big", signed=True),
                        "base_sequence": int.from_bytes(b[53:57], "big", signed=True),
                        "count": count})
                    offset = int.from_bytes(b[0:8], "big") + count
                    pos += size
    return out


def test_max_records_per_partition_plans_more_tasks(spark: Any, broker: Broker,
                                                     topic: str) -> None:
    import confluent_kafka as ck

    servers = broker.bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": servers})
    for p in range(3):
        for i in range(20):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    df = read(spark, servers, subscribe=topic, maxRecordsPerPartition="5")
    assert df.rdd.getNumPartitions() == 12  # Spark: ceil(20 / 5) per partition
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(
        b"%d-%d" % (p, i) for p in range(3) for i in range(20))
    both = read(spark, servers, subscribe=topic, maxRecordsPerPartition="10",
                minPartitions="12")
    assert both.rdd.getNumPartitions() == 12 and both.count() == 60


def test_option_names_are_case_insensitive(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    produce(servers, topic, 30, headers=False)
    df = (spark.read.format("kbroker").option("KAFKA.BOOTSTRAP.SERVERS", servers)
          .option("Subscribe", topic).option("STARTINGOFFSETS", "earliest")
          .option("IncludeHeaders", "TRUE").load())
    assert "headers" in df.columns and df.count() == 30


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(
        spark: Any, broker: Broker, topic: str, tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    produce(servers, topic, 100, headers=False)

    def start(delay: str, name: str) -> Any:
        return (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("minOffsetsPerTrigger", "500").option("maxTriggerDelay", delay).load()
                .writeStream.format("memory").queryName(name)
                .option("checkpointLocation", str(tmp_path / name))
                .trigger(processingTime="200 milliseconds").start())

    def rows(name: str) -> int:
        return spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n

    query = start("60s", "min_offsets_long")
    try:
        # as Spark's source: the first trigger of a run is not delayed (lastTriggerMillis 0)
        wait_for(lambda: rows("min_offsets_long") == 100, 120, "the first batch")
        produce(servers, topic, 100, headers=False)
        time.sleep(5)  # 25 triggers: all skipped, 200 < 500 and 60 s not passed
        assert rows("min_offsets_long") == 100
        produce(servers, topic, 300, headers=False)
        wait_for(lambda: rows("min_offsets_long") == 500, 120, "the batch of 400")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert batches == [100, 400]
    finally:
        query.stop()

    query = start("2s", "min_offsets_short")
    try:  # a new run: 500 at once, then 10 wait for maxTriggerDelay
        wait_for(lambda: rows("min_offsets_short") == 500, 120, "the first batch")
        produce(servers, topic, 10, headers=False)
        wait_for(lambda: rows("min_offsets_short") == 510, 120, "the delayed batch")
    finally:
        query.stop()


def test_sink_compresses_with_the_codec_asked(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    df = spark.range(20_000).selectExpr("CAST(id AS STRING) AS key",
                                        "repeat(CAST(id % 10 AS STRING), 100) AS value")
    for codec, number in (("lz4", 3), ("zstd", 4), ("gzip", 1), ("snappy", 2), ("none", 0)):
        target = f"{topic}-{codec}"
        (df.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
         .option("topic", target).option("kafka.compression.type", codec).save())
        batches = stored_batches(servers, target)
        assert {b["codec"] for b in batches} == {number}
        stored = sum(b["size"] for b in batches)
        if number:
            assert stored < 20_000 * 100 / 5, (codec, stored)
        else:
            assert stored > 20_000 * 100
        back = read(spark, servers, subscribe=target).selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        assert back.exceptAll(df).count() == 0 and back.count() == 20_000


def test_sink_is_idempotent_by_default(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    df = spark.range(3000).selectExpr("CAST(id AS STRING) AS value")
    (df.repartition(2).write.format("kbroker").mode("append")
     .option("kafka.bootstrap.servers", servers).option("topic", topic)
     .option("kafka.batch.size", "4096").save())
    batches = stored_batches(servers, topic)
    assert all(b["producer_id"] >= 0 for b in batches)
    # one producer id per task; its batches per partition numbered without gaps from 0
    by_producer: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for b in batches:
        by_producer.setdefault((b["producer_id"], b["partition"]), []).append(b)
    assert len({pid for pid, _ in by_producer}) == 2
    for chain in by_producer.values():
        sequence = 0
        for b in sorted(chain, key=lambda b: b["base_offset"]):
            assert b["base_sequence"] == sequence
            sequence += b["count"]
    plain = topic + "-plain"
    (df.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", plain).option("kafka.enable.idempotence", "false").save())
    assert {b["producer_id"] for b in stored_batches(servers, plain)} == {-1}
    with pytest.raises(Exception, match="acks=all"):
        (df.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
         .option("topic", plain).option("kafka.acks", "1")
         .option("kafka.enable.idempotence", "true").save())


def test_sink_max_request_size(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    df = spark.range(2000).selectExpr("CAST(id AS STRING) AS key",
                                      "repeat('x', 200) AS value")
    (df.coalesce(1).write.format("kbroker").mode("append")
     .option("kafka.bootstrap.servers", servers).option("topic", topic)
     .option("kafka.max.request.size", "10000").save())
    batches = stored_batches(servers, topic)
    assert sum(b["count"] for b in batches) == 2000
    assert max(b["size"] for b in batches) <= 10_000
    big = spark.createDataFrame([("y" * 20_000,)], "value string")
    with pytest.raises(Exception, match="larger than kafka.max.request.size"):
        (big.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
         .option("topic", topic).option("kafka.max.request.size", "10000").save())


def test_sink_partitioner_class(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    df = spark.range(300).selectExpr("'same-key' AS key", "CAST(id AS STRING) AS value")

    def write(target: str, partitioner: str) -> list[int]:
        (df.coalesce(1).write.format("kbroker").mode("append")
         .option("kafka.bootstrap.servers", servers).option("topic", target)
         .option("kafka.partitioner.class", f"org.apache.kafka.clients.producer.{partitioner}")
         .save())
        rows = read(spark, servers, subscribe=target).select("partition").collect()
        return [sum(1 for r in rows if r.partition == p) for p in range(3)]

    assert write(topic + "-rr", "RoundRobinPartitioner") == [100, 100, 100]  # keys ignored
    sticky = write(topic + "-sticky", "UniformStickyPartitioner")
    assert sorted(sticky) == [0, 0, 300]  # one Arrow batch: one sticky partition
    keyed = write(topic + "-default", "internals.DefaultPartitioner")
    assert sorted(keyed) == [0, 0, 300]


def test_sink_takes_a_source_dataframe_as_it_is(spark: Any, broker: Broker, topic: str,
                                                tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 200)  # explicit timestamps, headers on odd records
    source = read(spark, servers, subscribe=topic, includeHeaders="true")
    assert source.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                              "timestampType", "headers"]
    copy = topic + "-copy"
    (source.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", copy).save())  # offset and timestampType are ignored, as in Spark
    got = {bytes(r.value): r for r in read(spark, servers, subscribe=copy,
                                           includeHeaders="true").collect()}
    assert len(got) == 200
    for (partition, _), sent in acked.items():
        r = got[sent["value"]]
        assert r.partition == partition  # the partition column is written too
        assert round(r.timestamp.timestamp() * 1000) == sent["timestamp"]  # the timestamp
        headers = None if r.headers is None else [
            {"key": h.key, "value": None if h.value is None else bytes(h.value)}
            for h in r.headers]
        assert headers == sent["headers"]

    # a timestamp as double seconds (Spark's writer casts it), nulls: now
    doubles = spark.createDataFrame([("a", 1_700_000_000.5), ("b", None)],
                                    "value string, timestamp double")
    (doubles.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", topic + "-double").save())
    rows = {bytes(r.value): r.timestamp.timestamp() for r in read(
        spark, servers, subscribe=topic + "-double").collect()}
    assert rows[b"a"] == 1_700_000_000.5
    assert abs(rows[b"b"] - time.time()) < 600
    bad = spark.createDataFrame([("a", 1)], "value string, timestamp bigint")
    with pytest.raises(Exception, match="column timestamp must be"):
        (bad.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
         .option("topic", topic).save())


def test_save_modes(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    df = spark.createDataFrame([("v",)], "value string")

    def save(mode: str | None) -> None:
        writer = df.write.format("kbroker").option("kafka.bootstrap.servers", servers) \
            .option("topic", topic)
        (writer if mode is None else writer.mode(mode)).save()

    with pytest.raises(Exception, match="Overwrite is not allowed"):
        save("overwrite")
    # Spark itself refuses ErrorIfExists (the default) and Ignore for Python data sources
    for mode in (None, "errorifexists", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            save(mode)
    save("append")
    assert read(spark, servers, subscribe=topic).count() == 1


def test_group_id_is_accepted(spark: Any, broker: Broker, topic: str) -> None:
    servers = broker.bootstrap_servers
    produce(servers, topic, 10, headers=False)
    df = read(spark, servers, subscribe=topic, **{"kafka.group.id": "spark-group",
                                                  "groupIdPrefix": "p",
                                                  "kafka.max.poll.records": "3"})
    assert df.count() == 10
    with pytest.raises(Exception, match="not supported"):
        read(spark, servers, subscribe=topic, **{"kafka.enable.auto.commit": "true"}).count()
    with pytest.raises(Exception, match="kafka.sasl.mechanism=GSSAPI"):
        read(spark, servers, subscribe=topic,
             **{"kafka.security.protocol": "SASL_SSL"}).count()


def test_progress_gives_offsets_behind_latest(spark: Any, broker: Broker, topic: str,
                                              tmp_path: Path) -> None:
    from kbroker.spark import source_metrics

    servers = broker.bootstrap_servers
    acked = produce(servers, topic, 300, headers=False)
    log_end = {str(p): sum(1 for q, _ in acked if q == p) for p in range(3)}
    query = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "30").load()
             .writeStream.format("memory").queryName("behind_latest")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        # read while the query runs: behind at first, then caught up
        wait_for(lambda: query.lastProgress is not None and query.lastProgress.numInputRows,
                 120, "a first batch")
        first = query.lastProgress
        metrics = source_metrics(first)[0]
        latest = json.loads(first.sources[0].latestOffset)
        end = json.loads(first.sources[0].endOffset)
        assert latest == {topic: log_end}  # what the source saw as available
        behind = [log_end[p] - end[topic][p] for p in log_end]
        assert metrics == {"minOffsetsBehindLatest": str(min(behind)),
                           "maxOffsetsBehindLatest": str(max(behind)),
                           "avgOffsetsBehindLatest": repr(sum(behind) / 3)}
        assert sum(behind) == 300 - first.numInputRows > 0
        wait_for(lambda: spark.sql("SELECT count(*) AS n FROM behind_latest").collect()[0].n
                 == 300, 180, "the query to catch up")
        wait_for(lambda: source_metrics(query.lastProgress)[0].get("maxOffsetsBehindLatest")
                 == "0", 60, "no offsets behind")
    finally:
        query.stop()
