"""DescribeClientQuotas (key 48), v0-1: the quotas whose entity matches the filter.

A component names an entity type (user, client-id) and a match: EXACT (0, the name;
null: the type's default), DEFAULT (1) or ANY (2, any name or the default). With
`strict` an entity must have no other types than the components'. An entry lists its
parts client-id before user and its values consumer_byte_rate, request_percentage,
producer_byte_rate, in Kafka's order (kbroker.security.quotas.in_kafka_order). Needs
DESCRIBE_CONFIGS on the cluster when ACLs are on (checked by the connection)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kbroker.security.quotas import (
    CLIENT_ID,
    DEFAULT,
    ENTITY_TYPE_ORDER,
    QUOTA_KEY_ORDER,
    USER,
    in_kafka_order,
)
from kbroker.server.request_context import RequestContext

R = DescribeClientQuotasResponse
EXACT, MATCH_DEFAULT, ANY = 0, 1, 2


def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in request.components:
        if c.entity_type not in (USER, CLIENT_ID) or c.entity_type in wanted or \
                c.match_type not in (EXACT, MATCH_DEFAULT, ANY):
            return error_response(request, ctx.api_version, ErrorCode.INVALID_REQUEST,
                                  f"Invalid quota filter component {c.entity_type!r}")
        wanted[c.entity_type] = (c.match_type, c.match)
    entries = []
    for entry in ctx.services.client_quotas.entries():
        parts = {USER: entry.entity[0], CLIENT_ID: entry.entity[1]}
        present = {t for t, v in parts.items() if v is not None}
        if request.strict and present != set(wanted):
            continue
        if not all(_matches(parts[t], m, name) for t, (m, name) in wanted.items()):
            continue
        entries.append(R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=None if parts[t] == DEFAULT else parts[t])
                    for t in in_kafka_order(present, ENTITY_TYPE_ORDER)],
            values=[R.ValueData(key=k, value=entry.values[k])
                    for k in in_kafka_order(entry.values, QUOTA_KEY_ORDER)]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


def _matches(value: str | None, match_type: int, name: str | None) -> bool:
    if value is None:
        return False
    if match_type == ANY:
        return True
    if match_type == MATCH_DEFAULT or name is None:
        return value == DEFAULT
    return value == name


def error_response(request: DescribeClientQuotasRequest, version: int, code: int,
                   message: str | None = None) -> DescribeClientQuotasResponse:
    return R(throttle_time_ms=0, error_code=code, error_message=message, entries=[])
