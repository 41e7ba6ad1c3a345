"""The PySpark data source: Spark's Kafka schema and options, over the Kafka protocol.

    import kbroker.spark
    kbroker.spark.register(spark)
    df = (spark.read.format("kbroker")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Spark's own short name `kafka` belongs to its JVM source and cannot be taken by a
Python data source (DATA_SOURCE_ALREADY_EXISTS), so the format is "kbroker".

Batch reads plan one Spark partition per topic-partition offset range (more with
minPartitions) on the driver with Metadata and ListOffsets; each task fetches its
range and yields Arrow RecordBatches (partition_reader.py). Streaming reads keep
their position as Spark's offset JSON, {"topic": {"partition": next offset}}, in
the query's checkpoint: a restarted query replays an uncommitted micro-batch with
exactly the same ranges, so output to an idempotent sink has no loss and no
duplicates. Partitions that appear later start at their earliest offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kbroker.client import TopicPartition
from kbroker.spark.offsets import (
    OffsetPlanner,
    OffsetRange,
    rate_limit,
    report_data_loss,
    split_ranges,
)
from kbroker.spark.options import (
    SourceOptions,
    offsets_from_json,
    offsets_json,
    source_options,
)
from kbroker.spark.partition_reader import PartitionReader

log = logging.getLogger(__name__)

FORMAT = "kbroker"



def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (every field nullable, as in Spark)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range of one topic partition (picklable)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks returned batches against (UTC timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def read_range(opts: SourceOptions, schema: StructType,
               partition: InputPartition) -> Iterator[pa.RecordBatch]:
    offset_range = getattr(partition, "offset_range", None)
    if offset_range is None:  # Spark's placeholder when there is nothing to read
        return iter(())
    return iter(PartitionReader(opts.client, offset_range, arrow_schema(schema),
                                fail_on_data_loss=opts.fail_on_data_loss,
                                max_records_per_arrow_batch=opts.max_records_per_arrow_batch))


def check_schema(schema: StructType, opts: SourceOptions) -> None:
    """Like Spark's Kafka source, the schema is fixed: no user-specified schema."""
    if schema != kafka_schema(opts.include_headers):
        raise ValueError("the kbroker source has a fixed schema (Spark's Kafka schema); "
                         f"a user-specified schema is not supported: {schema.simpleString()}")


