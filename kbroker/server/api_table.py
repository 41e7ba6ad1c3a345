"""The one table of implemented APIs: ApiVersions is answered from it.

Adding an API = one module under kbroker/server/apis/ (a `handle(ctx, request)`
function and, where the response has per-item error codes, an
`error_response(request, version, error_code)`) plus one line here. The
connection refuses (closes) any key or version not in this table, so what is
advertised is exactly what is handled.

A handler returns the response object, None for "no response" (acks=0
Produce), or an awaitable of either (long-poll Fetch). Handlers that change
state (Produce) must do so before their first `await`: requests on one
connection are dispatched in order, and only responses wait for each other.

Version ranges follow Kafka 3.9's maxima (kafka-python infers the broker
version from them; Fetch 17 reads as 3.9). Produce is advertised from 0 though
only 3+ (magic 2) is accepted, because librdkafka 2.0.2 turns compression off
when the Produce range lacks 0 (librdkafka #4956); clients always pick the
highest common version.

Kafka 4.x (issue #36). The codecs cover every version of Kafka 3.9 and 4.x; a range goes
past 3.9's maximum where the handler does what the newer version means. Advertised 4.x
versions:
- Metadata 13 (KIP-1102): a top-level error code, for REBOOTSTRAP_REQUIRED, which
  Kafka's brokers leave NONE, as kbroker does.
- DescribeGroups 6 (KIP-1043): an unknown group answers GROUP_ID_NOT_FOUND with an
  error message, not a Dead group without error.
- DescribeCluster 2 (KIP-1073): include_fenced_brokers and is_fenced; no kbroker
  broker is ever fenced (see describe_cluster.py).
- ApiVersions 5 (KIP-1242): the cluster id and node id the client means to reach;
  another's answers REBOOTSTRAP_REQUIRED (api_versions.py).
- OffsetCommit / OffsetFetch 10 (KIP-848): topics by id; an unknown id answers
  UNKNOWN_TOPIC_ID.
- DeleteGroups 3: a per-group error message.
- ListTransactions 2 (KIP-1152): a transactional id pattern (INVALID_REGULAR_EXPRESSION).
- AlterPartitionReassignments 1: allow_replication_factor_change (INVALID_REPLICATION_FACTOR).
- GetTelemetrySubscriptions 0, PushTelemetry 0 (KIP-714, Kafka 3.7: client metrics, which
  librdkafka 2.5+ pushes by default) and ListConfigResources 0-1 (v0: 3.7's
  ListClientMetricsResources; v1: KIP-1142, 4.1). Apache Kafka answers the telemetry APIs
  only in KRaft mode with a metrics reporter plugin; kbroker always (kbroker.telemetry).
- ShareGroupHeartbeat 1, ShareGroupDescribe 1, ShareFetch 1-2, ShareAcknowledge 1-2
  (KIP-932 share groups, as Kafka 4.1+ and librdkafka 2.16's ShareConsumer; v0 was 4.0's
  early access), and the share-group admin APIs DescribeShareGroupOffsets 0-1 (v1:
  KIP-1226's lag), AlterShareGroupOffsets 0, DeleteShareGroupOffsets 0, in both modes
  (docs/share-groups.md). In cluster mode brokers send each other the share
  coordinator's ReadShareGroupState 0, WriteShareGroupState 0-1,
  InitializeShareGroupState 0, DeleteShareGroupState 0 and ReadShareGroupStateSummary 0-1.
Not advertised, though codecs exist:
- Produce 12-13, TxnOffsetCommit 5-6, EndTxn 5: Produce 12, TxnOffsetCommit 5 and EndTxn 5
  are KIP-890's transaction version 2 (partitions join a transaction implicitly, the
  epoch bumps at every commit), which kbroker's transaction coordinator does not
  implement (transaction.version 0); Produce 13 and TxnOffsetCommit 6 (KIP-1319) are
  those plus topic ids; and kafka-python reads Produce 13 as a 4.1 broker.
- Fetch 18: a follower's high watermark in the request (KIP-1166), for a replica
  manager kbroker's does not have.
- ListOffsets 8-11 (tiered storage's earliest-local, earliest-pending-upload): no tiered
  storage; kafka-python reads ListOffsets 10 as 4.0 and 11 as 4.2.
- DescribeLogDirs 5 (KIP-1066, is_cordoned): kafka-python 3.0 reads it as a 4.3 broker,
  and its own integration suite then hangs in test_delete_groups (a consumer's first
  poll never returns; tests/integration/test_kafka_python_suite.py), so it stays at 4
  until that is understood.
- InitProducerId 6: latestVersionUnstable (KIP-939, two-phase commit); never advertised.
- The APIs Kafka 4 added that kbroker does not serve (streams groups, KRaft's) have
  codecs but no handler, so they are not in the table and not advertised.
"""

