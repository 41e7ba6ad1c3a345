"""Write DataFrames to topics, as Spark's Kafka sink does (at-least-once).

Columns (as Spark's Kafka sink): value (binary or string, required), key (binary or
string, optional), topic (string; the `topic` option overrides it), partition (int,
optional), headers (array<struct<key string, value binary>>, optional). Other
columns are an error, as in Spark.

Each Spark task encodes its Arrow batches into v2 record batches in Cython
(kbroker._core.batch_encode: uncompressed, CRC-32C, CreateTime = now) and sends
them with Produce (acks=all by default), one batch per partition per request, in
order. Rows go to their `partition` when it is set, else to murmur2(key) like the
Java client and librdkafka's murmur2_random, else (null key) to one random partition
per Arrow batch (sticky, like the Java client). Produce errors that a retry can cure
are retried; a task that fails is retried by Spark and may write its rows again:
at-least-once, no idempotent producer, nothing to do at commit.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from kbroker._core.batch_encode import BinaryColumn, HeadersColumn, Int32Column, encode_batches
from kbroker.client import KafkaClient, KafkaClientError, TopicPartition
from kbroker.spark.offsets import new_client
from kbroker.spark.options import OptionError, SinkOptions, sink_options

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")
METADATA_ATTEMPTS = 50


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    names = schema.fieldNames()
    extra = [n for n in names if n not in SINK_COLUMNS]
    if extra:
        raise OptionError(f"columns {extra} cannot be written; the sink takes {SINK_COLUMNS}")
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("a value column (binary or string) is required")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (BinaryType, StringType)):
            raise OptionError(f"column {name} must be binary or string, not {types[name]}")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError(f"column topic must be a string, not {types['topic']}")
    if "topic" not in types and not opts.topic:
        raise OptionError("no topic: give a topic column or the topic option")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError(f"column partition must be an int, not {types['partition']}")
    if "headers" in types:
        t = types["headers"]
        ok = isinstance(t, ArrayType) and isinstance(t.elementType, StructType) and \
            [f.name for f in t.elementType.fields] == ["key", "value"]
        if not ok:
            raise OptionError("column headers must be array<struct<key string, value binary>>")


def _binary_column(array: pa.Array) -> BinaryColumn:
    if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type):
        array = array.cast(pa.binary())
    elif pa.types.is_string(array.type):
        array = array.view(pa.binary())
    valid, offsets, data = array.buffers()[:3]
    return BinaryColumn(valid, offsets, data, array.offset)


def _int32_column(array: pa.Array) -> Int32Column:
    if array.type != pa.int32():
        array = array.cast(pa.int32())
    valid, values = array.buffers()[:2]
    return Int32Column(valid, values, array.offset)


def _headers_column(array: pa.Array) -> HeadersColumn:
    if pa.types.is_large_list(array.type):
        array = array.cast(pa.list_(array.type.value_field))
    valid, offsets = array.buffers()[:2]
    key, value = array.values.flatten()
    return HeadersColumn(Int32Column(valid, offsets, array.offset), _binary_column(key),
                         _binary_column(value))


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int
    batches: int


class RecordBatchProducer:
    """Encodes Arrow batches into record batches and produces them (one task)."""

    def __init__(self, opts: SinkOptions, client: KafkaClient | None = None) -> None:
        self.opts = opts
        self.client = client if client is not None else new_client(opts.client)
        self._partitions: dict[str, int] = {}
        self.records = 0
        self.batches = 0

    def close(self) -> None:
        self.client.close()

    def partition_count(self, topic: str) -> int:
        n = self._partitions.get(topic)
        if n is None:
            for _ in range(METADATA_ATTEMPTS):
                cluster = self.client.refresh_metadata([topic], allow_auto_topic_creation=True)
                leaders = cluster.topics.get(topic, {})
                if leaders and all(leader >= 0 for leader in leaders.values()):
                    n = len(leaders)
                    break
                time.sleep(0.1)
            else:
                raise KafkaClientError(f"topic {topic} does not exist or has no leaders")
            self._partitions[topic] = n
        return n

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.opts.topic:
            self._write_topic(self.opts.topic, batch)
            return
        topics = batch.column("topic")
        if topics.null_count:
            raise ValueError("null topic present in the data; set the topic option or fill it")
        for topic in pc.unique(topics).to_pylist():
            part = batch.filter(pc.equal(topics, topic))
            self._write_topic(topic, part)

    def _write_topic(self, topic: str, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        n = self.partition_count(topic)
        encoded = encode_batches(
            batch.num_rows,
            _binary_column(batch.column("key")) if "key" in names else None,
            _binary_column(batch.column("value")),
            _int32_column(batch.column("partition")) if "partition" in names else None,
            _headers_column(batch.column("headers")) if "headers" in names else None,
            n, random.randrange(n), int(time.time() * 1000), self.opts.batch_size)
        queues: dict[int, list[bytes]] = {}
        for partition, records in encoded:
            queues.setdefault(partition, []).append(records)
        while queues:  # one batch per partition per Produce request, in order
            round_ = {TopicPartition(topic, p): q.pop(0) for p, q in queues.items()}
            self.client.produce(round_, acks=self.opts.acks)
            queues = {p: q for p, q in queues.items() if q}
        self.records += batch.num_rows
        self.batches += len(encoded)


class _KafkaWriterBase:
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        producer = RecordBatchProducer(self.opts)
        try:
            for batch in iterator:
                producer.write(batch)
        finally:
            producer.close()
        return KafkaCommitMessage(producer.records, producer.batches)


class KafkaBatchWriter(_KafkaWriterBase, DataSourceArrowWriter):
    def commit(self, messages: list[Any]) -> None:
        """At-least-once: the rows were acknowledged in the tasks."""

    def abort(self, messages: list[Any]) -> None:
        """Rows already produced stay in the topic (as with Spark's Kafka sink)."""


class KafkaStreamWriter(_KafkaWriterBase, DataSourceStreamArrowWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:
        """At-least-once: the rows were acknowledged in the tasks."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Rows already produced stay in the topic (as with Spark's Kafka sink)."""
