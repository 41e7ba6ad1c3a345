"""Admin requests sent to a broker that is not the controller are forwarded to it (KIP-590),
on a three-broker cluster with a real ZooKeeper: CreateTopics, CreatePartitions,
ElectLeaders, ListPartitionReassignments and DeleteTopics sent to a non-controller
(kbroker's wire client on that broker alone: the admin clients send them to the
controller Metadata names) are answered as the controller answers them, where they
used to get NOT_CONTROLLER; the controller stopped meanwhile, the forwarding broker finds
the next one; kafka-python's KafkaAdminClient holding the old controller's id has its
CreateTopics forwarded by that broker. The Envelope itself: only the controller opens it, and the request inside
is answered under the client's correlation id. ACLs with forwarding:
tests/cluster/test_cluster_acls.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import request_header_version, response_header_version
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages.create_partitions import CreatePartitionsRequest
from kbroker.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kbroker.protocol.messages.delete_topics import DeleteTopicsRequest
from kbroker.protocol.messages.elect_leaders import ElectLeadersRequest
from kbroker.protocol.messages.envelope import EnvelopeRequest
from kbroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.security.principal import KafkaPrincipal
from kbroker.server.forwarding import serialize_principal
from tests.integration.wire import WireClient

from .support import metadata, new_cluster, wait_for_leader, wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, Path(tmp_path_factory.mktemp("forwarding")))
    try:
        yield c
    finally:
        c.stop()


def _controller(cluster: Cluster) -> int:
    def known() -> int | None:
        md = metadata(cluster)
        return md.controller_id if md is not None and md.controller_id >= 0 else None
    found = wait_until(known, "a controller")
    assert isinstance(found, int)
    return found


def _call(cluster: Cluster, broker_id: int, request: Any, version: int) -> Any:
    with WireClient(cluster.brokers[broker_id].bootstrap, timeout=60) as c:
        return c.call(request, version)


def _create(name: str, partitions: int = 1, rf: int = 3) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf)], timeout_ms=30000)


def test_admin_requests_to_a_non_controller_are_answered_by_the_controller(
        cluster: Cluster) -> None:
    controller = _controller(cluster)
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    name = f"fwd-{uuid.uuid4().hex[:8]}"

    created = _call(cluster, other, _create(name), 7)
    (result,) = created.topics
    assert (result.name, result.error_code) == (name, ErrorCode.NONE), result.error_message
    assert result.num_partitions == 1 and result.replication_factor == 3
    assert result.topic_id.int != 0
    again = _call(cluster, other, _create(name), 7).topics[0]
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    wait_for_leader(cluster, name, 0)

    grown = _call(cluster, other, CreatePartitionsRequest(topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=3, assignments=None)],
        timeout_ms=30000, validate_only=False), 3)
    assert [(r.name, r.error_code) for r in grown.results] == [(name, ErrorCode.NONE)]
    for p in range(3):
        wait_for_leader(cluster, name, p)

    elected = _call(cluster, other, ElectLeadersRequest(election_type=0, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=name, partitions=[0, 1, 2])],
        timeout_ms=30000), 2)
    assert elected.error_code == ErrorCode.NONE
    codes = {p.partition_id: p.error_code for t in elected.replica_election_results
             for p in t.partition_result}
    # each partition's preferred replica leads it already
    assert codes == dict.fromkeys(range(3), ErrorCode.ELECTION_NOT_NEEDED)

    listed = _call(cluster, other, ListPartitionReassignmentsRequest(timeout_ms=30000,
                                                                    topics=None), 0)
    assert (listed.error_code, listed.topics) == (ErrorCode.NONE, [])

    deleted = _call(cluster, other, DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), 5)
    assert [(r.name, r.error_code) for r in deleted.responses] == [(name, ErrorCode.NONE)]
    md = metadata(cluster, other, [name])
    assert md is not None and md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_confluent_admin_client_creates_through_the_non_controllers(cluster: Cluster) -> None:
    """Each broker alone as bootstrap, with Envelope now in every broker's ApiVersions:
    librdkafka still sends CreateTopics to the controller Metadata names (kbroker keeps
    naming the real one, as Kafka 3.9 does), so nothing is forwarded here; what is checked
    is that its admin calls work from any broker's bootstrap and the topics exist."""
    names = []
    for broker_id in sorted(cluster.brokers):
        name = f"fwd-ck-{broker_id}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})
        admin.create_topics([NewTopic(name, 2, 2)], operation_timeout=30,
                            request_timeout=40)[name].result(timeout=60)
        names.append(name)
    for name in names:
        for p in range(2):
            wait_for_leader(cluster, name, p)


