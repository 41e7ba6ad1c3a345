"""Offset planning and option parsing of kbroker.spark (pure functions, no Spark, no broker)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from kbroker.client import TopicPartition  # noqa: E402
from kbroker.spark.offsets import OffsetRange, rate_limit, split_ranges  # noqa: E402
from kbroker.spark.options import (  # noqa: E402
    OptionError,
    offsets_from_json,
    offsets_json,
    sink_options,
    source_options,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_rate_limit_is_proportional_and_rounds_like_spark() -> None:
    start = {A0: 0, A1: 100, B0: 5}
    latest = {A0: 1000, A1: 100, B0: 6}  # backlogs 1000, 0, 1
    ends = rate_limit(100, start, latest)
    # A0 gets floor(100 * 1000/1001) = 99; B0's share 0.0999 rounds up to 1
    assert ends == {A0: 99, A1: 100, B0: 6}
    assert rate_limit(5000, start, latest) == latest
    assert rate_limit(10, {A0: 7}, {A0: 7}) == {A0: 7}


def test_split_ranges_follows_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 300), OffsetRange("a", 1, 0, 100),
              OffsetRange("b", 0, 50, 50)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are dropped
    assert split_ranges(ranges, 2) == ranges[:2]
    split = split_ranges(ranges, 4)
    assert split == [OffsetRange("a", 0, 0, 100), OffsetRange("a", 0, 100, 200),
                     OffsetRange("a", 0, 200, 300), OffsetRange("a", 1, 0, 100)]


def test_offsets_json_is_sparks_shape() -> None:
    offsets = {B0: 3, A1: 2, A0: 1}
    assert offsets_json(offsets) == {"a": {"0": 1, "1": 2}, "b": {"0": 3}}
    assert offsets_from_json(offsets_json(offsets)) == offsets


def test_source_options() -> None:
    opts = source_options({**SERVERS, "subscribe": "a, b", "maxoffsetspertrigger": "10",
                           "includeheaders": "true"}, streaming=True)
    assert opts.topics == ("a", "b") and opts.max_offsets_per_trigger == 10
    assert opts.include_headers and opts.starting.kind == "latest"
    batch = source_options({**SERVERS, "assign": '{"a": [1, 0]}',
                            "startingOffsets": '{"a": {"0": -2, "1": 5}}'}, streaming=False)
    assert batch.assigned == (A0, A1) and batch.starting.offsets == {A0: -2, A1: 5}
    assert batch.ending.kind == "latest"


@pytest.mark.parametrize("options, streaming, message", [
    ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
    ({**SERVERS}, False, "exactly one of"),
    ({**SERVERS, "subscribe": "a", "subscribePattern": "a.*"}, False, "exactly one of"),
    ({**SERVERS, "subscribe": "a", "startingOffsets": "latest"}, False, "not allowed"),
    ({**SERVERS, "subscribe": "a", "endingOffsets": "earliest"}, False, "not allowed"),
    ({**SERVERS, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "earliest"),
    ({**SERVERS, "subscribe": "a", "endingOffsets": "latest"}, True, "batch queries only"),
    ({**SERVERS, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "true or false"),
    ({**SERVERS, "subscribe": "a", "kafka.group.id": "g"}, True, "not supported"),
    ({**SERVERS, "subscribe": "a", "kafka.security.protocol": "SSL"}, True, "PLAINTEXT"),
    ({**SERVERS, "assign": "[1]"}, True, "assign"),
])
def test_bad_source_options(options: dict[str, str], streaming: bool, message: str) -> None:
    lowered = {k.lower(): v for k, v in options.items()}  # as Spark hands them over
    with pytest.raises(OptionError, match=message):
        source_options(lowered, streaming)


def test_sink_options() -> None:
    opts = sink_options({**SERVERS, "topic": "out", "kafka.acks": "1"})
    assert (opts.topic, opts.acks) == ("out", 1)
    with pytest.raises(OptionError, match="acks"):
        sink_options({**SERVERS, "kafka.acks": "2"})