from __future__ import annotations

from typing import Any

from kbroker.protocol.api_key import ApiKey
from kbroker.server.api_spec import ApiSpec as ApiSpec
from kbroker.server.apis import add_offsets_to_txn as add_offsets_to_txn
from kbroker.server.apis import add_partitions_to_txn as add_partitions_to_txn
from kbroker.server.apis import alter_client_quotas as alter_client_quotas
from kbroker.server.apis import alter_configs as alter_configs
from kbroker.server.apis import alter_partition as alter_partition
from kbroker.server.apis import alter_partition_reassignments as alter_partition_reassignments
from kbroker.server.apis import alter_replica_log_dirs as alter_replica_log_dirs
from kbroker.server.apis import alter_share_group_offsets as alter_share_group_offsets
from kbroker.server.apis import alter_user_scram_credentials as alter_user_scram_credentials
from kbroker.server.apis import api_versions as api_versions
from kbroker.server.apis import consumer_group_describe as consumer_group_describe
from kbroker.server.apis import consumer_group_heartbeat as consumer_group_heartbeat
from kbroker.server.apis import controlled_shutdown as controlled_shutdown
from kbroker.server.apis import create_acls as create_acls
from kbroker.server.apis import create_partitions as create_partitions
from kbroker.server.apis import create_topics as create_topics
from kbroker.server.apis import delete_acls as delete_acls
from kbroker.server.apis import delete_groups as delete_groups
from kbroker.server.apis import delete_records as delete_records
from kbroker.server.apis import delete_share_group_offsets as delete_share_group_offsets
from kbroker.server.apis import delete_share_group_state as delete_share_group_state
from kbroker.server.apis import delete_topics as delete_topics
from kbroker.server.apis import describe_acls as describe_acls
from kbroker.server.apis import describe_client_quotas as describe_client_quotas
from kbroker.server.apis import describe_cluster as describe_cluster
from kbroker.server.apis import describe_configs as describe_configs
from kbroker.server.apis import describe_groups as describe_groups
from kbroker.server.apis import describe_log_dirs as describe_log_dirs
from kbroker.server.apis import describe_producers as describe_producers
from kbroker.server.apis import describe_share_group_offsets as describe_share_group_offsets
from kbroker.server.apis import describe_topic_partitions as describe_topic_partitions
from kbroker.server.apis import describe_transactions as describe_transactions
from kbroker.server.apis import describe_user_scram_credentials as describe_user_scram_credentials
from kbroker.server.apis import elect_leaders as elect_leaders
from kbroker.server.apis import end_txn as end_txn
from kbroker.server.apis import fetch as fetch
from kbroker.server.apis import find_coordinator as find_coordinator
from kbroker.server.apis import get_telemetry_subscriptions as get_telemetry_subscriptions
from kbroker.server.apis import heartbeat as heartbeat
from kbroker.server.apis import incremental_alter_configs as incremental_alter_configs
from kbroker.server.apis import init_producer_id as init_producer_id
from kbroker.server.apis import initialize_share_group_state as initialize_share_group_state
from kbroker.server.apis import join_group as join_group
from kbroker.server.apis import leader_and_isr as leader_and_isr
from kbroker.server.apis import leave_group as leave_group
from kbroker.server.apis import list_config_resources as list_config_resources
from kbroker.server.apis import list_groups as list_groups
from kbroker.server.apis import list_offsets as list_offsets
from kbroker.server.apis import list_partition_reassignments as list_partition_reassignments
from kbroker.server.apis import list_transactions as list_transactions
from kbroker.server.apis import metadata as metadata
from kbroker.server.apis import offset_commit as offset_commit
from kbroker.server.apis import offset_delete as offset_delete
from kbroker.server.apis import offset_fetch as offset_fetch
from kbroker.server.apis import offset_for_leader_epoch as offset_for_leader_epoch
from kbroker.server.apis import produce as produce
from kbroker.server.apis import push_telemetry as push_telemetry
from kbroker.server.apis import read_share_group_state as read_share_group_state
from kbroker.server.apis import read_share_group_state_summary as read_share_group_state_summary
from kbroker.server.apis import sasl_authenticate as sasl_authenticate
from kbroker.server.apis import sasl_handshake as sasl_handshake
from kbroker.server.apis import share_acknowledge as share_acknowledge
from kbroker.server.apis import share_fetch as share_fetch
from kbroker.server.apis import share_group_describe as share_group_describe
from kbroker.server.apis import share_group_heartbeat as share_group_heartbeat
from kbroker.server.apis import stop_replica as stop_replica
from kbroker.server.apis import sync_group as sync_group
from kbroker.server.apis import txn_offset_commit as txn_offset_commit
from kbroker.server.apis import update_metadata as update_metadata
from kbroker.server.apis import write_share_group_state as write_share_group_state
from kbroker.server.apis import write_txn_markers as write_txn_markers


