"""The request log (`kafka.request.logger`) of a `kbroker serve` subprocess, driven by real
clients over real sockets: one DEBUG line per completed request with its error codes
(per partition summarised) and error messages, TRACE body summaries without record
data, levels from --log-level, from log4j keys in the config file and live from
IncrementalAlterConfigs on the BROKER_LOGGER resource (kafka-python's admin client);
and nothing built while it is off (an embedded broker)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from kbroker.broker import Broker
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.server import request_logger
from tests.batches import values_batch

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15
COMPLETED = "DEBUG kafka.request.logger: Completed request: "
SECRET = b"payload-SECRET-4711"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _lines(bp: Any, marker: str, predicate: Callable[[str], bool] = lambda line: True,
           timeout: float = TIMEOUT) -> list[str]:
    """The broker's log lines holding `marker` that satisfy `predicate`, once there is one
    (a request's lines are written after its response: the client may see it first)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in bp.output().splitlines() if marker in line and predicate(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _completed(bp: Any, api: str, predicate: Callable[[str], bool] = lambda line: True,
               timeout: float = TIMEOUT) -> list[str]:
    return _lines(bp, f"{COMPLETED}{api} v", predicate, timeout)


def _field(line: str, name: str) -> str:
    match = re.search(rf" {name}=(\S+)", line)
    assert match, (name, line)
    return match.group(1)


def test_a_failing_request_is_one_debug_line_with_its_code_and_message(broker_factory: Any) -> None:
    bp = broker_factory(args=["--log-level", "kafka.request.logger=DEBUG"]).start()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers, "client.id": "bad-admin"})
    topic = _name("shred")
    future = admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "shred"})],
                                 request_timeout=TIMEOUT)[topic]
    with pytest.raises(KafkaException, match="cleanup.policy"):
        future.result()
    lines = _completed(bp, "CreateTopics", lambda line: "INVALID_CONFIG" in line)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "errors=[1 x INVALID_CONFIG]" in line
    assert ('errorMessages=["Invalid value shred for configuration cleanup.policy: String must '
            'be one of: compact, delete"]') in line
    assert 'clientId="bad-admin"' in line
    assert _field(line, "clientSoftware").startswith("confluent-kafka-python/")
    assert _field(line, "principal") == "User:ANONYMOUS"
    assert _field(line, "listener") == "PLAINTEXT"
    host, port = bp.bootstrap_servers.split(":")
    assert re.fullmatch(rf"{host}:{port}-127\.0\.0\.1:\d+-\d+", _field(line, "connection"))
    times = {name: float(_field(line, name)) for name in (
        "totalTimeMs", "requestQueueTimeMs", "localTimeMs", "remoteTimeMs", "responseQueueTimeMs",
        "sendTimeMs")}
    assert all(t >= 0 for t in times.values())
    assert int(_field(line, "requestBytes")) > 0 and int(_field(line, "responseBytes")) > 0


def test_a_transaction_attempt_is_one_line_per_request(broker_factory: Any) -> None:
    """librdkafka's init_transactions looks up its transaction coordinator (FindCoordinator
    key_type 1) until it gets one: each lookup is one line with its answer's code, and a
    COORDINATOR_NOT_AVAILABLE carries the broker's reason."""
    bp = broker_factory(args=["--log-level", "kafka.request.logger=DEBUG"]).start()
    producer = Producer({"bootstrap.servers": bp.bootstrap_servers, "client.id": "txn-app",
                         "transactional.id": _name("tx")})
    try:
        producer.init_transactions(3)
    except KafkaException:
        pass  # no transaction coordinator (yet): the log says why
    lines = _completed(bp, "FindCoordinator", lambda line: 'clientId="txn-app"' in line)
    assert lines
    assert len({_field(line, "correlationId") + _field(line, "connection") for line in lines}) \
        == len(lines)
    for line in lines:
        assert re.search(r" errors=\[1 x [A-Z_]+\]", line), line
        if "COORDINATOR_NOT_AVAILABLE" in line:
            assert "errorMessages=[" in line, line


