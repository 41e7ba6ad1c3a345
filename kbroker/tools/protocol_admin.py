"""Admin requests the tools send with kbroker's own client (kbroker.client) instead of
confluent-kafka's AdminClient, which falls short for them:

    metadata(bootstrap, topics, timeout)
        Metadata (v5-12) as the broker answers it: brokers with their racks, the
        controller id, and per partition the leader, replicas, ISR and offline replicas
        (librdkafka drops the offline replicas).
    live_brokers(bootstrap, timeout), live_brokers_on(connection)
        DescribeCluster's brokers: the live ones (a Metadata answer still lists a broker
        for a few seconds after it left; kbroker/cluster/metadata_cache.py says why).
    controller_request(bootstrap, request, timeout)
        a request only the controller answers (AlterPartitionReassignments,
        ListPartitionReassignments: AdminClient has neither), sent to the controller that
        Metadata names; NOT_CONTROLLER (the controller moved) is retried until the timeout.
    member_types(bootstrap, group, timeout)
        which protocol each member of a group speaks, `classic` or `consumer`: KIP-1099's
        member type in ConsumerGroupDescribe v1 from the group's coordinator (AdminClient
        does not give it); every member of a classic group is classic.

Each takes the tool's ConnectionSecurity (`security`, from --command-config:
kbroker.tools.common; None: PLAINTEXT). A broker that cannot be reached, or an
answer with an error, raises KafkaClientError; the tools print it (`error_text`) and
exit 1.
"""

from __future__ import annotations

import time
from typing import Any

from kbroker.client import ConnectionSecurity
from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kbroker.protocol.messages.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kbroker.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse

CLIENT_ID = "kbroker-tools"
METADATA_VERSIONS = (5, 12)  # v5 added offline_replicas, v10 topic ids
RETRY_BACKOFF_S = 0.2
MEMBER_TYPES = {0: "classic", 1: "consumer"}  # ConsumerGroupDescribe v1 member_type


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` -> [(host, port)]."""
    out = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad bootstrap server {server.strip()!r} (want HOST:PORT)")
        out.append((host.strip("[]"), int(port)))
    return out


def connect(bootstrap: str, timeout: float,
            security: ConnectionSecurity | None = None) -> BrokerConnection:
    """A connection to the first bootstrap server that answers."""
    errors = []
    for host, port in bootstrap_addresses(bootstrap):
        try:
            return BrokerConnection(host, port, CLIENT_ID, timeout, security)
        except KafkaClientError as e:
            errors.append(str(e))
    raise KafkaClientError("no broker reachable: " + "; ".join(errors), ErrorCode.NETWORK_EXCEPTION)


def metadata(bootstrap: str, topics: list[str] | None, timeout: float,
             security: ConnectionSecurity | None = None) -> MetadataResponse:
    """Metadata of `topics` (None: every topic; []: none, brokers and controller only)."""
    with connect(bootstrap, timeout, security) as conn:
        version = conn.version_for(ApiKey.METADATA, *METADATA_VERSIONS)
        request = MetadataRequest(
            topics=None if topics is None else
            [MetadataRequest.MetadataRequestTopic(name=name) for name in topics],
            allow_auto_topic_creation=False)
        response: MetadataResponse = conn.request(request, version)
        return response


def live_brokers(bootstrap: str, timeout: float, security: ConnectionSecurity | None = None
                 ) -> list[DescribeClusterResponse.DescribeClusterBroker]:
    with connect(bootstrap, timeout, security) as conn:
        return live_brokers_on(conn)


def live_brokers_on(conn: BrokerConnection) -> list[DescribeClusterResponse.DescribeClusterBroker]:
    """live_brokers over a connection the caller holds."""
    version = conn.version_for(ApiKey.DESCRIBE_CLUSTER, 0, 1)
    response: DescribeClusterResponse = conn.request(
        DescribeClusterRequest(include_cluster_authorized_operations=False), version)
    if response.error_code != ErrorCode.NONE:
        raise KafkaClientError(f"DescribeCluster failed: {ErrorCode(response.error_code).name}",
                               response.error_code)
    return list(response.brokers)


def controller_request(bootstrap: str, request: Any, timeout: float,
                       security: ConnectionSecurity | None = None) -> Any:
    """`request`'s response from the controller (its top-level error_code may be set)."""
    api = ApiKey(request.API_KEY).name
    deadline = time.monotonic() + timeout
    while True:
        md = metadata(bootstrap, [], timeout, security)
        controller = next((b for b in md.brokers if b.node_id == md.controller_id), None)
        if controller is None:
            problem = "no controller is known"
        else:
            with BrokerConnection(controller.host, controller.port, CLIENT_ID, timeout,
                                  security) as conn:
                version = conn.version_for(request.API_KEY, *request.VALID_VERSIONS)
                response = conn.request(request, version)
            if response.error_code != ErrorCode.NOT_CONTROLLER:
                return response
            problem = f"broker {controller.node_id} is no longer the controller"
        if time.monotonic() >= deadline:
            raise KafkaClientError(f"{api}: {problem} (gave up after {timeout:.0f} s)",
                                   ErrorCode.NOT_CONTROLLER)
        time.sleep(RETRY_BACKOFF_S)


def member_types(bootstrap: str, group: str, timeout: float,
                 security: ConnectionSecurity | None = None) -> dict[str, str]:
    """member id -> `classic` or `consumer`; {} when the group is not a consumer group
    (its members, if any, are classic) or the broker has no ConsumerGroupDescribe v1."""
    with connect(bootstrap, timeout, security) as conn:
        version = conn.version_for(ApiKey.FIND_COORDINATOR, 4, 6)
        found: FindCoordinatorResponse = conn.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), version)
        coordinator = found.coordinators[0]
        if coordinator.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"FindCoordinator failed: {ErrorCode(coordinator.error_code).name}",
                                   coordinator.error_code)
    with BrokerConnection(coordinator.host, coordinator.port, CLIENT_ID, timeout,
                          security) as conn:
        try:
            version = conn.version_for(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, 1)
        except KafkaClientError:
            return {}
        response: ConsumerGroupDescribeResponse = conn.request(
            ConsumerGroupDescribeRequest(group_ids=[group]), version)
    described = response.groups[0]
    if described.error_code != ErrorCode.NONE:  # GROUP_ID_NOT_FOUND: a classic group
        return {}
    return {m.member_id: MEMBER_TYPES.get(m.member_type, "unknown") for m in described.members}
