"""PushTelemetry (key 72), v0: a client's metrics (KIP-714), OTLP MetricsData compressed
with one of the accepted codecs. Checked as Kafka's ClientMetricsManager
.processPushTelemetryRequest checks it (INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED,
UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE; metrics that
do not decode: INVALID_RECORD, Kafka's answer when its plugin fails), then kept for
/metrics and the console (kbroker.telemetry.client_metrics_manager). A terminating push
is the instance's last."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from kbroker.server.request_context import RequestContext
from kbroker.telemetry.client_metrics_manager import ClientInformation, PushRefused


def handle(ctx: RequestContext, request: PushTelemetryRequest) -> PushTelemetryResponse:
    client = ClientInformation.of(ctx.client_id, ctx.client_software, ctx.peer)
    try:
        ctx.services.client_metrics_manager.push_telemetry(
            request.client_instance_id, client, request.subscription_id, request.terminating,
            request.compression_type, request.metrics or b"")
    except PushRefused as e:
        return PushTelemetryResponse(error_code=e.error_code)
    return PushTelemetryResponse(error_code=ErrorCode.NONE)


def error_response(request: PushTelemetryRequest, version: int, code: int) -> PushTelemetryResponse:
    return PushTelemetryResponse(error_code=code)
