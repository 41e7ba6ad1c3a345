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
    ({**SERVERS, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True,
     "not supported"),
    ({**SERVERS, "subscribe": "a", "maxTriggerDelay": "soon"}, True, "maxTriggerDelay"),
    ({**SERVERS, "subscribe": "a", "kafka.security.protocol": "SSL",
      "kafka.ssl.truststore.type": "JKS"}, True, "kafka.ssl.truststore.type=JKS"),
    ({**SERVERS, "subscribe": "a", "kafka.security.protocol": "SASL_SSL"}, True,
     "kafka.sasl.mechanism=GSSAPI"),
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


def test_split_ranges_follows_max_records_per_partition() -> None:
    ranges = [OffsetRange("a", p, 0, 20) for p in range(3)]
    split = split_ranges(ranges, None, 5)  # Spark: ceil(20 / 5) = 4 tasks per partition
    assert split == [OffsetRange("a", p, o, o + 5) for p in range(3) for o in range(0, 20, 5)]
    assert len(split_ranges(ranges, None, 7)) == 9  # 7 + 7 + 6 each
    # minPartitions then splits again when the count is still below it
    assert len(split_ranges(ranges, 12, 10)) == 12
    assert split_ranges(ranges, 2, 10) == split_ranges(ranges, None, 10)


def test_split_ranges_keeps_small_ranges_whole_as_spark() -> None:
    ranges = [OffsetRange("a", 0, 0, 1000), OffsetRange("a", 1, 0, 10)]
    split = split_ranges(ranges, 5)  # a-1's share rounds to one part: it stays whole
    assert OffsetRange("a", 1, 0, 10) in split
    assert sum(1 for r in split if r.partition == 0) == 4


def test_option_names_are_case_insensitive() -> None:
    opts = source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "a",
                           "MAXOFFSETSPERTRIGGER": "7", "maxRecordsPerPartition": "3",
                           "MinOffsetsPerTrigger": "50", "maxtriggerdelay": "2s"}, True)
    assert opts.topics == ("a",) and opts.max_offsets_per_trigger == 7
    assert opts.max_records_per_partition == 3
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (50, 2000)
    assert sink_options({"Kafka.Bootstrap.Servers": "h:1", "TOPIC": "t",
                         "KAFKA.ACKS": "1"}).acks == 1


@pytest.mark.parametrize("text, ms", [("500", 500), ("500ms", 500), ("30s", 30_000),
                                      ("15m", 900_000), ("2h", 7_200_000), ("1d", 86_400_000)])
def test_max_trigger_delay_takes_sparks_time_strings(text: str, ms: int) -> None:
    opts = source_options({**SERVERS, "subscribe": "a", "maxTriggerDelay": text}, True)
    assert opts.max_trigger_delay_ms == ms


def test_jvm_only_keys_are_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="kbroker.spark.options"):
        source_options({**SERVERS, "subscribe": "a", "kafka.max.poll.records": "10",
                        "kafka.session.timeout.ms": "1000", "kafka.fetch.min.bytes": "1"},
                       True)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "kafka.max.poll.records" in warnings[0] and "kafka.session.timeout.ms" in warnings[0]
    assert "fetch.min.bytes" not in warnings[0]  # honoured
    caplog.clear()
    with caplog.at_level("WARNING", logger="kbroker.spark.options"):
        sink_options({**SERVERS, "kafka.linger.ms": "5", "kafka.buffer.memory": "1000",
                      "kafka.compression.type": "lz4"})
    assert [r.getMessage() for r in caplog.records] == [
        "kbroker sink: the configurations ['kafka.buffer.memory', 'kafka.linger.ms'] were "
        "supplied but are not used: they tune Kafka's JVM client, which kbroker does not run"]


def test_group_id_is_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="kbroker.spark.options"):
        source_options({**SERVERS, "subscribe": "a", "kafka.group.id": "g",
                        "groupIdPrefix": "p"}, True)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "kafka.group.id=g is accepted but not used" in text
    assert "groupIdPrefix is accepted but not used" in text
    assert "were supplied" not in text


def test_sink_producer_options() -> None:
    from kbroker.spark.options import PARTITION_ROUND_ROBIN, PARTITION_STICKY

    opts = sink_options({**SERVERS, "kafka.compression.type": "ZSTD",
                         "kafka.max.request.size": "5000",
                         "kafka.partitioner.class":
                         "org.apache.kafka.clients.producer.RoundRobinPartitioner"})
    assert (opts.compression, opts.max_request_size, opts.partitioner) == (
        4, 5000, PARTITION_ROUND_ROBIN)
    assert opts.idempotence  # Kafka's producer default with acks=all
    assert not sink_options({**SERVERS, "kafka.acks": "1"}).idempotence
    assert not sink_options({**SERVERS, "kafka.enable.idempotence": "false"}).idempotence
    assert sink_options({**SERVERS, "kafka.partitioner.ignore.keys": "true"}).partitioner == \
        PARTITION_STICKY
    for bad, message in (({"kafka.acks": "1", "kafka.enable.idempotence": "true"}, "acks=all"),
                         ({"kafka.compression.type": "brotli"}, "compression.type"),
                         ({"kafka.partitioner.class": "com.example.MyPartitioner"},
                          "cannot run here"),
                         ({"kafka.transactional.id": "t"}, "transactions"),
                         ({"kafka.max.request.size": "0"}, ">= 1")):
        with pytest.raises(OptionError, match=message):
            sink_options({**SERVERS, **bad})


def test_consumer_options_reach_the_client() -> None:
    opts = source_options({**SERVERS, "subscribe": "a", "fetchOffset.numRetries": "5",
                           "fetchOffset.retryIntervalMs": "20",
                           "kafkaConsumer.pollTimeoutMs": "1500",
                           "kafka.fetch.min.bytes": "1024"}, False).client
    assert (opts.offset_retries, opts.offset_retry_interval_ms) == (5, 20)
    assert (opts.poll_timeout_ms, opts.fetch_min_bytes) == (1500, 1024)


def test_offsets_behind_latest_as_sparks_metrics() -> None:
    from kbroker.spark.metrics import offsets_behind_latest, source_metrics

    got = offsets_behind_latest('{"a": {"0": 10, "1": 5}, "b": {"0": 7}}',
                                {"a": {"0": 40, "1": 5}, "b": {"0": 8}})
    assert got == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "30",
                   "avgOffsetsBehindLatest": repr(31 / 3)}
    progress = {"sources": [{"endOffset": '{"a": {"0": 2}}', "latestOffset": '{"a": {"0": 2}}'},
                            {"endOffset": "12", "latestOffset": "40"}]}
    assert source_metrics(progress) == [{"minOffsetsBehindLatest": "0",
                                         "maxOffsetsBehindLatest": "0",
                                         "avgOffsetsBehindLatest": "0.0"}, {}]
    assert source_metrics(None) == []
