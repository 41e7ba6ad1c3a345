"""`kbroker topics` end to end: the CLI as a user runs it, against a `kbroker serve`
subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.storage.partition_metadata import read_partition_metadata

from .conftest import ROOT

# a bound on a hang only (each command has its own 60 s): the test runs 15 CLI processes,
# 10 s or more each on a loaded machine
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def topics(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kbroker", "topics", *args,
           "--bootstrap-server", broker.bootstrap_servers, "--timeout", "15"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_topics_cli_create_list_describe_alter_delete(broker_process: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    done = topics(broker_process, "create", name, "--partitions", "2", "--config", "retention.ms=60000")
    assert done.returncode == 0, done.stderr
    assert f"Created topic {name}." in done.stdout

    again = topics(broker_process, "create", name, "--partitions", "2")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert topics(broker_process, "create", name, "--if-not-exists").returncode == 0

    listed = topics(broker_process, "list")
    assert listed.returncode == 0 and name in listed.stdout.split()

    described = topics(broker_process, "describe", name)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {name}\tTopicId: ")
    assert "PartitionCount: 2\tReplicationFactor: 1" in lines[0]
    assert "retention.ms=60000" in lines[0]
    assert lines[1:] == [f"\tTopic: {name}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tOffline: "
                         for p in (0, 1)]
    missing = topics(broker_process, "describe", name, f"{name}-missing")
    assert missing.returncode == 1 and f"{name}-missing: UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    assert missing.stdout.startswith(f"Topic: {name}\t")

    altered = topics(broker_process, "alter-configs", name, "--add-config", "segment.bytes=1048576",
                     "--delete-config", "retention.ms")
    assert altered.returncode == 0, altered.stderr
    first = topics(broker_process, "describe", name).stdout.splitlines()[0]
    assert "segment.bytes=1048576" in first and "retention.ms=" not in first

    bad = topics(broker_process, "alter-configs", name, "--add-config", "segment.bytes=big")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr

    grown = topics(broker_process, "add-partitions", name, "--partitions", "4")
    assert grown.returncode == 0, grown.stderr
    assert "PartitionCount: 4" in topics(broker_process, "describe", name).stdout

    deleted = topics(broker_process, "delete", name)
    assert deleted.returncode == 0 and f"Deleted topic {name}." in deleted.stdout
    assert name not in topics(broker_process, "list").stdout.split()
    missing = topics(broker_process, "delete", name)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PART" in missing.stderr
    assert topics(broker_process, "delete", name, "--if-exists").returncode == 0


def test_topics_cli_validate_only_and_usage(broker_process: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    checked = topics(broker_process, "create", name, "--validate-only")
    assert checked.returncode == 0 and f"Validated topic {name}." in checked.stdout
    assert name not in topics(broker_process, "list").stdout.split()
    usage = topics(broker_process, "create", name, "--config", "novalue")
    assert usage.returncode == 2 and "KEY=VALUE" in usage.stderr


def test_topic_ids_read_as_kafka_writes_them_in_describe_and_in_the_broker_log(
        broker_process: Any) -> None:
    """URL-safe base64, 22 characters (Kafka's Uuid.toString, kafka-topics.sh --describe),
    the same text as in the topic's partition.metadata."""
    name = f"ids-{uuid.uuid4().hex[:8]}"
    assert topics(broker_process, "create", name, "--partitions", "1").returncode == 0
    described = topics(broker_process, "describe", name)
    assert described.returncode == 0, described.stderr
    topic_id = described.stdout.split("TopicId: ")[1].split("\t")[0]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id), topic_id
    on_disk = read_partition_metadata(str(broker_process.log_dir / f"{name}-0"))
    assert on_disk is not None and topic_id == uuid_to_base64(on_disk)
    assert f"created topic {name} (1 partitions, id {topic_id})" in broker_process.output()
    assert topics(broker_process, "delete", name).returncode == 0
    assert f"deleted topic {name} (id {topic_id})" in broker_process.output()
