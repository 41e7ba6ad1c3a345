"""FindCoordinator (key 10), v0-6: this broker coordinates every group.

key_type 0 (group): our node, after creating __consumer_offsets if needed (as
Kafka does on first lookup). key_type 1 (transaction): COORDINATOR_NOT_AVAILABLE
until transactions exist. v4+ batches keys in `coordinator_keys` (KIP-699).
"""

from __future__ import annotations

import logging

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1
Coordinator = FindCoordinatorResponse.Coordinator


def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_find(ctx, key, key_type) for key in request.coordinator_keys])
    c = _find(ctx, request.key, key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message,
                                   node_id=c.node_id, host=c.host, port=c.port)


def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type == GROUP:
        coord = coordinator(ctx)
        if coord.loading:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            ctx.broker.offsets_topic.ensure_created()
        except Exception:
            log.exception("creating __consumer_offsets failed")
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif key_type == TRANSACTION:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported yet")
    else:
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
    host, port = ctx.broker.advertised_endpoint(ctx.listener_name)
    return Coordinator(key=key, node_id=ctx.broker.node_id, host=host, port=port,
                       error_code=ErrorCode.NONE, error_message=None)


def _error(key: str, code: int, message: str | None = None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
