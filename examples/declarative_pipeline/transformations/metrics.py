"""The pipeline's datasets (Spark Declarative Pipelines, pyspark.pipelines).

- `metrics_raw`, a streaming table: the JSON metrics of the topic `app-metrics`, read
  with the "kbroker" source, parsed into (name, value, host, ts, event_time).
- `metrics_by_minute`, a materialized view: count, avg, min, max and distinct hosts
  per metric and 1-minute window.
- `app_metrics_clean`, a sink (format "kbroker") fed by the append flow `to_topic`:
  every parsed metric written back to the topic `app-metrics-clean`, keyed by host.

The broker comes from the spec's configuration, `kbroker.bootstrap.servers`.
"""

from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import kbroker.spark

spark = SparkSession.active()
kbroker.spark.register(spark)
SERVERS = spark.conf.get("kbroker.bootstrap.servers")
SCHEMA = "name string, value double, host string, ts long"


@dp.table(comment="metrics as published, parsed")
def metrics_raw():
    return (spark.readStream.format("kbroker")
            .option("kafka.bootstrap.servers", SERVERS)
            .option("subscribe", "app-metrics")
            .option("startingOffsets", "earliest")
            .load()
            .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("m"))
            .select("m.*")
            .withColumn("event_time", F.timestamp_millis("ts")))


@dp.materialized_view(comment="per metric and 1-minute window")
def metrics_by_minute():
    return (spark.read.table("metrics_raw")
            .groupBy(F.window("event_time", "1 minute").start.alias("window_start"), "name")
            .agg(F.count("*").alias("count"), F.avg("value").alias("avg"),
                 F.min("value").alias("min"), F.max("value").alias("max"),
                 F.count_distinct("host").alias("hosts")))


dp.create_sink("app_metrics_clean", format="kbroker",
               options={"kafka.bootstrap.servers": SERVERS, "topic": "app-metrics-clean"})


@dp.append_flow(target="app_metrics_clean")
def to_topic():
    return (spark.readStream.table("metrics_raw")
            .select(F.col("host").alias("key"),
                    F.to_json(F.struct("name", "value", "host", "ts")).alias("value")))
