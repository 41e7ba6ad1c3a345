"""pyspark's UNKNOWN_RESPONSE fault without kbroker: a Spark Declarative Pipeline whose one
streaming table reads a ten-line Python data source. With pyspark 4.3.0 the table is
computed ("Run is COMPLETED") and `spark-pipelines run` then exits 1 with
[UNKNOWN_RESPONSE] Unknown response: Plan observed(__python_accumulator__=...)
(SPARK-59135). tests/spark/test_declarative_pipeline.py runs it."""
from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)


class TinyStreamReader(DataSourceStreamReader):
    def initialOffset(self):
        return {"n": 0}

    def latestOffset(self):
        return {"n": 10}

    def partitions(self, start, end):
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition):
        lo, hi = partition.value
        for i in range(lo, hi):
            yield (i,)


class TinyReader(DataSourceReader):
    def read(self, partition):
        for i in range(10):
            yield (i,)


class Tiny(DataSource):
    @classmethod
    def name(cls):
        return "tiny"

    def schema(self):
        return "n long"

    def reader(self, schema):
        return TinyReader()

    def streamReader(self, schema):
        return TinyStreamReader()


spark = SparkSession.active()
spark.dataSource.register(Tiny)


@dp.table
def streamed():
    return spark.readStream.format("tiny").load()
