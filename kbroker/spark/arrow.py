"""Arrow RecordBatches in the schema of Spark's Kafka source, from decoded columns.

The columns come from kbroker._core.batch_decode.ColumnarRecords.take() as raw
buffers (validity bitmap, int32 offsets, data); this module wraps them, without
copying, into pyarrow arrays of the types Spark expects:

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, UTC], timestampType int32
    [, headers list<struct<key string, value binary>>]   (includeHeaders=true)

Spark checks the batch schema against the source schema exactly (field names,
types and nullability), so the types are taken from the schema Spark hands the
reader (`arrow_schema()`), never spelled twice.

The decoders of one process share one BufferPool (`BUFFER_POOL`): a column buffer
comes back to it once the Arrow arrays over it are freed (pyspark has sent the batch
to the JVM), and the next batch of any partition read in this process, in this task
or the next one the reused Python worker runs, decodes into it. pyspark keeps a task's
first batch and the batch before the current one referenced, so a pool of one decoder
alone would seldom have a spare; the pool keeps at most two spares per column and
256 MiB in all.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kbroker._core.batch_decode import BufferPool, ColumnarRecords
from kbroker.records.compression import decompress

BUFFER_POOL = BufferPool()


def _binary(typ: pa.DataType, n: int, column: tuple[Any, ...]) -> pa.Array:
    valid, offsets, data, nulls = column
    return pa.Array.from_buffers(
        typ, n, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets),
                 pa.py_buffer(data)], null_count=nulls)


def _fixed(typ: pa.DataType, n: int, buffer: Any) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(buffer)], null_count=0)


def _headers(typ: pa.DataType, n: int, column: tuple[Any, ...]) -> pa.Array:
    (valid, offsets, nulls, count, key_offsets, key_data,
     value_valid, value_offsets, value_data, value_nulls) = column
    struct_type = typ.value_type
    key = _binary(struct_type.field("key").type, count, (None, key_offsets, key_data, 0))
    value = _binary(struct_type.field("value").type, count,
                    (value_valid, value_offsets, value_data, value_nulls))
    entries = pa.StructArray.from_arrays([key, value], fields=list(struct_type))
    return pa.Array.from_buffers(
        typ, n, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets)],
        null_count=nulls, children=[entries])


def record_batch(columns: dict[str, Any], topic: str, partition: int,
                 schema: pa.Schema) -> pa.RecordBatch:
    """A RecordBatch of `schema` (Spark's Kafka schema) from ColumnarRecords.take()."""
    n = columns["num_rows"]
    arrays = []
    for f in schema:
        name = f.name
        if name in ("key", "value"):
            arrays.append(_binary(f.type, n, columns[name]))
        elif name == "topic":
            arrays.append(pa.repeat(pa.scalar(topic, f.type), n))
        elif name == "partition":
            arrays.append(pa.repeat(pa.scalar(partition, f.type), n))
        elif name == "headers":
            arrays.append(_headers(f.type, n, columns["headers"]))
        else:  # offset, timestamp, timestampType
            arrays.append(_fixed(f.type, n, columns[name]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def new_decoder(schema: pa.Schema, check_crcs: bool = True) -> ColumnarRecords:
    """A decoder for `schema`'s columns, with the process's BUFFER_POOL; compressed batches
    are inflated by compression.decompress, bounded (a batch past the bound is a
    CorruptRecordError)."""
    return ColumnarRecords(include_headers="headers" in schema.names, check_crcs=check_crcs,
                           decompress=decompress, pool=BUFFER_POOL)


def decode_to_batch(records: Any, start_offset: int, end_offset: int, topic: str,
                    partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """Decode raw record batches in one call (tests and tools)."""
    cols = new_decoder(schema)
    cols.add_records(records, start_offset, end_offset)
    return record_batch(cols.take(), topic, partition, schema)
