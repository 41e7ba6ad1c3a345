"""Admin requests accepted by any broker of a cluster and answered by the controller
(KIP-590 forwarding, as Kafka's KafkaApis.maybeForwardToController and handleEnvelope).

The forwarding broker. A FORWARDED request (CreateTopics, DeleteTopics, CreatePartitions,
AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders: what only the
controller answers) reaching a cluster broker that is not the controller is not
authorized nor handled there: the dispatcher hands it to `forward`, which wraps the
request frame as the client sent it (header and body) in an EnvelopeRequest with the
client's principal (Kafka's DefaultPrincipalData, version-prefixed) and address (its IP's
bytes), and sends it to the controller (support.forward: the ZkBroker's
ForwardingManager, kbroker.cluster.forwarding_manager). The controller's answer is
decoded and relayed as this broker's response to the client, under the client's
correlation id. The controller moving or not answering within request.timeout.ms: the
API's error response with REQUEST_TIMED_OUT; an envelope the controller refuses:
UNKNOWN_SERVER_ERROR (Kafka's ForwardingManager).

The controller. Envelope (key 58, v0) is taken only on the inter-broker listener (the
connection is closed otherwise, as Kafka's fromPrivilegedListener check) from a
principal with CLUSTER_ACTION on the cluster (REQUEST_CHECKS; else
CLUSTER_AUTHORIZATION_FAILED); a broker that is not the controller answers it
NOT_CONTROLLER, the forwarder then finds the new one. The embedded request is decoded
as a connection decodes one (INVALID_REQUEST when it does not decode or is not
forwardable; PRINCIPAL_DESERIALIZATION_FAILURE for a principal it cannot read),
authorized as the client's principal from the client's host, handled, and its response
(header and body, the client's correlation id) is the envelope's response_data.
Authorization thus happens once, on the controller, as the original principal.

Holds no state. Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.api_key import ApiKey, response_header_version
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages import RESPONSES
from kbroker.protocol.messages.envelope import EnvelopeRequest, EnvelopeResponse
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.security.principal import KafkaPrincipal
from kbroker.server.api_spec import ApiSpec
from kbroker.server.authorization import request_refusal
from kbroker.server.network_receive import FrameError
from kbroker.server.request_context import CLOSE_CONNECTION, RequestContext
from kbroker.server.request_frame import encode_response, parse_frame

log = logging.getLogger(__name__)

FORWARDED = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.ELECT_LEADERS,
})
PRINCIPAL_DATA_VERSION = 0


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    """DefaultPrincipalData v0, prefixed by its version (Kafka's
    DefaultKafkaPrincipalBuilder.serialize)."""
    w = Writer()
    w.int16(PRINCIPAL_DATA_VERSION)
    w.compact_string(principal.principal_type)
    w.compact_string(principal.name)
    w.boolean(False)  # token_authenticated: kbroker has no delegation tokens
    w.empty_tagged_fields()
    return bytes(w.to_bytes())


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """DecodeError (or UnicodeDecodeError) when it is not DefaultPrincipalData v0."""
    r = Reader(data)
    version = r.int16()
    if version != PRINCIPAL_DATA_VERSION:
        raise DecodeError(f"DefaultPrincipalData version {version}")
    principal_type, name = r.compact_string(), r.compact_string()
    r.boolean()
    r.skip_tagged_fields()
    return KafkaPrincipal(principal_type, name)


def _address_bytes(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        return b""


async def forward(ctx: RequestContext, request: Any, spec: ApiSpec, frame: bytes) -> Any:
    """The forwarding broker: the controller's answer to this request (see the module
    docstring)."""
    envelope = EnvelopeRequest(request_data=frame,
                               request_principal=serialize_principal(ctx.principal),
                               client_host_address=_address_bytes(ctx.host))
    try:
        data = await ctx.services.support.forward(envelope)
        reader = Reader(data)
        ResponseHeader.decode(reader, response_header_version(ctx.api_key, ctx.api_version))
        return RESPONSES[ctx.api_key].decode(reader, ctx.api_version)
    except (KafkaError, DecodeError) as e:
        code = e.error_code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        log.info("%s forwarded for %s failed: %s", ApiKey(ctx.api_key).name, ctx.peer, e)
        assert spec.error_response is not None  # every forwarded API has one
        return spec.error_response(request, ctx.api_version, code)


async def handle_envelope(ctx: RequestContext, request: EnvelopeRequest) -> Any:
    """The controller: the embedded request answered (see the module docstring)."""
    services = ctx.services
    if ctx.listener_name != services.support.inter_broker_listener():
        log.warning("Envelope from %s on listener %s: closing", ctx.peer, ctx.listener_name)
        return CLOSE_CONNECTION
    if not services.support.is_controller():
        return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        principal = deserialize_principal(bytes(request.request_principal or b""))
    except (DecodeError, UnicodeDecodeError) as e:
        log.warning("Envelope from %s: principal not read (%s)", ctx.peer, e)
        return EnvelopeResponse(error_code=ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
    try:
        parsed = parse_frame(bytes(request.request_data), services.support.api_table())
    except FrameError as e:
        log.warning("Envelope from %s: %s", ctx.peer, e)
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    if parsed.api_key not in FORWARDED or parsed.request is None or parsed.header is None:
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    try:
        host = str(ipaddress.ip_address(bytes(request.client_host_address)))
    except ValueError:
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    inner = RequestContext(
        services=services, api_key=parsed.api_key, api_version=parsed.version,
        correlation_id=parsed.correlation_id, client_id=parsed.header.client_id,
        listener_name=ctx.listener_name, peer=f"{host}:0", principal=principal)
    spec, inner_request = parsed.spec, parsed.request
    refused = request_refusal(inner, inner_request) if services.authorizer is not None else None
    if refused is not None:
        assert spec.error_response is not None
        response = spec.error_response(inner_request, parsed.version, refused)
    else:
        response = spec.handler(inner, inner_request)
        if hasattr(type(response), "__await__"):
            response = await response
    parts = encode_response(response, parsed.api_key, parsed.version, parsed.correlation_id)
    data = b"".join(bytes(p) for p in parts)[4:]  # without the size prefix
    return EnvelopeResponse(response_data=data)


# The cluster's table adds it (kbroker.broker): Kafka 3.9's ZooKeeper brokers take it too
ENVELOPE_API = ApiSpec(ApiKey.ENVELOPE, 0, 0, handle_envelope)