def test_errors_are_summarised_per_partition(broker_factory: Any) -> None:
    bp = broker_factory({"auto.create.topics.enable": "false"},
                        args=["--log-level", "kafka.request.logger=DEBUG"]).start()
    topic, missing = _name("three"), _name("missing")
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT)[topic].result()
    # librdkafka asks Metadata for the missing topic (no auto-creation) and never produces
    producer = Producer({"bootstrap.servers": bp.bootstrap_servers, "client.id": "lost"})
    producer.produce(missing, b"x")
    assert producer.flush(3) == 1
    assert _completed(bp, "Metadata", lambda line: 'clientId="lost"' in line
                      and "UNKNOWN_TOPIC_OR_PARTITION" in line)
    # a Produce to three partitions and to a partition of a missing topic
    data = [ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.PartitionProduceData(index=i, records=values_batch(2)) for i in range(3)]),
        ProduceRequest.TopicProduceData(name=missing, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=values_batch(1))])]
    with WireClient(bp.bootstrap_servers) as wire:
        wire.call(ProduceRequest(acks=1, timeout_ms=5000, topic_data=data), 9)
    lines = _completed(bp, "Produce", lambda line: 'clientId="wire"' in line)
    assert len(lines) == 1 and "errors=[3 x NONE, 1 x UNKNOWN_TOPIC_OR_PARTITION]" in lines[0]


def test_trace_shows_bodies_without_record_data(broker_factory: Any) -> None:
    bp = broker_factory(args=["--log-level", "kafka.request.logger=TRACE"]).start()
    topic = _name("bodies")
    producer = Producer({"bootstrap.servers": bp.bootstrap_servers, "linger.ms": 0})
    for _ in range(3):
        producer.produce(topic, SECRET)
    assert producer.flush(TIMEOUT) == 0
    assert _completed(bp, "Produce")
    bodies = _lines(bp, "TRACE kafka.request.logger: Request and response bodies: Produce")
    assert bodies
    assert re.search(r'"records":\{"size":\d+,"batches":1,"records":\d\}', bodies[0]), bodies[0]
    assert '"partition_responses":[{"index":0,"error_code":0' in bodies[0]
    assert SECRET.decode() not in bp.output()
    longest = max(len(line) for line in bp.output().splitlines() if "Request and response" in line)
    assert longest < 2 * request_logger.MAX_BODY_CHARS + 400  # each body is cut


def test_levels_from_the_config_file_and_live_from_broker_logger(
        broker_factory: Any, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("log4j.rootLogger=INFO, stdout\n"
                      "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                      "log4j.logger.kafka.request.logger=WARN, requestAppender\n")
    bp = broker_factory(args=[str(config)]).start()
    kp = KafkaAdminClient(bootstrap_servers=bp.bootstrap_servers, client_id="kp-admin")
    try:
        loggers = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")
        described = kp.describe_configs([loggers], config_filter="all")["broker_logger"]["0"]
        assert described["kafka.request.logger"]["value"] == "WARN"
        assert not _completed(bp, "DescribeConfigs", timeout=0)

        on = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0",
                            configs={"kafka.request.logger": ("SET", "DEBUG")})
        kp.alter_configs([on], incremental=True)
        kp.describe_configs([loggers], config_filter="all")
        assert _completed(bp, "DescribeConfigs", lambda line: 'clientId="kp-admin"' in line)

        off = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0",
                             configs={"kafka.request.logger": ("DELETE", None)})
        kp.alter_configs([off], incremental=True)  # inherits the root's INFO again
        described = kp.describe_configs([loggers], config_filter="all")["broker_logger"]["0"]
        assert described["kafka.request.logger"]["value"] == "INFO"
        logged = len(_completed(bp, "DescribeConfigs", timeout=0))
        kp.describe_configs([loggers], config_filter="all")
        assert len(_completed(bp, "DescribeConfigs", timeout=0)) == logged
    finally:
        kp.close()


def test_a_bad_level_stops_the_start(broker_factory: Any, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("log4j.logger.kafka.request.logger=LOUD\n")
    bp = broker_factory(args=[str(config)])
    with pytest.raises(RuntimeError, match="exited with 2"):
        bp.start(timeout=30)
    assert "log4j.logger.kafka.request.logger" in bp.output()


def test_off_builds_nothing_and_on_logs_in_process(
        kbroker_broker: Broker, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    built: list[Any] = []
    real = request_logger.LoggedRequest

    def counting(*args: Any) -> Any:
        built.append(args)
        return real(*args)

    monkeypatch.setattr(request_logger, "LoggedRequest", counting)
    logger = request_logger.request_logger
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        topic = _name("quiet")
        _round_trip(kbroker_broker.bootstrap_servers, topic)
        assert built == []
        logger.setLevel(logging.DEBUG)  # records reach caplog's handler on the root
        _round_trip(kbroker_broker.bootstrap_servers, topic)
        assert built
        deadline = time.monotonic() + TIMEOUT
        while not any("Completed request: Fetch" in m for m in caplog.messages):
            assert time.monotonic() < deadline, caplog.messages
            time.sleep(0.05)
    finally:
        logger.setLevel(level)


def _round_trip(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic, b"v")
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("g"),
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return
            assert time.monotonic() < deadline, "no record consumed"
    finally:
        consumer.close()
