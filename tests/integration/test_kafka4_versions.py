"""The Kafka 4 versions kbroker advertises beyond 3.9's (issue #36), on the wire and, where
a real client sends the version, with it (kafka-python 3.0 carries Kafka 4.3's schemas):
ApiVersions 5 (KIP-1242), OffsetCommit/OffsetFetch 10 (topics by id), DeleteGroups 3,
ListTransactions 2 (KIP-1152), AlterPartitionReassignments 1."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest as Reassign,
)
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.init_producer_id import InitProducerIdRequest
from kbroker.protocol.messages.list_transactions import ListTransactionsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest as Commit
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest as Fetch

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def topic_metadata(c: WireClient, name: str) -> Any:
    r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                               allow_auto_topic_creation=True), 12)
    assert r.topics[0].error_code == E.NONE
    return r


def commit_v10(c: WireClient, group: str, offsets: dict[uuid.UUID, int]) -> Any:
    return c.call(Commit(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        Commit.OffsetCommitRequestTopic(topic_id=tid, partitions=[
            Commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])
        for tid, offset in offsets.items()]), 10)


def test_api_versions_v5_checks_the_cluster_and_node_meant(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        meta = c.call(MetadataRequest(topics=[]), 12)
        cluster_id, node_id = meta.cluster_id, meta.brokers[0].node_id

        def ask(**kw: Any) -> Any:
            return c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1", **kw), 5)

        for meant in ({}, {"cluster_id": cluster_id, "node_id": node_id}):
            r = ask(**meant)
            assert r.error_code == E.NONE
            assert {k.api_key: k.max_version for k in r.api_keys}[18] == 5
        for wrong in ({"cluster_id": "another-cluster-id0000", "node_id": node_id},
                      {"cluster_id": cluster_id, "node_id": node_id + 1}):
            r = ask(**wrong)
            assert (r.error_code, r.api_keys) == (E.REBOOTSTRAP_REQUIRED, [])
        for half in ({"cluster_id": cluster_id}, {"node_id": node_id}):
            assert ask(**half).error_code == E.INVALID_REQUEST
        assert ask(cluster_id=cluster_id, node_id=node_id).error_code == E.NONE  # still served


def test_offset_commit_and_fetch_v10_name_topics_by_id(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        tid = topic_metadata(c, "by-id").topics[0].topic_id
        nobody = uuid.uuid4()
        r = commit_v10(c, "g10", {tid: 42, nobody: 7})
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in r.topics] == [
            (tid, [E.NONE]), (nobody, [E.UNKNOWN_TOPIC_ID])]
        asked = c.call(Fetch(groups=[Fetch.OffsetFetchRequestGroup(group_id="g10", topics=[
            Fetch.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0, 1]),
            Fetch.OffsetFetchRequestTopics(topic_id=nobody, partition_indexes=[0])])]), 10)
        got = {t.topic_id: [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions]
               for t in asked.groups[0].topics}
        assert got == {tid: [(0, 42, E.NONE), (1, -1, E.NONE)], nobody: [(0, -1, E.UNKNOWN_TOPIC_ID)]}
        every = c.call(Fetch(groups=[Fetch.OffsetFetchRequestGroup(group_id="g10", topics=None)]), 10)
        assert [(t.topic_id, t.partitions[0].committed_offset) for t in every.groups[0].topics] == [(tid, 42)]
        by_name = c.call(Fetch(groups=[Fetch.OffsetFetchRequestGroup(group_id="g10", topics=None)]), 9)
        assert [(t.name, t.partitions[0].committed_offset) for t in by_name.groups[0].topics] == [("by-id", 42)]


def test_delete_groups_v3_gives_each_failure_a_message(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        tid = topic_metadata(c, "dg-topic").topics[0].topic_id
        assert c.call(FindCoordinatorRequest(key="dg", key_type=0), 3).error_code == E.NONE
        assert commit_v10(c, "dg", {tid: 1}).topics[0].partitions[0].error_code == E.NONE
        r = c.call(DeleteGroupsRequest(groups_names=["dg", "missing"]), 3)
        assert [(g.group_id, g.error_code, g.error_message) for g in r.results] == [
            ("dg", E.NONE, None), ("missing", E.GROUP_ID_NOT_FOUND, "The group id does not exist.")]
        r2 = c.call(DeleteGroupsRequest(groups_names=["missing"]), 2)  # no message before v3
        assert [(g.error_code, g.error_message) for g in r2.results] == [(E.GROUP_ID_NOT_FOUND, None)]


def test_list_transactions_v2_filters_by_transactional_id_pattern(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        for txn_id in ("orders-1", "orders-2", "payments-1"):
            assert c.call(FindCoordinatorRequest(key=txn_id, key_type=1), 3).error_code == E.NONE
            assert c.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000),
                          4).error_code == E.NONE
        bad = c.call(ListTransactionsRequest(transactional_id_pattern="orders-("), 2)
        assert (bad.error_code, bad.transaction_states) == (E.INVALID_REGULAR_EXPRESSION, [])
        partial = c.call(ListTransactionsRequest(transactional_id_pattern="orders"), 2)
        assert partial.transaction_states == []  # the whole id must match
    admin = KafkaAdminClient(bootstrap_servers=kbroker_broker.bootstrap_servers, request_timeout_ms=15000)
    try:
        listed = admin.list_transactions(transactional_id_pattern="orders-.*")  # ListTransactions v2
        assert sorted(t.transactional_id for ts in listed.values() for t in ts) == ["orders-1", "orders-2"]
        everything = admin.list_transactions(transactional_id_pattern="")
        assert len([t for ts in everything.values() for t in ts]) == 3
    finally:
        admin.close()


def test_alter_partition_reassignments_v1_may_forbid_a_replication_factor_change(
        kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        node = topic_metadata(c, "ra").brokers[0].node_id

        def reassign(target: list[int], allow: bool) -> tuple[int, Any]:
            r = c.call(Reassign(allow_replication_factor_change=allow, topics=[Reassign.ReassignableTopic(
                name="ra", partitions=[Reassign.ReassignablePartition(partition_index=0, replicas=target)])]), 1)
            p = r.responses[0].partitions[0]
            return p.error_code, p.error_message

        assert reassign([node, node + 1], False) == (
            E.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2")
        assert reassign([node, node + 1], True)[0] == E.INVALID_REPLICA_ASSIGNMENT  # not alive
        assert reassign([node], False) == (E.NONE, None)
    admin = KafkaAdminClient(bootstrap_servers=kbroker_broker.bootstrap_servers, request_timeout_ms=15000)
    try:  # kafka-python sends v1 (allow_replication_factor_change true)
        assert admin.alter_partition_reassignments({TopicPartition("ra", 0): [node]}) == {
            TopicPartition("ra", 0): None}
    finally:
        admin.close()
