"""kbroker.spark: read and write Kafka topics from PySpark, over the Kafka protocol.

    import kbroker.spark
    kbroker.spark.register(spark)            # the format name is "kbroker"
    df = (spark.readStream.format("kbroker")
          .option("kafka.bootstrap.servers", servers)
          .option("subscribe", "metrics").load())

Same schema and options as Spark's built-in `kafka` source and sink (see
options.py), without JVM connector jars; works with any Kafka-compatible broker.
Needs pyspark >= 4.2 and pyarrow.
"""

from kbroker.spark.source import FORMAT, KafkaDataSource, register

__all__ = ["FORMAT", "KafkaDataSource", "register"]