def _spec(key: ApiKey, lo: int, hi: int, module: Any) -> ApiSpec:
    return ApiSpec(key, lo, hi, module.handle, getattr(module, "error_response", None))


API_TABLE: dict[int, ApiSpec] = {
    s.api_key: s
    for s in (
        _spec(ApiKey.PRODUCE, 0, 11, produce),
        _spec(ApiKey.FETCH, 4, 17, fetch),
        _spec(ApiKey.LIST_OFFSETS, 1, 7, list_offsets),
        _spec(ApiKey.METADATA, 0, 13, metadata),
        _spec(ApiKey.API_VERSIONS, 0, 5, api_versions),
        _spec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, offset_for_leader_epoch),
        _spec(ApiKey.OFFSET_COMMIT, 2, 10, offset_commit),
        _spec(ApiKey.OFFSET_FETCH, 1, 10, offset_fetch),
        _spec(ApiKey.FIND_COORDINATOR, 0, 6, find_coordinator),
        _spec(ApiKey.JOIN_GROUP, 0, 9, join_group),
        _spec(ApiKey.HEARTBEAT, 0, 4, heartbeat),
        _spec(ApiKey.LEAVE_GROUP, 0, 5, leave_group),
        _spec(ApiKey.SYNC_GROUP, 0, 5, sync_group),
        _spec(ApiKey.DESCRIBE_GROUPS, 0, 6, describe_groups),
        _spec(ApiKey.LIST_GROUPS, 0, 5, list_groups),
        _spec(ApiKey.DELETE_GROUPS, 0, 3, delete_groups),
        _spec(ApiKey.OFFSET_DELETE, 0, 0, offset_delete),
        _spec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_group_heartbeat),
        _spec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe),
        _spec(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, share_group_heartbeat),
        _spec(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, share_group_describe),
        _spec(ApiKey.SHARE_FETCH, 1, 2, share_fetch),
        _spec(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, share_acknowledge),
        _spec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, describe_share_group_offsets),
        _spec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, alter_share_group_offsets),
        _spec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, delete_share_group_offsets),
        _spec(ApiKey.INIT_PRODUCER_ID, 0, 5, init_producer_id),
        _spec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions_to_txn),
        _spec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, add_offsets_to_txn),
        _spec(ApiKey.END_TXN, 0, 4, end_txn),
        _spec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, txn_offset_commit),
        _spec(ApiKey.WRITE_TXN_MARKERS, 0, 1, write_txn_markers),
        _spec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions),
        _spec(ApiKey.LIST_TRANSACTIONS, 0, 2, list_transactions),
        _spec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, describe_producers),
        _spec(ApiKey.CREATE_TOPICS, 0, 7, create_topics),
        _spec(ApiKey.DELETE_TOPICS, 0, 6, delete_topics),
        _spec(ApiKey.DELETE_RECORDS, 0, 2, delete_records),
        _spec(ApiKey.DESCRIBE_CONFIGS, 0, 4, describe_configs),
        _spec(ApiKey.ALTER_CONFIGS, 0, 2, alter_configs),
        _spec(ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions),
        _spec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs),
        _spec(ApiKey.DESCRIBE_CLUSTER, 0, 2, describe_cluster),
        _spec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions),
        _spec(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, describe_log_dirs),
        _spec(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2, alter_replica_log_dirs),
        _spec(ApiKey.ELECT_LEADERS, 0, 2, elect_leaders),
        _spec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter_partition_reassignments),
        _spec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_partition_reassignments),
        _spec(ApiKey.SASL_HANDSHAKE, 0, 1, sasl_handshake),
        _spec(ApiKey.SASL_AUTHENTICATE, 0, 2, sasl_authenticate),
        _spec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe_user_scram_credentials),
        _spec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter_user_scram_credentials),
        _spec(ApiKey.DESCRIBE_ACLS, 0, 3, describe_acls),
        _spec(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, describe_client_quotas),
        _spec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter_client_quotas),
        _spec(ApiKey.CREATE_ACLS, 0, 3, create_acls),
        _spec(ApiKey.DELETE_ACLS, 0, 3, delete_acls),
        _spec(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_telemetry_subscriptions),
        _spec(ApiKey.PUSH_TELEMETRY, 0, 0, push_telemetry),
        _spec(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, list_config_resources),
    )
}