def _envelope(cluster: Cluster, broker_id: int, inner: Any, version: int,
              correlation_id: int) -> Any:
    w = Writer()
    RequestHeader(request_api_key=inner.API_KEY, request_api_version=version,
                  correlation_id=correlation_id, client_id="enveloped").encode(
        w, request_header_version(inner.API_KEY, version))
    inner.encode(w, version)
    envelope = EnvelopeRequest(
        request_data=bytes(w.to_bytes()),
        request_principal=serialize_principal(KafkaPrincipal("User", "ANONYMOUS")),
        client_host_address=bytes([127, 0, 0, 1]))
    return _call(cluster, broker_id, envelope, 0)


def test_only_the_controller_opens_an_envelope(cluster: Cluster) -> None:
    controller = _controller(cluster)
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    name = f"fwd-env-{uuid.uuid4().hex[:8]}"
    refused = _envelope(cluster, other, _create(name), 7, 4242)
    assert (refused.error_code, refused.response_data) == (ErrorCode.NOT_CONTROLLER, None)

    answered = _envelope(cluster, controller, _create(name), 7, 4242)
    assert answered.error_code == ErrorCode.NONE
    r = Reader(answered.response_data)
    header = ResponseHeader.decode(r, response_header_version(19, 7))
    response = CreateTopicsResponse.decode(r, 7)
    assert header.correlation_id == 4242
    assert [(t.name, t.error_code) for t in response.topics] == [(name, ErrorCode.NONE)]

    # not a request the controller alone answers: refused as a whole
    odd = _envelope(cluster, controller, MetadataRequest(topics=None), 12, 1)
    assert (odd.error_code, odd.response_data) == (ErrorCode.INVALID_REQUEST, None)
    bad = EnvelopeRequest(request_data=b"\x00\x13\x00\x07junk", request_principal=serialize_principal(
        KafkaPrincipal("User", "ANONYMOUS")), client_host_address=bytes([127, 0, 0, 1]))
    assert _call(cluster, controller, bad, 0).error_code == ErrorCode.INVALID_REQUEST
    unreadable = EnvelopeRequest(request_data=b"", request_principal=b"\x00\x07",
                                 client_host_address=bytes([127, 0, 0, 1]))
    assert _call(cluster, controller, unreadable, 0).error_code == \
        ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE


def test_the_controller_stopped_the_forwarding_broker_finds_the_next(cluster: Cluster) -> None:
    """Then kafka-python's admin client, which learnt the controller before it moved, sends
    its next CreateTopics to the old controller, restarted and a follower now: that broker
    forwards it, where it used to answer NOT_CONTROLLER (the client would then ask
    Metadata again: its controller id, a private attribute, shows it did not)."""
    controller = _controller(cluster)
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=60000)
    try:
        first = f"fwd-kp-{uuid.uuid4().hex[:8]}"
        kp.create_topics([KpNewTopic(first, 1, 2)])
        assert kp._controller_id == controller
        cluster.stop_broker(controller)
        try:
            name = f"fwd-moved-{uuid.uuid4().hex[:8]}"
            # sent at once: the forwarder retries until ZooKeeper names the next controller;
            # a client gets either the answer or a retriable error, and its retry succeeds
            result = _call(cluster, other, _create(name, rf=2), 7).topics[0]
            retriable = {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}
            if result.error_code in retriable:
                result = _call(cluster, other, _create(name, rf=2), 7).topics[0]
            assert result.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), \
                result.error_message
            assert _controller(cluster) != controller
            wait_for_leader(cluster, name, 0)
        finally:
            cluster.restart(controller)
        assert _controller(cluster) != controller
        second = f"fwd-kp-{uuid.uuid4().hex[:8]}"
        kp.create_topics([KpNewTopic(second, 1, 2)])
        assert kp._controller_id == controller  # sent to the old controller, answered
        wait_for_leader(cluster, second, 0)
    finally:
        kp.close()
