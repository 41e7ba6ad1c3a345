"""GetTelemetrySubscriptions (key 71), v0: which metrics a client pushes, how often
(KIP-714). Kafka's ClientMetricsManager.processGetTelemetrySubscriptionRequest: a zero
client_instance_id gets a new one; the answer is the union of the matching
subscriptions (none: no metrics, the client pushes nothing), their smallest interval,
the subscription id, the compression types accepted (zstd, lz4, gzip, snappy),
telemetry.max.bytes, and cumulative temporality (kbroker.telemetry.client_metrics_manager
says why). Asked again before the interval is up -> THROTTLING_QUOTA_EXCEEDED. Any client
may ask (Kafka authorizes neither telemetry API)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from kbroker.server.request_context import RequestContext
from kbroker.telemetry.client_metrics_manager import ClientInformation, PushRefused
from kbroker.telemetry.otlp import ACCEPTED_COMPRESSION_TYPES


def handle(ctx: RequestContext, request: GetTelemetrySubscriptionsRequest
           ) -> GetTelemetrySubscriptionsResponse:
    manager = ctx.services.client_metrics_manager
    client = ClientInformation.of(ctx.client_id, ctx.client_software, ctx.peer)
    try:
        instance = manager.get_telemetry_subscriptions(request.client_instance_id, client)
    except PushRefused as e:
        return error_response(request, ctx.api_version, e.error_code)
    return GetTelemetrySubscriptionsResponse(
        error_code=ErrorCode.NONE,
        client_instance_id=instance.client_instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=[int(c) for c in ACCEPTED_COMPRESSION_TYPES],
        push_interval_ms=instance.push_interval_ms,
        telemetry_max_bytes=manager.telemetry_max_bytes,
        delta_temporality=False,
        requested_metrics=list(instance.metrics),
    )


def error_response(request: GetTelemetrySubscriptionsRequest, version: int, code: int
                   ) -> GetTelemetrySubscriptionsResponse:
    return GetTelemetrySubscriptionsResponse(error_code=code, accepted_compression_types=[],
                                             requested_metrics=[])