def _ranges(starts: dict[TopicPartition, int], ends: dict[TopicPartition, int],
            opts: SourceOptions) -> list[OffsetRange]:
    ranges = []
    for tp, end in sorted(ends.items()):
        start = starts[tp]
        if end < start:
            report_data_loss(opts.fail_on_data_loss,
                             f"{tp}: the end offset {end} is before the start offset {start} "
                             "(was the topic recreated or truncated?).")
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = source_options(options, streaming=False)
        check_schema(schema, self.opts)
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        planner = OffsetPlanner(self.opts)
        try:
            tps = planner.topic_partitions()
            starts = planner.resolve(self.opts.starting, tps, starting=True)
            ends = planner.resolve(self.opts.ending, tps, starting=False)
            self._check_start_available(planner, starts)
        finally:
            planner.close()
        return [KafkaInputPartition(r) for r in _ranges(starts, ends, self.opts)]

    def _check_start_available(self, planner: OffsetPlanner,
                               starts: dict[TopicPartition, int]) -> None:
        earliest = planner.earliest(list(starts))
        for tp, start in starts.items():
            if start < earliest[tp]:
                report_data_loss(self.opts.fail_on_data_loss,
                                 f"{tp}: startingOffsets asks for {start} but the log starts "
                                 f"at {earliest[tp]}.")
                starts[tp] = earliest[tp]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.opts, self.schema, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side of a streaming read; Spark keeps one instance per query run."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = source_options(options, streaming=True)
        check_schema(schema, self.opts)
        self.schema = schema
        self.planner = OffsetPlanner(self.opts)
        self.available_now: dict[TopicPartition, int] | None = None
        self.last_trigger_ms = 0  # Spark's lastTriggerMillis: the first trigger is not delayed
        self.latest_offsets: dict[TopicPartition, int] = {}  # as seen by the last latestOffset

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader to run read() in tasks: no client, no target
        return {"opts": self.opts, "schema": self.schema, "planner": OffsetPlanner(self.opts),
                "available_now": None, "last_trigger_ms": 0, "latest_offsets": {}}

    def initialOffset(self) -> dict:
        tps = self.planner.topic_partitions()
        return offsets_json(self.planner.resolve(self.opts.starting, tps, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger as ReadMaxRows, else minOffsetsPerTrigger as ReadMinRows.
        pyspark has no composite limit, so when both are set the minimum (and
        maxTriggerDelay, which ReadMinRows cannot carry) comes from the options."""
        n = self.opts.max_offsets_per_trigger
        if n is not None:
            return ReadMaxRows(n)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self._latest()

    def _latest(self) -> dict[TopicPartition, int]:
        return self.planner.latest(self.planner.topic_partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        starts = offsets_from_json(start)
        if self.available_now is not None:
            latest = dict(self.available_now)
        else:
            latest = self._latest()
        self.latest_offsets = dict(latest)
        new = [tp for tp in latest if tp not in starts]
        starts.update(self.planner.earliest(new))
        # an end below its start (truncated or recreated partition) is reported when planned
        if isinstance(limit, ReadAllAvailable):
            return offsets_json(latest)
        if self._delay_batch(starts, latest):
            return offsets_json({tp: starts[tp] for tp in latest})
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(limit.max_rows, starts, latest)
        return offsets_json(latest)

    def _delay_batch(self, starts: dict[TopicPartition, int],
                     latest: dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger / maxTriggerDelay as Spark's delayBatch: skip this trigger
        while fewer records than the minimum wait and maxTriggerDelay has not passed since
        the last batch. Never under availableNow, which must reach its end."""
        minimum = self.opts.min_offsets_per_trigger
        if minimum is None or self.available_now is not None:
            return False
        now = int(time.time() * 1000)
        if now - self.last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self.last_trigger_ms = now
            return False
        if sum(end - starts.get(tp, 0) for tp, end in latest.items()) < minimum:
            return True
        self.last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets the last latestOffset saw (Spark's latestPartitionOffsets):
        the progress's latestOffset, from which metrics.source_metrics computes how far
        the query is behind."""
        return offsets_json(self.latest_offsets) if self.latest_offsets else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        starts = offsets_from_json(start)
        ends = offsets_from_json(end)
        gone = sorted(set(starts) - set(ends))
        if gone:
            report_data_loss(self.opts.fail_on_data_loss,
                             f"partitions {gone} are no longer part of the subscription.")
        new = [tp for tp in ends if tp not in starts]
        starts.update(self.planner.earliest(new))
        earliest = self.planner.earliest([tp for tp in ends if ends[tp] > starts[tp]])
        for tp, first in earliest.items():
            if starts[tp] < first:
                report_data_loss(self.opts.fail_on_data_loss,
                                 f"{tp}: offsets {starts[tp]}..{first - 1} were removed before "
                                 "the query read them.")
                starts[tp] = min(first, ends[tp])
        return [KafkaInputPartition(r) for r in _ranges(starts, ends, self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        self.planner.close()


class KafkaDataSource(DataSource):
    """Spark's Kafka source and sink, format "kbroker" (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        headers = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        return kafka_schema(headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from kbroker.spark.sink import KafkaBatchWriter

        if overwrite:
            # Spark's Kafka sink: "Save mode Overwrite not allowed for Kafka"; a topic
            # cannot be truncated by a write
            raise ValueError('Save mode Overwrite is not allowed for the kbroker sink (nor for '
                             'Spark\'s Kafka sink): use .mode("append"). A Python data source '
                             'cannot take the default mode ErrorIfExists either; Spark refuses '
                             'it before the sink is called.')

        return KafkaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from kbroker.spark.sink import KafkaStreamWriter

        return KafkaStreamWriter(dict(self.options), schema)


def register(spark: Any) -> None:
    """Register the "kbroker" format with a SparkSession."""
    spark.dataSource.register(KafkaDataSource)
