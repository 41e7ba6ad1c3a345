"""Topic set-up and offset queries for the perf tool (AdminClient and watermarks), and
the check that something listens at the bootstrap address before any client starts.

The clients made here, in the parent, log through a logger that drops librdkafka's
lines (one per failed connection attempt, a few hundred in ten seconds): a failure
reaches the user once, as the exception the call raises.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def client_config(bootstrap_server: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """What every perf client sets: its id, and librdkafka's notices and worse on stderr
    (not its info lines: a progress line each second stays readable); -X log_level=6
    brings them back."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_server, "client.id": "kbroker-perf",
                              "log_level": 5}
    config.update(extra or {})
    return config


_CONNECTION_PREFIXES = ("security.", "ssl.", "sasl.")
PROBE_TIMEOUT_S = 5.0


class Unreachable(ConnectionError):
    """Nothing accepts connections at any of the bootstrap addresses."""


def check_reachable(bootstrap_server: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Return once one `host:port` of the comma-separated list accepts a TCP connection;
    raise Unreachable naming each address and why it refused otherwise."""
    reasons = []
    for address in bootstrap_server.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except ValueError:
            reasons.append(f"{address.strip()}: not HOST:PORT")
        except OSError as exc:
            reasons.append(f"{address.strip()}: {exc.strerror or exc}")
    raise Unreachable(f"cannot connect to {'; '.join(reasons)} (is a broker listening there? "
                      f"--bootstrap-server HOST:PORT)")


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("kbroker.perf.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return quiet


def _parent_config(bootstrap_server: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {**client_config(bootstrap_server, extra), "logger": _quiet_logger()}


def connection_config(client: dict[str, str] | None) -> dict[str, str]:
    """The -X settings about how to connect (security.protocol, ssl.*, sasl.*): what the
    tool's own admin and watermark clients need besides the bootstrap server."""
    return {k: v for k, v in (client or {}).items() if k.startswith(_CONNECTION_PREFIXES)}


def topic_partitions(bootstrap_server: str, topic: str, timeout_s: float = 10.0,
                     security: dict[str, str] | None = None) -> list[int]:
    """The partition ids of `topic`, or [] when the broker does not know it."""
    admin = AdminClient(_parent_config(bootstrap_server, connection_config(security)))
    metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def ensure_topic(
    bootstrap_server: str, topic: str, partitions: int, replication_factor: int = 1,
    timeout_s: float = 30.0, security: dict[str, str] | None = None,
) -> list[int]:
    """Create `topic` with `partitions` partitions unless it exists; return its partition ids."""
    security = connection_config(security)
    existing = _known_partitions(bootstrap_server, topic, security)
    if existing:
        return existing
    admin = AdminClient(_parent_config(bootstrap_server, security))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
        operation_timeout=timeout_s,
    )
    try:
        futures[topic].result(timeout_s)
    except KafkaException as exc:
        code = exc.args[0].code() if exc.args else None
        if code == KafkaError._UNSUPPORTED_FEATURE:
            return _auto_create(bootstrap_server, topic, partitions, timeout_s, security)
        if code != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _known_partitions(bootstrap_server, topic, security)
        if len(found) >= partitions:
            return found
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not visible with {partitions} partitions after {timeout_s} s")


def _auto_create(bootstrap_server: str, topic: str, partitions: int, timeout_s: float,
                 security: dict[str, str]) -> list[int]:
    """No CreateTopics on this broker: let a producer's Metadata request auto-create the topic."""
    print(f"kbroker perf: broker has no CreateTopics; relying on auto-creation of {topic}",
          file=sys.stderr)
    producer = Producer(_parent_config(bootstrap_server, {**security,
                                                         "allow.auto.create.topics": "true"}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = producer.list_topics(topic=topic, timeout=5.0)
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            if len(found.partitions) != partitions:
                print(f"kbroker perf: {topic} was auto-created with {len(found.partitions)} "
                      f"partitions, not {partitions}", file=sys.stderr)
            return sorted(found.partitions)
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} was not auto-created within {timeout_s} s")


def _known_partitions(bootstrap_server: str, topic: str, security: dict[str, str]) -> list[int]:
    admin = AdminClient(_parent_config(bootstrap_server, security))
    metadata = admin.list_topics(timeout=10.0)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def watermarks(
    bootstrap_server: str, topic: str, partitions: list[int], timeout_s: float = 10.0,
    security: dict[str, str] | None = None,
) -> dict[int, tuple[int, int]]:
    """{partition: (log_start_offset, high_watermark)} as the broker reports them now."""
    consumer = Consumer(
        _parent_config(
            bootstrap_server,
            {**connection_config(security), "group.id": f"kbroker-perf-{uuid.uuid4().hex[:8]}",
             "enable.auto.commit": "false"},
        )
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            for p in partitions
        }
    finally:
        consumer.close()
