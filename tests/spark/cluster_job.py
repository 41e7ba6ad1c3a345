"""Jobs for the Spark standalone cluster test, submitted with spark-submit.

    cluster_job.py batch SERVERS TOPIC OUT_JSON
    cluster_job.py stream SERVERS TOPIC CHECKPOINT OUT_DIR COPY_TOPIC

batch: reads TOPIC with the "kbroker" source, writes it back to TOPIC-copy with the
kbroker sink, reads the copy, and writes what it saw to OUT_JSON (counts, the
(partition, offset) pairs read, the values of the copy), all computed on executors.
stream: reads TOPIC in micro-batches into parquet under OUT_DIR (checkpointed) and,
in a second query, copies it to COPY_TOPIC with the kbroker sink; runs until killed.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

import kbroker.spark


def batch(spark: SparkSession, servers: str, topic: str, out: str) -> None:
    source = (spark.read.format("kbroker").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("minPartitions", "6").load())
    (source.write.format("kbroker").mode("append").option("kafka.bootstrap.servers", servers)
     .option("topic", topic + "-copy").save())
    copy = (spark.read.format("kbroker").option("kafka.bootstrap.servers", servers)
            .option("subscribe", topic + "-copy").load())
    result = {
        "read": sorted([r.partition, r.offset] for r in source.select("partition", "offset")
                       .collect()),
        "copy_values": sorted(bytes(r.value).decode() for r in copy.select("value").collect()),
        "executors": spark.sparkContext._jsc.sc().getExecutorIds().mkString(",").split(","),
    }
    with open(out, "w") as f:
        json.dump(result, f)


def stream(spark: SparkSession, servers: str, topic: str, checkpoint: str, out_dir: str,
           copy_topic: str) -> None:
    source = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "200").load())
    (source.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
     .writeStream.format("parquet").option("path", out_dir)
     .option("checkpointLocation", checkpoint + "/parquet")
     .trigger(processingTime="500 milliseconds").start())
    (source.selectExpr("value").writeStream.format("kbroker")
     .option("kafka.bootstrap.servers", servers).option("topic", copy_topic)
     .option("checkpointLocation", checkpoint + "/copy")
     .trigger(processingTime="500 milliseconds").start())
    print("STARTED", flush=True)
    spark.streams.awaitAnyTermination()


def main() -> int:
    spark = SparkSession.builder.appName("kbroker-cluster-job").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    kbroker.spark.register(spark)
    if sys.argv[1] == "batch":
        batch(spark, *sys.argv[2:5])
    else:
        stream(spark, *sys.argv[2:7])
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
