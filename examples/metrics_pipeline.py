"""Metrics pub/sub on Spark: producers -> kbroker -> Structured Streaming -> topic + parquet.

    .venv/bin/python examples/metrics_pipeline.py       # everything on this machine
    .venv/bin/python examples/metrics_pipeline.py --records 8000 --seconds 20 --out ./metrics-demo

What it does, in one process (plus Spark's own):
  1. starts an embedded kbroker Broker on 127.0.0.1 (a free port, a temp log dir);
  2. starts a Structured Streaming job that reads the topic `app-metrics` with the
     "kbroker" Spark source, parses each record's JSON value
     {"name": "cpu", "value": 0.42, "host": "web-1", "ts": 1700000000000},
     and aggregates per metric and 1-minute event-time window: count, avg, min,
     max and the number of distinct hosts;
  3. runs producers (confluent-kafka, one thread per host) that publish metrics for
     about 10 s (--seconds), with event times spread over 5 minutes, while the job runs;
  4. every micro-batch writes the windows it changed (output mode "update") to the
     topic `app-metrics-1m` (key "name|window start", value JSON) with the
     "kbroker" sink, and appends them to parquet under OUT/windows with the batch id;
  5. waits until the job has processed everything, stops it, and prints what it did:
     records published, micro-batches, the final aggregate per window (the last
     update of each key in parquet) and the number of records in the output topic.

Without --out, the broker's data, the parquet and Spark's own files live in a temporary
directory removed at exit. Spark logs errors only and shows no progress bars
(kbroker.spark.session). Needs kbroker's `spark` and `tools` extras (pyspark >= 4.2,
pyarrow, pandas < 3; confluent-kafka) and Java 17+ on PATH (`scripts/bootstrap spark`
installs them): without them it says what to install.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INPUT_TOPIC = "app-metrics"
OUTPUT_TOPIC = "app-metrics-1m"
METRICS = ("cpu", "memory", "latency_ms", "requests")
HOSTS = ("web-1", "web-2", "web-3", "db-1")
EPOCH_MS = 1_699_999_980_000  # event times start here: 2023-11-14 22:13:00 UTC
WINDOW = "1 minute"


def metric_value(rng: random.Random, name: str) -> float:
    if name == "cpu":
        return round(rng.uniform(0, 1), 3)
    if name == "memory":
        return round(rng.uniform(200, 800), 1)
    if name == "latency_ms":
        return round(rng.expovariate(1 / 40), 2)
    return float(rng.randrange(0, 500))


def publish_metrics(servers: str, records: int, seconds: float = 10.0, minutes: int = 5,
                    seed: int = 7, topic: str = INPUT_TOPIC) -> list[dict[str, Any]]:
    """Publish `records` metrics from len(HOSTS) producer threads over about `seconds`
    of wall-clock time, with event times over `minutes`; returns them all."""
    import confluent_kafka as ck

    per_host = records // len(HOSTS)
    span_ms = minutes * 60_000
    published: list[list[dict[str, Any]]] = [[] for _ in HOSTS]

    def run(h: int) -> None:
        rng = random.Random(seed * 31 + h)
        producer = ck.Producer({"bootstrap.servers": servers, "linger.ms": 20,
                                "client.id": f"metrics-{HOSTS[h]}"})
        for i in range(per_host):
            name = METRICS[i % len(METRICS)]
            m = {"name": name, "value": metric_value(rng, name), "host": HOSTS[h],
                 "ts": EPOCH_MS + i * span_ms // per_host + h}
            producer.produce(topic, key=HOSTS[h].encode(), value=json.dumps(m).encode())
            published[h].append(m)
            if i % 100 == 99:  # a steady stream, not one burst
                producer.flush(30)
                time.sleep(seconds * 100 / per_host)
        if producer.flush(30):
            raise RuntimeError("metrics were not delivered")

    threads = [threading.Thread(target=run, args=(h,)) for h in range(len(HOSTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [m for host in published for m in host]


def start_job(spark: Any, servers: str, out_dir: Path) -> Any:
    """The streaming job: JSON metrics -> per-metric 1-minute windows -> topic + parquet."""
    from pyspark.sql import functions as F

    parsed = (spark.readStream.format("kbroker")
              .option("kafka.bootstrap.servers", servers)
              .option("subscribe", INPUT_TOPIC)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "2000")
              .load()
              .select(F.from_json(F.col("value").cast("string"),
                                  "name string, value double, host string, ts long").alias("m"))
              .select("m.*")
              .withColumn("event_time", F.timestamp_millis("ts")))
    windows = (parsed.withWatermark("event_time", "10 minutes")
               .groupBy(F.window("event_time", WINDOW).alias("window"), "name")
               .agg(F.count("*").alias("count"), F.avg("value").alias("avg"),
                    F.min("value").alias("min"), F.max("value").alias("max"),
                    F.approx_count_distinct("host").alias("hosts")))

    def write_batch(batch: Any, batch_id: int) -> None:
        rows = batch.select(
            F.col("window.start").alias("window_start"), "name", "count", "avg", "min",
            "max", "hosts", F.lit(batch_id).alias("batch_id"))
        rows.write.mode("append").parquet(str(out_dir / "windows"))
        (rows.select(F.concat_ws("|", "name", F.date_format("window_start",
                                                            "yyyy-MM-dd'T'HH:mm:ss")).alias("key"),
                     F.to_json(F.struct(*[c for c in rows.columns])).alias("value"))
         .write.format("kbroker").mode("append")
         .option("kafka.bootstrap.servers", servers).option("topic", OUTPUT_TOPIC).save())

    return (windows.writeStream.outputMode("update").foreachBatch(write_batch)
            .option("checkpointLocation", str(out_dir / "checkpoint"))
            .trigger(processingTime="1 second").start())


def final_windows(spark: Any, out_dir: Path) -> list[dict[str, Any]]:
    """The last update of every (metric, window) in the parquet output."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(out_dir / "windows"))
    latest = Window.partitionBy("name", "window_start").orderBy(F.col("batch_id").desc())
    final = (df.withColumn("n", F.row_number().over(latest)).where("n = 1").drop("n", "batch_id")
             .withColumn("window_start_ms", F.unix_millis("window_start"))
             .orderBy("window_start", "name"))
    return [r.asDict() for r in final.collect()]


