"""The protocol trace of a `kbroker serve --trace FILE` subprocess, read back with
`kbroker trace`: a confluent-kafka consumer group session reads top to bottom as the
protocol guide describes it (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch,
Fetch, OffsetCommit, LeaveGroup), the subscription inside JoinGroup is decoded, record
data stays out unless --trace-records, filters and --summary work, and the file is
rotated at its bound."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from kbroker.protocol.messages.api_versions import ApiVersionsRequest

from .conftest import ROOT
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15
SECRET = b"payload-SECRET-4711"
SESSION = ["FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch", "Fetch", "OffsetCommit",
           "LeaveGroup"]


def _trace_cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kbroker", "trace", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text().splitlines()]


def _group_session(bootstrap: str, topic: str, client_id: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, SECRET + b"-%d" % i)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "client.id": client_id, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < n:
            assert time.monotonic() < deadline, f"consumed {got} of {n}"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_a_consumer_group_session_reads_top_to_bottom(broker_factory: Any, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    bp = broker_factory(args=["--trace", str(trace)]).start()
    topic = f"session-{uuid.uuid4().hex[:8]}"
    _group_session(bp.bootstrap_servers, topic, "session-consumer", 5)
    assert bp.stop() == 0  # a clean stop flushes and closes the trace

    mine = [line for line in _lines(trace) if line["client_id"] == "session-consumer"]
    requests = [line["api"] for line in mine if line["direction"] == "request"]
    firsts = [requests.index(api) for api in SESSION]
    assert firsts == sorted(firsts), requests
    join = next(line for line in mine if line["api"] == "JoinGroup"
                and line["direction"] == "request")
    subscription = join["body"]["protocols"][0]["metadata"]
    assert subscription["topics"] == [topic]
    fetched = [p["records"] for line in mine if line["api"] == "Fetch"
               and line["direction"] == "response"
               for t in line["body"]["responses"] for p in t["partitions"] if p["records"]]
    assert sum(r["records"] for r in fetched) >= 5
    assert all("base_offset" in b and "records" not in b for r in fetched for b in r["batches"])
    assert SECRET.decode() not in trace.read_text()
    responses = {(line["connection"], line["correlation_id"]) for line in mine
                 if line["direction"] == "response"}
    # a long-poll Fetch, or a Metadata the client sends as it closes, may go unanswered
    unanswered = [line["api"] for line in mine if line["direction"] == "request"
                  and (line["connection"], line["correlation_id"]) not in responses]
    assert not set(unanswered) & set(SESSION) - {"Fetch"}, unanswered

    summary = _trace_cli(str(trace), "--summary", "--client-id", "session-consumer")
    rows = {row.split()[1]: row.split() for row in summary.splitlines()[1:]}
    assert set(SESSION) <= set(rows), summary
    assert rows["SyncGroup"][2] == rows["SyncGroup"][3]  # every request answered
    assert all(float(rows[api][4]) >= 0 for api in SESSION)

    shown = _trace_cli(str(trace), "--client-id", "session-consumer", "--api", "JOIN_GROUP")
    assert shown and all(" JoinGroup v" in row for row in shown.splitlines())
    errors = _trace_cli(str(trace), "--errors-only", "--json")
    for line in map(json.loads, errors.splitlines()):
        if line["direction"] == "response":
            assert set(line["errors"]) - {"NONE"}, line


def test_trace_records_shows_the_records(broker_factory: Any, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    bp = broker_factory(args=["--trace", str(trace), "--trace-records"]).start()
    topic = f"records-{uuid.uuid4().hex[:8]}"
    _group_session(bp.bootstrap_servers, topic, "records-consumer", 2)
    assert bp.stop() == 0
    produce = next(line for line in _lines(trace)
                   if line["api"] == "Produce" and line["direction"] == "request")
    batch = produce["body"]["topic_data"][0]["partition_data"][0]["records"]["batches"][0]
    assert batch["records"][0]["value"].startswith(SECRET.decode())


def test_the_trace_is_bounded_and_rotated(broker_factory: Any, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    bp = broker_factory(args=["--trace", str(trace), "--trace-max-bytes", "20000",
                              "--trace-backups", "2"]).start()
    with WireClient(bp.bootstrap_servers) as wire:
        for _ in range(100):  # about 2 KB of trace each
            wire.call(ApiVersionsRequest(), 0)
    assert bp.stop() == 0
    files = [trace.with_name(f"trace.jsonl.{i}") for i in (2, 1)] + [trace]
    assert all(f.exists() and f.stat().st_size <= 20000 for f in files)
    assert not trace.with_name("trace.jsonl.3").exists()
    lines = [json.loads(row) for row in _trace_cli(str(trace), "--json").splitlines()]
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
    wire_ids = [line["correlation_id"] for line in lines
                if line["client_id"] == "wire" and line["direction"] == "response"]
    assert wire_ids[-1] == 100 and wire_ids == list(range(wire_ids[0], 101))
