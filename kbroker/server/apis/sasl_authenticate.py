"""SaslAuthenticate (key 36), v0-2. On a SASL listener the connection's SaslAuthenticator
answers it (kbroker.server.authenticator); this handler answers it everywhere else, as
Kafka does: ILLEGAL_SASL_STATE."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kbroker.server.request_context import RequestContext


def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="Unexpected SaslAuthenticate request with listener not configured for SASL")
