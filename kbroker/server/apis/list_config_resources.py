"""ListConfigResources (key 74; v0 is Kafka 3.9's ListClientMetricsResources): the config
resources there are. v0 lists the client metrics subscriptions (CLIENT_METRICS
resources); v1 (KIP-1142) names resource types, none meaning all that are listed:
TOPIC (2, every topic), BROKER (4, every broker), CLIENT_METRICS (16) and GROUP (32,
every group the coordinator knows); another type -> UNSUPPORTED_VERSION, as Kafka's
KafkaApis.handleListConfigResources. Needs DESCRIBE_CONFIGS on the cluster when ACLs are
on (checked by the connection: CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.list_config_resources import (
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from kbroker.server.config_describe import ResourceType
from kbroker.server.request_context import RequestContext

Resource = ListConfigResourcesResponse.ConfigResource
GROUP = 32
LISTED = (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.CLIENT_METRICS, GROUP)


def handle(ctx: RequestContext, request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    services = ctx.services
    if ctx.api_version == 0:
        types: tuple[int, ...] = (ResourceType.CLIENT_METRICS,)
    else:
        types = tuple(request.resource_types or ()) or LISTED
        if any(t not in LISTED for t in types):
            return error_response(request, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    out = []
    for t in dict.fromkeys(types):
        if t == ResourceType.CLIENT_METRICS:
            names = services.client_metrics_configs.names()
        elif t == ResourceType.TOPIC:
            names = sorted(services.topics.names())
        elif t == ResourceType.BROKER:
            names = [str(b.broker_id) for b in services.cluster.alive_brokers()]
        else:
            names = sorted(services.group_coordinator.groups)
        out += [Resource(resource_name=n, resource_type=int(t)) for n in names]
    return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=out)


def error_response(request: ListConfigResourcesRequest, version: int, code: int
                   ) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(error_code=code, config_resources=[])
