"""Messages as JSON (kbroker.server.request_json): fields per version, records as counts,
batch headers or records (in memory and from a segment file slice), never record data
by default; a response's error codes per partition and its messages; pre-encoded
Metadata entries; a consumer group's subscription and assignment bytes decoded."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.codec import Writer
from kbroker.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kbroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kbroker.protocol.messages.find_coordinator import FindCoordinatorResponse
from kbroker.protocol.messages.join_group import JoinGroupRequest
from kbroker.protocol.messages.metadata import MetadataResponse
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.records.file_slice import FileSlice, SegmentFile
from kbroker.server.apis.metadata import EncodedTopic
from kbroker.server.request_json import (
    Records,
    api_name,
    error_counts,
    errors,
    records_json,
    to_json,
)
from tests.batches import Rec, make_batch

SECRET = b"record-data-never-shown"


def _produce(records: bytes) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


def _records_of(body: dict) -> dict:
    return body["topic_data"][0]["partition_data"][0]["records"]


def test_api_names_are_the_protocol_guides() -> None:
    assert (api_name(0), api_name(10), api_name(44)) == (
        "Produce", "FindCoordinator", "IncrementalAlterConfigs")


def test_fields_of_the_version_only() -> None:
    body = to_json(FindCoordinatorResponse(error_code=15, error_message="m", node_id=-1), 0)
    assert body == {"error_code": 15, "node_id": -1, "host": "", "port": 0}
    assert "throttle_time_ms" in to_json(FindCoordinatorResponse(), 1)


def test_records_are_counts_unless_asked() -> None:
    data = make_batch([SECRET, SECRET]) + make_batch([b"x"], base_offset=2)
    request = _produce(data)
    body = to_json(request, 9)
    assert _records_of(body) == {"size": len(data), "batches": 2, "records": 3}
    assert SECRET.decode() not in json.dumps(body)
    batches = _records_of(to_json(request, 9, Records.BATCHES))["batches"]
    assert [(b["base_offset"], b["record_count"], b["compression"]) for b in batches] == [
        (0, 2, "none"), (2, 1, "none")]
    assert SECRET.decode() not in json.dumps(batches)


def test_records_mode_decodes_keys_values_and_headers() -> None:
    data = make_batch([Rec(b"text", key=b"k", headers=[("h", b"\xff")]), Rec(b"\xff\xfe")])
    batch = _records_of(to_json(_produce(data), 9, Records.RECORDS))["batches"][0]
    first, second = batch["records"]
    assert (first["key"], first["value"], first["headers"]) == (
        "k", "text", [{"key": "h", "value_base64": "/w=="}])
    assert (second["key"], second["value_base64"]) == (None, "//4=")


def test_a_partial_last_batch_is_left_out() -> None:
    data = make_batch([b"a"]) + make_batch([b"b"])[:30]
    assert records_json(data) == {"size": len(data), "batches": 1, "records": 1}


def test_records_of_a_segment_file_slice(tmp_path: Path) -> None:
    data = make_batch([b"a", b"b"]) + make_batch([b"c"], base_offset=2)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\0" * 7 + data)
    fd = os.open(path, os.O_RDONLY)
    records = FileSlice(SegmentFile(fd), 7, len(data))
    assert records_json(records) == {"size": len(data), "batches": 2, "records": 3}
    shown = records_json(records, Records.RECORDS)
    assert [r["value"] for b in shown["batches"] for r in b["records"]] == ["a", "b", "c"]


def test_errors_per_partition_and_messages() -> None:
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=i, error_code=6 if i == 3 else 0)
            for i in range(4)])])
    codes, messages = errors(response, 9)
    assert (dict(codes), messages) == ({"NONE": 3, "NOT_LEADER_OR_FOLLOWER": 1}, [])
    assert error_counts(response, 9) == {0: 3, 6: 1}  # the request metrics' count, by code
    coordinators = FindCoordinatorResponse(coordinators=[
        FindCoordinatorResponse.Coordinator(key=k, error_code=15, error_message="not yet")
        for k in ("a", "b")])
    codes, messages = errors(coordinators, 4)
    assert (dict(codes), messages) == ({"COORDINATOR_NOT_AVAILABLE": 2}, ["not yet"])
    assert error_counts(coordinators, 4) == {15: 2}
    assert error_counts(coordinators, 3) == {0: 1}  # v3: one coordinator, at the top level


def test_pre_encoded_metadata_entries_are_read_back() -> None:
    topic = MetadataResponse.MetadataResponseTopic(name="t", partitions=[
        MetadataResponse.MetadataResponsePartition(
            partition_index=0, error_code=ErrorCode.LEADER_NOT_AVAILABLE, leader_id=-1)])
    w = Writer()
    topic.encode(w, 12)
    response = MetadataResponse(topics=[EncodedTopic((), w.to_bytes())])  # type: ignore[list-item]
    codes, _ = errors(response, 12)
    assert dict(codes) == {"NONE": 1, "LEADER_NOT_AVAILABLE": 1}
    assert error_counts(response, 12) == {0: 1, 5: 1}
    assert to_json(response, 12)["topics"][0]["partitions"][0]["leader_id"] == -1


def test_topic_ids_are_kafkas_url_safe_base64() -> None:
    topic_id = uuid.UUID(bytes=b"\xfb\xef\xbe" * 5 + b"\xff")
    response = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
        name="t", topic_id=topic_id)])
    assert to_json(response, 12)["topics"][0]["topic_id"] == "--------------------_w"


def test_a_consumer_subscription_is_decoded_other_bytes_are_base64() -> None:
    w = Writer()
    w.int16(1)
    ConsumerProtocolSubscription(topics=["orders"], user_data=b"").encode(w, 1)
    request = JoinGroupRequest(group_id="g", protocol_type="consumer", protocols=[
        JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=w.to_bytes()),
        JoinGroupRequest.JoinGroupRequestProtocol(name="other", metadata=b"\x01")])
    protocols = to_json(request, 5)["protocols"]
    assert protocols[0]["metadata"]["version"] == 1
    assert protocols[0]["metadata"]["topics"] == ["orders"]
    assert protocols[1]["metadata"] == "AQ=="


def test_errors_under_other_names_are_counted() -> None:
    # AddPartitionsToTxn v0-3 names its per-partition code partition_error_code.
    R = AddPartitionsToTxnResponse
    response = R(results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(
        name="t", results_by_partition=[
            R.AddPartitionsToTxnPartitionResult(partition_index=i, partition_error_code=51 if i else 0)
            for i in range(3)])])
    codes, _ = errors(response, 3)
    assert dict(codes) == {"NONE": 1, "CONCURRENT_TRANSACTIONS": 2}
    assert error_counts(response, 3) == {0: 1, 51: 2}  # the request metrics count them too
