"""A streaming query in its own driver process, for the kill-and-restart test.

    python tests/spark/stream_driver.py SERVERS TOPIC CHECKPOINT OUT (continuous|available-now) \
        MAX_OFFSETS_PER_TRIGGER SPARK_TEMP_DIR

Reads TOPIC with the "kbroker" source and appends
(partition, offset, value) to a parquet directory OUT, a file sink, which
commits each micro-batch through its _spark_metadata log and so is idempotent
when Spark replays a batch. "continuous" runs until killed; "available-now"
processes what is there and exits 0. Spark's own files go to SPARK_TEMP_DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.spark.conftest import new_spark_session  # noqa: E402


def main() -> int:
    servers, topic, checkpoint, out, mode, max_offsets, temp_dir = sys.argv[1:8]
    spark = new_spark_session("stream-driver", Path(temp_dir))
    writer = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", max_offsets).load()
              .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
              .writeStream.format("parquet").option("path", out)
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    print("STARTED", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
