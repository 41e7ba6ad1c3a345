"""The "kbroker" source and sink against a kbroker cluster (3 brokers, RF=3, a real
ZooKeeper; the `kbroker_cluster` fixture, every process stopped by PID).

- The source fetches from each partition's leader: bootstrapped from one broker, it
  reads the partitions the others lead (a follower refuses consumer fetches).
- A checkpointed streaming query reads a topic into parquet while an idempotent acks=all
  producer keeps writing; the leader of a partition is killed (SIGKILL) mid-stream. The
  source follows the new leader (metadata refresh after the connection error or
  NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH), and the parquet output holds every
  acknowledged record exactly once, at its offset.
- Alongside, a second query copies the topic with the kbroker sink (acks=all,
  idempotent): the copy holds every record at least once, as Spark's Kafka sink promises.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbroker.cluster.local_cluster import Cluster

ck = pytest.importorskip("confluent_kafka")

from tests.cluster.support import create_topic, wait_for_leader  # noqa: E402
from tests.spark.test_spark_source import read  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 3


@pytest.fixture
def kbroker_cluster_config() -> dict[str, str]:
    return {"min.insync.replicas": "2", "num.partitions": "3",
            "default.replication.factor": "3"}


class SlowProducer:
    """An idempotent acks=all producer writing "0", "1", ... round robin over the
    partitions at about `rate` records/s from a thread; `acked[p]` holds what each
    partition acknowledged."""

    def __init__(self, servers: str, topic: str, rate: float = 300.0) -> None:
        self.topic, self.interval = topic, 1.0 / rate
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = ck.Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                                      "acks": "all", "linger.ms": 5,
                                      "message.timeout.ms": 120000})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.partition()].append(int(msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, str(i).encode(), partition=i % PARTITIONS,
                                   on_delivery=self._delivered)
            i += 1
            self._producer.poll(0)
            time.sleep(self.interval)
        self._producer.flush(120)

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive()


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_source_and_sink_follow_the_leaders_through_a_kill(
        spark: Any, kbroker_cluster: Cluster, tmp_path: Path) -> None:
    cluster = kbroker_cluster
    topic, copy = "spark-failover", "spark-failover-copy"
    create_topic(cluster, topic, PARTITIONS, rf=3)
    create_topic(cluster, copy, PARTITIONS, rf=3)
    leaders = {p: wait_for_leader(cluster, topic, p).leader for p in range(PARTITIONS)}
    producer = SlowProducer(cluster.bootstrap_servers, topic)
    queries = []
    try:
        wait_for(lambda: producer.count() >= 600, 60, "600 acknowledged records")
        # bootstrapped from one broker only, the reader finds every partition's leader
        one = cluster.broker(1).bootstrap
        assert any(leader != 1 for leader in leaders.values())
        assert read(spark, one, subscribe=topic).count() >= 600

        servers = cluster.bootstrap_servers
        stream = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "500").load())
        queries.append(stream.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
                       .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                       .option("checkpointLocation", str(tmp_path / "ckpt"))
                       .trigger(processingTime="300 milliseconds").start())
        queries.append(stream.selectExpr("value", f"'{copy}' AS topic")
                       .writeStream.format("kbroker").option("kafka.bootstrap.servers", servers)
                       .option("checkpointLocation", str(tmp_path / "ckpt-copy"))
                       .trigger(processingTime="300 milliseconds").start())
        commits = tmp_path / "ckpt" / "commits"
        wait_for(lambda: commits.exists() and len([p for p in commits.iterdir()
                                                   if p.name.isdigit()]) >= 2,
                 180, "two committed batches")

        victim = leaders[0]
        cluster.kill(victim)  # SIGKILL, mid-stream
        for p in range(PARTITIONS):
            wait_for_leader(cluster, topic, p, not_on=victim)
        acked_at_kill = producer.count()
        wait_for(lambda: producer.count() >= acked_at_kill + 600, 120,
                 "600 more acknowledged records after the kill")
    finally:
        producer.stop()
    try:
        acked = producer.acked
        assert not producer.errors, producer.errors
        total = producer.count()

        def parquet_rows() -> int:
            try:
                return spark.read.parquet(str(tmp_path / "out")).count()
            except Exception:  # noqa: BLE001 - no file yet
                return 0
        wait_for(lambda: parquet_rows() >= total, 300, f"{total} rows in parquet")
        wait_for(lambda: read(spark, servers, subscribe=copy).count() >= total, 300,
                 f"{total} records in the copy")
    finally:
        for q in queries:
            q.stop()
    for q in queries:
        assert q.exception() is None, q.exception()

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = [(r.partition, r.offset) for r in rows]
    assert len(got) == len(set(got)), "the checkpointed query wrote a record twice"
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append((r.offset, int(r.value)))
    for p, values in acked.items():
        in_order = [v for _, v in sorted(by_partition.get(p, []))]
        # every acknowledged record exactly once (the idempotent producer wrote each once)
        assert sorted(in_order) == sorted(set(in_order))
        assert set(values) <= set(in_order), f"partition {p} lost records"
        offsets = sorted(o for o, _ in by_partition[p])
        assert offsets == list(range(len(offsets)))  # no gap: nothing lost below the end

    copied = [bytes(r.value).decode() for r in read(spark, servers, subscribe=copy).collect()]
    sent = [str(v) for values in acked.values() for v in values]
    assert set(sent) <= set(copied), "the kbroker sink lost records"
