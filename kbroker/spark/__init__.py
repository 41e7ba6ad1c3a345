"""kbroker.spark: read and write Kafka topics from PySpark, over the Kafka protocol.

    import kbroker.spark
    kbroker.spark.register(spark)            # the format name is "kbroker"

    df = (spark.readStream.format("kbroker")  # or spark.read for a batch query
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "metrics").load())

    (df.selectExpr("key", "value").write.format("kbroker").mode("append")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("topic", "copy").save())

Same schema and options as Spark's built-in `kafka` source and sink (see
options.py), without JVM connector jars; works with any Kafka-compatible broker.
Spark reserves the name "kafka" for its JVM source, hence "kbroker". Batch
writes need mode("append") (a Python data source has no ErrorIfExists mode).
Needs pyspark >= 4.2 and pyarrow. Modules: source.py (the data source and its
readers), partition_reader.py (one task's Fetch loop), arrow.py (Arrow batches
from kbroker._core.batch_decode), offsets.py (planning), options.py, sink.py
(writes via kbroker._core.batch_encode), session.py (a local SparkSession),
metrics.py (source_metrics: offsets behind latest from a query's progress).
"""

from kbroker.spark.metrics import source_metrics
from kbroker.spark.source import FORMAT, KafkaDataSource, register

__all__ = ["FORMAT", "KafkaDataSource", "register", "source_metrics"]
