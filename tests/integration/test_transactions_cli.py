"""`kbroker transactions` against `kbroker serve`: list, describe, describe-producers, and
abort of a hanging transaction (one written by a producer whose coordinator never ends
it: here, raw Produce requests of a transactional batch with no coordinator involved)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.records.batch_header import TRANSACTIONAL_BIT
from tests.batches import make_batch

from .conftest import ROOT
from .txn_support import offsets, read_values
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def transactions(bs: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", "transactions", *args, "--bootstrap-server", bs],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def test_list_describe_and_describe_producers(broker_process: Any) -> None:
    bs, topic = broker_process.bootstrap_servers, f"cli-tx-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bs, "transactional.id": "cli-open"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x", partition=0)
    p.flush(30)
    listed = transactions(bs, "list")
    assert listed.returncode == 0, listed.stderr
    assert rows(listed.stdout)[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert ["cli-open", "0"] == rows(listed.stdout)[1][:2] and rows(listed.stdout)[1][3] == "Ongoing"
    assert transactions(bs, "list", "--state", "CompleteCommit").stdout.count("cli-open") == 0
    described = transactions(bs, "describe", "--transactional-id", "cli-open")
    assert described.returncode == 0, described.stderr
    header, row = rows(described.stdout)
    assert header[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    assert row[1] == "cli-open" and row[4] == "Ongoing" and row[-1] == f"{topic}-0"
    producers = transactions(bs, "describe-producers", "--topic", topic, "--partition", "0")
    assert producers.returncode == 0, producers.stderr
    assert rows(producers.stdout)[1][-1] == "0"  # CurrentTransactionStartOffset
    p.commit_transaction(30)
    # as Kafka's tool prints them: no open transaction is "None", an unknown
    # coordinator epoch -1 (TransactionsCommand.DescribeProducersCommand)
    ended = rows(transactions(bs, "describe-producers", "--topic", topic, "--partition",
                              "0").stdout)[1]
    assert ended[-1] == "None" and int(ended[2]) >= -1
    missing = transactions(bs, "describe", "--transactional-id", "nobody")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_abort_a_hanging_transaction(broker_process: Any) -> None:
    bs, topic = broker_process.bootstrap_servers, f"cli-hang-{uuid.uuid4().hex[:8]}"
    with WireClient(bs) as c:
        c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=True), 9)
        batch = make_batch([b"hanging"], producer_id=424242, producer_epoch=3, base_sequence=0,
                           attributes=TRANSACTIONAL_BIT)
        resp = c.call(ProduceRequest(transactional_id="ghost", acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
        assert resp.responses[0].partition_responses[0].error_code == 0
    assert offsets(bs, topic) == (0, 1)  # nobody will ever end it
    bad = transactions(bs, "abort", "--topic", topic, "--partition", "0")
    assert bad.returncode == 2
    aborted = transactions(bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    assert aborted.stdout == ("Aborted the transaction of producer 424242 (epoch 3, coordinator "
                              f"epoch 0) on {topic}-0: its leader wrote an abort marker\n")
    assert offsets(bs, topic) == (2, 2)
    assert read_values(bs, topic) == []