def run(spark: Any, servers: str, out_dir: Path, records: int = 4000,
        seconds: float = 10.0) -> dict[str, Any]:
    """The whole pipeline against a running broker; returns a summary (also for tests)."""
    import kbroker.spark

    kbroker.spark.register(spark)
    out_dir.mkdir(parents=True, exist_ok=True)
    query = start_job(spark, servers, out_dir)
    try:
        t0 = time.monotonic()
        published = publish_metrics(servers, records, seconds)
        query.processAllAvailable()
        elapsed = time.monotonic() - t0
        batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    finally:
        query.stop()
    windows = final_windows(spark, out_dir)
    out_records = (spark.read.format("kbroker").option("kafka.bootstrap.servers", servers)
                   .option("subscribe", OUTPUT_TOPIC).load().count())
    return {"published": published, "windows": windows, "micro_batches": batches,
            "output_topic_records": out_records, "seconds": elapsed}


def print_summary(summary: dict[str, Any], parquet: str) -> None:
    print(f"\npublished {len(summary['published'])} metrics from {len(HOSTS)} hosts to "
          f"'{INPUT_TOPIC}'; the streaming job took {summary['micro_batches']} micro-batches "
          f"({summary['seconds']:.1f} s)")
    print(f"wrote {summary['output_topic_records']} window updates to '{OUTPUT_TOPIC}' and "
          f"to {parquet}\n")
    print(f"{'window start (UTC)':20} {'metric':11} {'count':>6} {'avg':>9} {'min':>9} "
          f"{'max':>9} {'hosts':>5}")
    for w in summary["windows"]:
        print(f"{w['window_start']:%Y-%m-%d %H:%M}     {w['name']:11} {w['count']:>6} "
              f"{w['avg']:>9.2f} {w['min']:>9.2f} {w['max']:>9.2f} {w['hosts']:>5}")


def install_command() -> str:
    """How to give the Python running this example kbroker's spark and tools extras."""
    if Path(sys.prefix).resolve() == ROOT / ".venv":  # the checkout's (scripts/bootstrap)
        return f"{ROOT / 'scripts' / 'bootstrap'} spark"
    return f"{sys.executable} -m pip install -e '{ROOT}[spark,tools]'"


def missing_requirements() -> str | None:
    """What to install when this Python lacks a module the example needs, else None."""
    try:
        import confluent_kafka  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ModuleNotFoundError as e:
        return f"{e}: the example needs kbroker's Spark extra; install it with\n    {install_command()}"
    if shutil.which("java") is None:
        return ("no java on PATH: Spark needs Java 17+ "
                "(Debian: apt-get install openjdk-17-jre-headless)")
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=4000, help="metrics to publish")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long producers publish")
    ap.add_argument("--out", type=Path,
                    help="keep the parquet output (and the job's checkpoint) in this directory "
                         "(default: a temporary directory, removed at exit)")
    args = ap.parse_args()
    missing = missing_requirements()
    if missing is not None:
        print(f"metrics_pipeline: {missing}", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    from kbroker.broker import Broker
    from kbroker.spark.session import local_session

    with tempfile.TemporaryDirectory(prefix="metrics-pipeline-") as tmp:
        spark = local_session("metrics-pipeline", temp_dir=Path(tmp) / "spark")
        out_dir = args.out or Path(tmp) / "out"
        parquet = (f"parquet under {out_dir / 'windows'}" if args.out else
                   "parquet in a temporary directory removed at exit (--out DIR keeps it)")
        with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(Path(tmp) / "logs"),
                     "num.partitions": "3"}) as broker:
            print(f"kbroker listening on {broker.bootstrap_servers}")
            summary = run(spark, broker.bootstrap_servers, out_dir, args.records, args.seconds)
            print_summary(summary, parquet)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