# Cluster mode adds the APIs brokers send each other: the controller's LeaderAndIsr,
# UpdateMetadata and StopReplica, and ControlledShutdown and AlterPartition to it.
# (WriteTxnMarkers, a coordinator's request to partition leaders, is in both tables, as
# Kafka 3.9 advertises it: admin tools abort hanging transactions with it.)
# Share groups (docs/share-groups.md): a cluster serves what a single broker does, with the
# share coordinator's RPCs between brokers: Read/WriteShareGroupState from share-partition
# leaders, Initialize/DeleteShareGroupState and ReadShareGroupStateSummary from group
# coordinators (the share-group offsets admin APIs and DeleteGroups).
CLUSTER_API_TABLE: dict[int, ApiSpec] = {
    **API_TABLE,
    **{
        s.api_key: s
        for s in (
            _spec(ApiKey.LEADER_AND_ISR, 0, 7, leader_and_isr),
            _spec(ApiKey.STOP_REPLICA, 0, 4, stop_replica),
            _spec(ApiKey.UPDATE_METADATA, 0, 8, update_metadata),
            _spec(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, controlled_shutdown),
            _spec(ApiKey.ALTER_PARTITION, 0, 3, alter_partition),
            _spec(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, read_share_group_state),
            _spec(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1, write_share_group_state),
            _spec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, initialize_share_group_state),
            _spec(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, delete_share_group_state),
            _spec(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1, read_share_group_state_summary),
        )
    },
}

