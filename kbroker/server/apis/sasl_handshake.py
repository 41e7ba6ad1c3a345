"""SaslHandshake (key 17), v0-1. On a SASL listener the connection's SaslAuthenticator
answers it (kbroker.server.authenticator); this handler answers it everywhere else, as
Kafka does: ILLEGAL_SASL_STATE, no mechanisms."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kbroker.server.request_context import RequestContext


def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
