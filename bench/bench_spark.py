"""Spark over kbroker: the "kbroker" source and sink beside confluent-kafka, in one run.

    python bench/bench_spark.py                  # 1M x 100 B and 250k x 1 KiB, medians of 3
    python bench/bench_spark.py --quick          # 200k / 50k records, 1 repeat
    python bench/bench_spark.py --profile DIR    # also py-spy the Python workers of one
                                                 # source and one sink job (needs py-spy)

One embedded kbroker broker (127.0.0.1, temp log dir, 4 partitions per topic), one
SparkSession on local[2]. For each value size (keys are 8 bytes, every value the same
bytes) the run measures, each after a warm-up, as medians of the repeats:

  sink                 spark.range(n) -> key, value -> write.format("kbroker")  (acks=all)
  sink-lz4             the same with kafka.compression.type=lz4
  confluent-producer   a Python loop of Producer.produce() + flush (linger.ms 5,
                       acks=all, idempotent: what the sink does), the same rows
  source-count         spark.read.format("kbroker") ... .count()
  source-parquet       spark.read.format("kbroker") ... .write.parquet()
  parquet-floor        spark.range(n) -> the same columns (key, value, topic, partition,
                       offset, timestamp, timestampType) -> write.parquet(): the floor
                       of the parquet path, Spark alone
  confluent-consumer   a Python loop of Consumer.consume(10000) over the topic
  fetch-decode         kbroker.spark's PartitionReaders iterated in this process, no
                       Spark: the ceiling of the fetch + decode path
  arrow-source-count   a Python data source that yields one prebuilt Arrow batch of
                       Spark's Kafka schema (65536 rows of the same sizes) again and
                       again, 4 partitions, .count(): the ceiling of any Python data
                       source on this Spark, whatever it reads from
  arrow-source-parquet the same do-nothing source -> write.parquet(): the floor of the
                       parquet path through any Python data source
  arrow-sink           the sink's rows -> a Python data source's Arrow writer that
                       counts the batches it is handed and drops them: the ceiling of
                       any Python sink on this Spark, whatever it writes to

Beside each median: the CPU seconds it took in this process (the driver's Python and the
embedded broker), in Spark's JVM and in the pyspark Python workers (from /proc, the
workers' reaped children included; a worker that ends unreaped is missed), which
tells where the time goes even on a busy machine. And the ratios of issue 22: source-count against the goal of 3M rows/s, parquet-floor
time over source-parquet time (goal: the source within 1.3x of the floor), sink and
sink-lz4 against 3M rows/s, each against its confluent-kafka peer, and the source and
sink against the do-nothing Python source and sink. The machine is
shared: compare the ratios of one run, not the absolute rates of two.
Output: a table on stdout and bench/results/spark.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))

from kbroker.broker import Broker  # noqa: E402
from kbroker.client import TopicPartition  # noqa: E402
from kbroker.spark.offsets import OffsetPlanner, OffsetRange  # noqa: E402
from kbroker.spark.options import source_options  # noqa: E402
from kbroker.spark.partition_reader import PartitionReader  # noqa: E402

PARTITIONS = 4
KEY_BYTES = 8
GOAL_ROWS_PER_S = 3_000_000
FLOOR_RATIO_GOAL = 1.3


def spark_session() -> Any:
    os.environ.setdefault("PYTHONPATH", str(BENCH_DIR.parent))  # for the Python workers
    from kbroker.spark.session import local_session

    spark = local_session("bench_spark", **{"spark.driver.memory": "2g"})
    spark.dataSource.register(arrow_ceiling_source())
    spark.dataSource.register(arrow_ceiling_sink())
    return spark


def arrow_ceiling_source() -> type:
    """A Python data source that reads nothing: one prebuilt batch, yielded again and again."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kbroker.spark.source import arrow_schema, kafka_schema

    class CeilingReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.rows = int(options["rows"])
            self.value_bytes = int(options["value_bytes"])

        def partitions(self) -> list[InputPartition]:
            share = -(-self.rows // PARTITIONS)
            return [InputPartition(min(share, self.rows - p * share)) for p in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            schema = arrow_schema(kafka_schema())
            n = 65536
            value = b"v" * self.value_bytes
            batch = pa.RecordBatch.from_arrays([
                pa.array([b"%08d" % i for i in range(n)], pa.binary()),
                pa.array([value] * n, pa.binary()), pa.array(["topic"] * n, pa.string()),
                pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, schema.field("timestamp").type),
                pa.array([0] * n, pa.int32())], schema=schema)
            left = partition.value
            while left > 0:
                yield batch if left >= n else batch.slice(0, left)
                left -= n

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrow-ceiling"

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader(dict(self.options))

    return CeilingSource


def arrow_ceiling_sink() -> type:
    """A Python data source whose Arrow writer counts the rows it is handed and drops them."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        WriterCommitMessage,
    )

    @dataclass
    class Counted(WriterCommitMessage):
        rows: int

    class CeilingWriter(DataSourceArrowWriter):
        def __init__(self, expected: int) -> None:
            self.expected = expected

        def write(self, iterator: Any) -> Counted:
            return Counted(sum(batch.num_rows for batch in iterator))

        def commit(self, messages: list[Any]) -> None:
            rows = sum(m.rows for m in messages if m is not None)
            if rows != self.expected:
                raise RuntimeError(f"the do-nothing sink was handed {rows} rows, not {self.expected}")

    class CeilingSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrow-ceiling-sink"

        def writer(self, schema: Any, overwrite: bool) -> CeilingWriter:
            return CeilingWriter(int(self.options["rows"]))

    return CeilingSink


def time_ceiling_sink(spark: Any, count: int, value_bytes: int) -> float:
    df = rows(spark, count, value_bytes).drop("id")
    t0 = time.perf_counter()
    df.write.format("arrow-ceiling-sink").mode("append").option("rows", count).save()
    return time.perf_counter() - t0


def ceiling_source(spark: Any, count: int, value_bytes: int) -> Any:
    return (spark.read.format("arrow-ceiling").option("rows", count)
            .option("value_bytes", value_bytes).load())


def time_ceiling(spark: Any, count: int, value_bytes: int) -> float:
    t0 = time.perf_counter()
    n = ceiling_source(spark, count, value_bytes).count()
    elapsed = time.perf_counter() - t0
    assert n == count, (n, count)
    return elapsed


def time_ceiling_parquet(spark: Any, count: int, value_bytes: int, out: Path) -> float:
    t0 = time.perf_counter()
    ceiling_source(spark, count, value_bytes).write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - t0


def value_hex(value_bytes: int) -> str:
    return (bytes(range(256)) * (value_bytes // 256 + 1))[:value_bytes].hex()


def rows(spark: Any, count: int, value_bytes: int) -> Any:
    """id; key: the id as 8 digits; value: the same `value_bytes` bytes in every row."""
    return spark.range(count).selectExpr(
        "id", "CAST(lpad(CAST(id AS STRING), 8, '0') AS BINARY) AS key",
        f"unhex('{value_hex(value_bytes)}') AS value")


def time_sink(spark: Any, servers: str, topic: str, count: int, value_bytes: int,
              codec: str = "none") -> float:
    df = rows(spark, count, value_bytes).drop("id")
    t0 = time.perf_counter()
    (df.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", topic).option("kafka.compression.type", codec).save())
    return time.perf_counter() - t0


def time_producer(servers: str, topic: str, count: int, value_bytes: int) -> float:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "all",
                            "enable.idempotence": True, "batch.size": 1_000_000,
                            "queue.buffering.max.messages": 1_000_000})
    value = bytes.fromhex(value_hex(value_bytes))
    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, b"%08d" % i)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - t0


def source(spark: Any, servers: str, topic: str) -> Any:
    return (spark.read.format("kbroker").option("kafka.bootstrap.servers", servers)
            .option("subscribe", topic).load())


def time_source_count(spark: Any, servers: str, topic: str, count: int) -> float:
    t0 = time.perf_counter()
    n = source(spark, servers, topic).count()
    elapsed = time.perf_counter() - t0
    assert n == count, (n, count)
    return elapsed


def time_source_parquet(spark: Any, servers: str, topic: str, out: Path) -> float:
    t0 = time.perf_counter()
    source(spark, servers, topic).write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - t0


def time_floor(spark: Any, count: int, value_bytes: int, topic: str, out: Path) -> float:
    df = rows(spark, count, value_bytes).selectExpr(
        "key", "value", f"'{topic}' AS topic", f"CAST(id % {PARTITIONS} AS INT) AS partition",
        f"id DIV {PARTITIONS} AS offset", "timestamp_millis(1700000000000 + id) AS timestamp",
        "0 AS timestampType")
    t0 = time.perf_counter()
    df.write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - t0


def time_consumer(servers: str, topic: str, count: int) -> float:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": servers, "group.id": "bench",
                            "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                            "max.partition.fetch.bytes": 8 << 20})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = payload = 0
    t0 = time.perf_counter()
    try:
        while seen < count:
            for m in consumer.consume(10_000, 1.0):
                if m.error() is None:
                    seen += 1
                    payload += len(m.value() or b"")
        return time.perf_counter() - t0
    finally:
        consumer.close()


def time_fetch_decode(servers: str, topic: str, ends: dict[TopicPartition, int]) -> float:
    from kbroker.spark.source import arrow_schema, kafka_schema

    schema = arrow_schema(kafka_schema())
    opts = source_options({"kafka.bootstrap.servers": servers, "subscribe": topic}, False)
    t0 = time.perf_counter()
    n = 0
    for tp, end in ends.items():
        for batch in PartitionReader(opts.client, OffsetRange(tp.topic, tp.partition, 0, end),
                                     schema):
            n += batch.num_rows
    assert n == sum(ends.values()), (n, ends)
    return time.perf_counter() - t0


def end_offsets(servers: str, topic: str) -> dict[TopicPartition, int]:
    planner = OffsetPlanner(source_options({"kafka.bootstrap.servers": servers,
                                            "subscribe": topic}, streaming=False))
    try:
        return planner.latest(planner.topic_partitions())
    finally:
        planner.close()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    return kids


def cpu_by_kind() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of this process ("driver_broker": the driver's Python and the
    broker), Spark's JVMs and the pyspark workers (with the children they reaped), by pid.
    Linux only ({} elsewhere)."""
    if not Path("/proc/self/stat").exists():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    kids, stack = _children(), [os.getpid()]
    while stack:
        pid = stack.pop()
        stack += kids.get(pid, [])
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        own, reaped = (int(fields[11]) + int(fields[12])) / tick, \
            (int(fields[13]) + int(fields[14])) / tick
        if pid == os.getpid():
            out[pid] = ("driver_broker", own)
        elif b"java" in cmd:
            out[pid] = ("jvm", own + reaped)
        elif b"pyspark" in cmd:
            out[pid] = ("python_workers", own + reaped)
    return out


def cpu_between(before: dict[int, tuple[str, float]],
                after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by kind between two cpu_by_kind(): processes that ended in between
    (and were not reaped by one still here) are missed, so figures are lower bounds."""
    out = {"driver_broker": 0.0, "jvm": 0.0, "python_workers": 0.0}
    for pid, (kind, seconds) in after.items():
        start = before.get(pid, (kind, 0.0))[1]
        out[kind] += max(0.0, seconds - start)
    return out


def measure(repeats: int, cpu: dict[str, list[dict[str, float]]], name: str,
            run: Callable[[], float], warm_up: bool = True) -> list[float]:
    if warm_up:
        run()
    secs = []
    for _ in range(repeats):
        before = cpu_by_kind()
        secs.append(run())
        after = cpu_by_kind()
        cpu.setdefault(name, []).append(cpu_between(before, after))
    return secs


class WorkerProfiler:
    """py-spy on every pyspark worker that appears while a job runs (--profile)."""

    def __init__(self, out_dir: Path, name: str) -> None:
        self.out_dir, self.name = out_dir, name
        self.procs: list[subprocess.Popen[bytes]] = []
        self.seen: set[int] = set()

    def poll(self) -> None:
        for pid in _pyspark_workers():
            if pid not in self.seen:
                self.seen.add(pid)
                out = self.out_dir / f"{self.name}-{pid}.txt"
                self.procs.append(subprocess.Popen(
                    ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                     "--output", str(out), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _pyspark_workers() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"pyspark.daemon" in cmd and str(os.getpid()).encode() not in cmd:
                pids.append(int(entry.name))
    return pids


def profiled(out_dir: Path, name: str, job: Callable[[], float]) -> None:
    """Run `job` while py-spy samples the pyspark workers (the daemon forks one per task)."""
    import threading

    profiler = WorkerProfiler(out_dir, name)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            profiler.poll()
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        job()
    finally:
        done.set()
        watcher.join()
        profiler.stop()


def run_size(spark: Any, servers: str, tmp: Path, value_bytes: int, count: int, repeats: int,
             profile: str | None, results: list[dict[str, Any]],
             ratios: list[dict[str, Any]]) -> None:
    topic = f"bench-{value_bytes}"
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[dict[str, float]]] = {}
    # the sink fills `topic` (the warm-up); each repeat writes a topic of its own
    sink_topics = iter(f"{topic}-sink-{i}" for i in range(100))
    time_sink(spark, servers, topic, count, value_bytes)
    ends = end_offsets(servers, topic)
    assert sum(ends.values()) == count, ends
    runs["sink"] = measure(repeats, cpu, "sink", lambda: time_sink(
        spark, servers, next(sink_topics), count, value_bytes), warm_up=False)
    runs["sink-lz4"] = measure(repeats, cpu, "sink-lz4", lambda: time_sink(
        spark, servers, next(sink_topics), count, value_bytes, "lz4"))
    runs["arrow-sink"] = measure(repeats, cpu, "arrow-sink", lambda: time_ceiling_sink(
        spark, count, value_bytes))
    runs["confluent-producer"] = measure(repeats, cpu, "confluent-producer", lambda: time_producer(
        servers, next(sink_topics), count, value_bytes))
    runs["source-count"] = measure(repeats, cpu, "source-count", lambda: time_source_count(
        spark, servers, topic, count))
    runs["source-parquet"] = measure(repeats, cpu, "source-parquet", lambda: time_source_parquet(
        spark, servers, topic, tmp / "source.parquet"))
    runs["parquet-floor"] = measure(repeats, cpu, "parquet-floor", lambda: time_floor(
        spark, count, value_bytes, topic, tmp / "floor.parquet"))
    runs["confluent-consumer"] = measure(repeats, cpu, "confluent-consumer", lambda: time_consumer(
        servers, topic, count))
    runs["fetch-decode"] = measure(repeats, cpu, "fetch-decode", lambda: time_fetch_decode(
        servers, topic, ends))
    runs["arrow-source-count"] = measure(repeats, cpu, "arrow-source-count", lambda: time_ceiling(
        spark, count, value_bytes))
    runs["arrow-source-parquet"] = measure(repeats, cpu, "arrow-source-parquet",
                                           lambda: time_ceiling_parquet(
                                               spark, count, value_bytes, tmp / "ceiling.parquet"))
    if profile:
        out_dir = Path(profile)
        out_dir.mkdir(parents=True, exist_ok=True)
        profiled(out_dir, f"source-count-{value_bytes}",
                 lambda: time_source_count(spark, servers, topic, count))
        profiled(out_dir, f"sink-{value_bytes}", lambda: time_sink(
            spark, servers, next(sink_topics), count, value_bytes))
    medians = {name: statistics.median(secs) for name, secs in runs.items()}
    rate = {name: count / m for name, m in medians.items()}
    print(f"{count:,} records of {value_bytes} B (medians of {repeats}):", flush=True)
    for name, secs in runs.items():
        # the CPU split of the median run
        split = cpu[name][sorted(range(len(secs)), key=secs.__getitem__)[len(secs) // 2]]
        results.append({"case": name, "value_bytes": value_bytes, "records": count,
                        "seconds": secs, "median_seconds": medians[name],
                        "rows_per_s": rate[name], "cpu_seconds": split})
        print(f"  {name:20} {rate[name]:>12,.0f} rows/s  {medians[name]:6.2f} s; CPU s: "
              + ", ".join(f"{k} {v:.2f}" for k, v in split.items()), flush=True)
    r = {"value_bytes": value_bytes,
         "source_count_vs_goal": rate["source-count"] / GOAL_ROWS_PER_S,
         "source_count_vs_confluent_consumer":
             rate["source-count"] / rate["confluent-consumer"],
         "parquet_floor_over_source_parquet_time":
             medians["source-parquet"] / medians["parquet-floor"],
         "sink_vs_goal": rate["sink"] / GOAL_ROWS_PER_S,
         "sink_lz4_vs_goal": rate["sink-lz4"] / GOAL_ROWS_PER_S,
         "sink_vs_confluent_producer": rate["sink"] / rate["confluent-producer"],
         "sink_vs_arrow_sink_ceiling": rate["sink"] / rate["arrow-sink"],
         "fetch_decode_vs_source_count": rate["fetch-decode"] / rate["source-count"],
         "source_count_vs_arrow_source_ceiling":
             rate["source-count"] / rate["arrow-source-count"],
         "source_parquet_over_arrow_source_parquet_time":
             medians["source-parquet"] / medians["arrow-source-parquet"]}
    ratios.append(r)
    print(f"  source count() {r['source_count_vs_goal']:.2f}x the 3M rows/s goal, "
          f"{r['source_count_vs_confluent_consumer']:.1f}x confluent-kafka's consumer, "
          f"{r['source_count_vs_arrow_source_ceiling']:.2f}x a Python source that reads "
          "nothing; "
          f"to parquet {r['parquet_floor_over_source_parquet_time']:.2f}x the "
          f"spark.range floor's time (goal <= {FLOOR_RATIO_GOAL}), "
          f"{r['source_parquet_over_arrow_source_parquet_time']:.2f}x the do-nothing "
          "source's; sink "
          f"{r['sink_vs_goal']:.2f}x the goal ({r['sink_lz4_vs_goal']:.2f}x with lz4), "
          f"{r['sink_vs_confluent_producer']:.1f}x confluent-kafka's producer, "
          f"{r['sink_vs_arrow_sink_ceiling']:.2f}x a Python sink that writes nothing",
          flush=True)
    shutil.rmtree(tmp / "source.parquet", ignore_errors=True)
    shutil.rmtree(tmp / "floor.parquet", ignore_errors=True)
    shutil.rmtree(tmp / "ceiling.parquet", ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    ap.add_argument("--records-1k", type=int, default=250_000)
    ap.add_argument("--profile", metavar="DIR", help="py-spy the workers of one job each")
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / "spark.json"))
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats
    sizes = [(100, 200_000 if args.quick else args.records_100),
             (1024, 50_000 if args.quick else args.records_1k)]
    results: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    spark = spark_session()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp, Broker({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": f"{tmp}/logs",
            "num.partitions": str(PARTITIONS), "log.segment.bytes": str(256 << 20)}) as broker:
        for value_bytes, count in sizes:
            run_size(spark, broker.bootstrap_servers, Path(tmp), value_bytes, count, repeats,
                     args.profile, results, ratios)
    spark.stop()
    out = {"benchmark": "bench_spark", "master": "local[2]", "partitions": PARTITIONS,
           "python": platform.python_version(), "cpu_count": os.cpu_count(),
           "load_average": os.getloadavg(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "results": results, "ratios": ratios}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
