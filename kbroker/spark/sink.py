"""Write DataFrames to topics, as Spark's Kafka sink does (at-least-once).

Columns (as Spark's KafkaWriter): value (binary or string, required), key (binary or
string, optional), topic (string; the `topic` option overrides it), partition (int,
optional), headers (array<struct<key string, value binary>>, optional), timestamp
(timestamp, or double seconds; optional: the record's CreateTime, else now). Other
columns are ignored, as Spark ignores them, so a DataFrame read from the source can
be written back as it is.

Each Spark task encodes its Arrow batches into v2 record batches in Cython
(kbroker._core.batch_encode, CRC-32C) and sends them with Produce (acks=all by
default), one batch per partition per request and at most kafka.max.request.size
bytes per request, in order, one request in flight: its answer is read when the next
request is ready (the Arrow batch that follows handed over by Spark and encoded
meanwhile) or when the task ends. Rows go to their `partition` when it is set, else as
kafka.partitioner.class says: by default murmur2(key) like the Java client and
librdkafka's murmur2_random, null keys to one random partition per Arrow batch
(sticky, like the Java client). kafka.compression.type compresses each batch's
records with the broker's codecs. Idempotence (kafka.enable.idempotence, on by
default with acks=all as in Kafka's producer): each task takes a producer id with
InitProducerId and numbers its batches per partition, so a Produce retried after a
lost answer is not written twice. Errors that a retry can cure are retried; a task
that fails is retried by Spark with a new producer id and may write its rows again:
at-least-once, as Spark's sink, nothing to do at commit.
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
    DoubleType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kbroker._core.batch_encode import (
    BinaryColumn,
    HeadersColumn,
    Int32Column,
    Int64Column,
    encode_batches,
    frame_batch,
)
from kbroker.client import KafkaClient, KafkaClientError, PendingProduce, TopicPartition
from kbroker.records import compression
from kbroker.spark.offsets import new_client
from kbroker.spark.options import OptionError, SinkOptions, sink_options

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers", "timestamp")
METADATA_ATTEMPTS = 50
HEADER_SIZE = 61  # the v2 batch header; records start after it


class RecordTooLargeError(ValueError):
    """A record larger than kafka.max.request.size (Kafka's RecordTooLargeException)."""


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery: the columns it writes, with their types."""
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
    if "timestamp" in types and not isinstance(types["timestamp"], (
            TimestampType, TimestampNTZType, DoubleType)):
        raise OptionError(f"column timestamp must be a timestamp or a double, "
                          f"not {types['timestamp']}")


def _timestamp_ms(array: pa.Array) -> Int64Column:
    """Record timestamps in ms from a timestamp column (any unit) or double seconds,
    truncated as Spark's writer does (micros / 1000)."""
    if pa.types.is_timestamp(array.type):
        micros = array.cast(pa.timestamp("us", array.type.tz)).view(pa.int64())
    else:
        micros = pc.cast(pc.multiply(array, 1_000_000.0), pa.int64(), safe=False)
    millis = pc.divide(micros, 1000)  # integer division truncates, as the JVM's
    if millis.type != pa.int64():
        millis = millis.cast(pa.int64())
    valid, values = millis.buffers()[:2]
    return Int64Column(valid, values, millis.offset)


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
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}
        self._pending: PendingProduce | None = None
        if opts.idempotence:
            self.producer_id, self.producer_epoch = self.client.init_producer_id()

    def flush(self) -> None:
        """Wait for the last Produce sent (write() returns with it in flight, so the broker
        appends while Spark hands over the next Arrow batch and it is encoded)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.wait()

    def close(self, flush: bool = True) -> None:
        """flush() first, unless the task is failing anyway (flush=False)."""
        try:
            if flush:
                self.flush()
        finally:
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
        opts = self.opts
        encoded = encode_batches(
            batch.num_rows,
            _binary_column(batch.column("key")) if "key" in names else None,
            _binary_column(batch.column("value")),
            _int32_column(batch.column("partition")) if "partition" in names else None,
            _headers_column(batch.column("headers")) if "headers" in names else None,
            n, random.randrange(n), int(time.time() * 1000),
            min(opts.batch_size, opts.max_request_size),
            _timestamp_ms(batch.column("timestamp")) if "timestamp" in names else None,
            opts.partitioner)
        queues: dict[int, list[bytes]] = {}
        for partition, records in encoded:
            if len(records) > opts.max_request_size:  # a record of its own, too large
                raise RecordTooLargeError(
                    f"a record to {topic} is {len(records) - HEADER_SIZE} bytes when "
                    f"serialized, larger than kafka.max.request.size ({opts.max_request_size})")
            queues.setdefault(partition, []).append(records)
        while queues:  # one batch per partition per Produce request, in order
            round_: dict[TopicPartition, bytes] = {}
            size = 0
            for p, q in queues.items():
                tp = TopicPartition(topic, p)
                framed = self._frame(tp, q[0])
                if round_ and size + len(framed) > opts.max_request_size:
                    break
                round_[tp] = framed
                size += len(framed)
                q.pop(0)
            self.flush()  # one request in flight: a retry cannot overtake a later batch
            self._pending = self.client.send_produce(round_, acks=opts.acks)
            for tp, framed in round_.items():
                if self.producer_id >= 0:
                    self._sequences[tp] = self._sequences.get(tp, 0) + _record_count(framed)
            queues = {p: q for p, q in queues.items() if q}
        self.records += batch.num_rows
        self.batches += len(encoded)

    def _frame(self, tp: TopicPartition, batch: bytes) -> bytes:
        """The encoder's batch with its records compressed and the producer id and
        sequence set, as the options ask (unchanged when they ask for neither)."""
        codec = self.opts.compression
        if not codec and self.producer_id < 0:
            return batch
        view = memoryview(batch)
        count = _record_count(batch)
        base_timestamp = int.from_bytes(view[27:35], "big", signed=True)
        max_timestamp = int.from_bytes(view[35:43], "big", signed=True)
        section = view[HEADER_SIZE:]
        if codec:
            section = memoryview(compression.compress(codec, section))
        return frame_batch(section, count, base_timestamp, max_timestamp, attributes=codec,
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=self._sequences.get(tp, 0)
                           if self.producer_id >= 0 else -1)


def _record_count(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big")


class _KafkaWriterBase:
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)
        # only the columns Spark's writer takes travel to the tasks
        self.columns = [f.name for f in schema.fields if f.name in SINK_COLUMNS]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        producer = RecordBatchProducer(self.opts)
        done = False
        try:
            for batch in iterator:
                if batch.num_columns != len(self.columns):
                    batch = batch.select(self.columns)
                producer.write(batch)
            producer.flush()
            done = True
        finally:
            producer.close(flush=done)
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
