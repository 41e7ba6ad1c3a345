"""DescribeCluster (key 60), v0-2: the cluster id, the controller and the brokers.

One broker: it is the controller and the only broker, advertised on the
listener the request came in on. v1's endpoint_type 2 (controllers) ->
UNSUPPORTED_ENDPOINT_TYPE, as a Kafka 3.9 broker answers (KafkaApis). Cluster
authorized operations: those the principal may do (kbroker.server.authorization); with
no authorizer, every one the cluster supports.

v2 (KIP-1073) adds include_fenced_brokers and each broker's is_fenced. A KRaft
controller fences a registered broker that stops heartbeating; kbroker's brokers
register in ZooKeeper, and one that loses its session is no longer registered, so
every broker listed is unfenced (is_fenced false) and there is no fenced broker for
include_fenced_brokers to add: the answer is the same with it set or not.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kbroker.security.acl import CLUSTER_NAME, ResourceType
from kbroker.server import authorization as authz
from kbroker.server.apis.metadata import UNSET_OPERATIONS
from kbroker.server.request_context import RequestContext

BROKER_ENDPOINTS = 1


def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    services = ctx.services
    endpoint_type = request.endpoint_type if ctx.api_version >= 1 else BROKER_ENDPOINTS
    if endpoint_type != BROKER_ENDPOINTS:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="The broker does not support endpoint type "
            f"{endpoint_type}; ask a controller.",
            endpoint_type=endpoint_type,
            cluster_id=services.cluster_id,
            controller_id=-1,
        )
    ops = UNSET_OPERATIONS
    if request.include_cluster_authorized_operations:
        ops = authz.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=services.cluster_id,
        controller_id=services.cluster.controller_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=node.broker_id, host=endpoint[0], port=endpoint[1], rack=node.rack)
            for node in services.cluster.alive_brokers()
            if (endpoint := node.endpoints.get(ctx.listener_name)) is not None
        ],
        cluster_authorized_operations=ops,
    )
