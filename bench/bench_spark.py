"""Spark read throughput from kbroker: the "kbroker" data source vs a per-message peer.

    python bench/bench_spark.py                  # 100 B and 1 KiB records, 3 repeats
    python bench/bench_spark.py --quick          # fewer records, 1 repeat

One embedded kbroker broker (127.0.0.1, temp log dir), one SparkSession on
local[2]. For each record size a topic of 4 partitions is filled (records built
as Arrow and produced with kbroker.spark.sink's encoder), then each reader
scans the whole topic in a Spark job that materializes every column of Spark's
Kafka schema (`df.write.format("noop")`), timed from the driver:

  kbroker           kbroker.spark (Fetch + Cython decode into Arrow RecordBatches)
  confluent-poll    the peer: a Python data source with one confluent-kafka
                    Consumer per Spark partition, poll() per message, one tuple
                    per row (what a straightforward PySpark Kafka reader does)

plus `kbroker-no-spark`: the same PartitionReaders iterated in this process
without Spark, the ceiling of the fetch + decode path alone.

A warm-up job per reader runs first (JVM JIT, Python worker start); the median
of the repeats is reported. Output: a table on stdout and bench/results/spark.json
(rows/s and MB/s, MB = 2**20 bytes of key + value payload).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))

import pyarrow as pa  # noqa: E402

from kbroker.broker import Broker  # noqa: E402
from kbroker.client import TopicPartition  # noqa: E402
from kbroker.spark.offsets import OffsetPlanner, OffsetRange  # noqa: E402
from kbroker.spark.options import sink_options, source_options  # noqa: E402
from kbroker.spark.partition_reader import PartitionReader  # noqa: E402
from kbroker.spark.sink import RecordBatchProducer  # noqa: E402

PARTITIONS = 4
KEY_BYTES = 8
MB = float(1 << 20)


def spark_session() -> Any:
    os.environ.setdefault("PYTHONPATH", str(BENCH_DIR.parent))  # for the Python workers
    from kbroker.spark.session import local_session

    spark = local_session("bench_spark", **{"spark.driver.memory": "2g"})
    spark.dataSource.register(confluent_poll_source())
    return spark


def confluent_poll_source() -> type:
    """The peer: per-message polling with confluent-kafka inside a Python data source."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class PollReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.servers = options["kafka.bootstrap.servers"]
            self.topic = options["subscribe"]
            self.ends = json.loads(options["ends"])

        def partitions(self) -> list[InputPartition]:
            return [InputPartition((int(p), end)) for p, end in self.ends.items()]

        def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
            import datetime

            import confluent_kafka as ck

            p, end = partition.value
            consumer = ck.Consumer({"bootstrap.servers": self.servers, "group.id": "bench",
                                    "enable.auto.commit": False,
                                    "fetch.max.bytes": 64 << 20,
                                    "max.partition.fetch.bytes": 8 << 20})
            consumer.assign([ck.TopicPartition(self.topic, p, 0)])
            utc = datetime.UTC
            try:
                seen = 0
                while seen < end:
                    m = consumer.poll(1.0)
                    if m is None or m.error():
                        continue
                    offset = m.offset()
                    assert offset is not None
                    seen = offset + 1
                    ts_type, ts = m.timestamp()
                    yield (m.key(), m.value(), m.topic(), m.partition(), offset,
                           datetime.datetime.fromtimestamp(ts / 1000, utc), ts_type - 1)
            finally:
                consumer.close()

    class PollSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "confluent-poll"

        def schema(self) -> str:
            return ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")

        def reader(self, schema: Any) -> DataSourceReader:
            return PollReader(dict(self.options))

    return PollSource


def fill_topic(servers: str, topic: str, count: int, value_bytes: int) -> None:
    producer = RecordBatchProducer(sink_options({"kafka.bootstrap.servers": servers,
                                                 "topic": topic}))
    chunk = 50_000
    value = os.urandom(value_bytes)
    try:
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            keys = pa.array([b"%08d" % (i % 100_000_000) for i in range(start, start + n)],
                            pa.binary())
            values = pa.array([value] * n, pa.binary())
            producer.write(pa.RecordBatch.from_arrays([keys, values], ["key", "value"]))
    finally:
        producer.close()


def end_offsets(servers: str, topic: str) -> dict[TopicPartition, int]:
    planner = OffsetPlanner(source_options({"kafka.bootstrap.servers": servers,
                                            "subscribe": topic}, streaming=False))
    try:
        return planner.latest(planner.topic_partitions())
    finally:
        planner.close()


def time_spark(spark: Any, fmt: str, servers: str, topic: str, ends: dict[TopicPartition, int],
               ) -> float:
    reader = (spark.read.format(fmt).option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic))
    if fmt != "kbroker":
        reader = reader.option("ends", json.dumps({str(tp.partition): e for tp, e in ends.items()}))
    t0 = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def time_no_spark(servers: str, topic: str, ends: dict[TopicPartition, int]) -> float:
    from kbroker.spark.source import arrow_schema, kafka_schema

    schema = arrow_schema(kafka_schema())
    opts = source_options({"kafka.bootstrap.servers": servers, "subscribe": topic}, False)
    t0 = time.perf_counter()
    rows = 0
    for tp, end in ends.items():
        for batch in PartitionReader(opts.client, OffsetRange(tp.topic, tp.partition, 0, end),
                                     schema):
            rows += batch.num_rows
    assert rows == sum(ends.values()), (rows, ends)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / "spark.json"))
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats
    sizes = [(100, 300_000 if args.quick else 3_000_000),
             (1024, 60_000 if args.quick else 600_000)]
    results: list[dict[str, Any]] = []
    spark = spark_session()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp, Broker({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tmp,
            "num.partitions": str(PARTITIONS), "log.segment.bytes": str(256 << 20)}) as broker:
        servers = broker.bootstrap_servers
        for value_bytes, count in sizes:
            topic = f"bench-{value_bytes}"
            t0 = time.perf_counter()
            fill_topic(servers, topic, count, value_bytes)
            ends = end_offsets(servers, topic)
            assert sum(ends.values()) == count, ends
            print(f"{topic}: {count} records of {value_bytes} B in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            payload_mb = count * (value_bytes + KEY_BYTES) / MB
            runs: dict[str, list[float]] = {"kbroker": [], "confluent-poll": [],
                                           "kbroker-no-spark": []}
            for fmt in ("kbroker", "confluent-poll"):
                time_spark(spark, fmt, servers, topic, ends)  # warm-up
                for _ in range(repeats):
                    runs[fmt].append(time_spark(spark, fmt, servers, topic, ends))
            for _ in range(repeats):
                runs["kbroker-no-spark"].append(time_no_spark(servers, topic, ends))
            for reader, secs in runs.items():
                median = statistics.median(secs)
                results.append({
                    "reader": reader, "value_bytes": value_bytes, "records": count,
                    "seconds": secs, "median_seconds": median,
                    "rows_per_s": count / median, "mb_per_s": payload_mb / median})
                print(f"  {reader:18} {count / median:>12,.0f} rows/s "
                      f"{payload_mb / median:>8.1f} MB/s  (median of {secs})", flush=True)
    spark.stop()
    out = {"benchmark": "bench_spark", "master": "local[2]", "partitions": PARTITIONS,
           "python": platform.python_version(), "cpu_count": os.cpu_count(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
