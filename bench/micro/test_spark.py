"""The Arrow decode under kbroker.spark: raw record batches to a RecordBatch in Spark's
Kafka schema (ColumnarRecords in C, then pyarrow wraps its buffers without copying)."""

from __future__ import annotations

import pytest
from micro_inputs import payload, timed

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from kbroker.spark.arrow import decode_to_batch  # noqa: E402
from kbroker.spark.source import arrow_schema, kafka_schema  # noqa: E402

_SHAPES = {"100x100x100B": (100, 100, 100), "16x64x1KiB": (16, 64, 1024)}


@pytest.mark.parametrize("headers", [False, True], ids=["no-headers", "headers"])
@pytest.mark.parametrize("shape", list(_SHAPES))
def test_arrow_decode(benchmark, shape: str, headers: bool) -> None:  # type: ignore[no-untyped-def]
    batches, records, size = _SHAPES[shape]
    data = payload(batches, records, size, headers=headers)
    schema = arrow_schema(kafka_schema(include_headers=headers))
    count = batches * records
    benchmark.group = "arrow decode"
    benchmark.extra_info["bytes"] = len(data)
    batch = timed(benchmark, decode_to_batch, data, 0, count, "bench", 0, schema)
    assert batch.num_rows == count and batch.schema == schema
    if headers:
        assert batch.column("headers")[count - 1].as_py() == [
            {"key": "trace-id", "value": b"0123456789abcdef"}, {"key": "source", "value": b"bench"}]
