"""AlterClientQuotas (key 49), v0-1: set or remove quotas of user / client-id entities.

Keys: producer_byte_rate, consumer_byte_rate, request_percentage (kbroker.security.
quotas); values above 0. An entity of another type (ip: connection_creation_rate), an
unknown key, a type named twice or a value out of range is INVALID_REQUEST for that
entry, and nothing of it is applied. An entry's entity is answered client-id before user,
Kafka's order (kbroker.security.quotas.kafka_rank), whatever the request's. Cluster mode
keeps them in ZooKeeper as Kafka's ZooKeeper mode does (/config/users, /config/clients;
kbroker.security.quotas): written there first, then applied here, and on every other
broker from its change notification; an entry whose write fails is UNKNOWN_SERVER_ERROR with the reason.
Needs ALTER_CONFIGS on the cluster when ACLs are on (checked by the connection)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from kbroker.security.quotas import (
    CLIENT_ID,
    DEFAULT,
    ENTITY_TYPE_ORDER,
    QUOTA_KEYS,
    USER,
    Entity,
    kafka_rank,
)
from kbroker.server.request_context import RequestContext

R = AlterClientQuotasResponse


class _Invalid(ValueError):
    pass


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    quotas = ctx.services.client_quotas
    outcome: list[tuple[int, str | None]] = []
    changes = []
    for entry in request.entries:
        try:
            changes.append((len(outcome), (_entity(entry.entity), _ops(entry.ops))))
            outcome.append((ErrorCode.NONE, None))
        except _Invalid as e:
            outcome.append((ErrorCode.INVALID_REQUEST, str(e)))
    if changes and not request.validate_only:
        if quotas.persist is None:
            quotas.alter(change for _i, change in changes)
        else:
            for i, change in changes:
                try:
                    await quotas.apply([change])
                except Exception as e:  # ZooKeeper unreachable, or the node kept changing
                    outcome[i] = (ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")
    return R(throttle_time_ms=0, entries=[
        R.EntryData(error_code=code, error_message=message, entity=_answered_entity(entry.entity))
        for entry, (code, message) in zip(request.entries, outcome, strict=True)])


def _answered_entity(parts: list[AlterClientQuotasRequest.EntityData]) -> list[R.EntityData]:
    """The entity as the answer lists it: in Kafka's order (client-id before user), whatever
    the request's."""
    return [R.EntityData(entity_type=p.entity_type, entity_name=p.entity_name)
            for p in sorted(parts, key=lambda p: kafka_rank(p.entity_type, ENTITY_TYPE_ORDER))]


def _entity(parts: list[AlterClientQuotasRequest.EntityData]) -> Entity:
    names: dict[str, str] = {}
    for p in parts:
        if p.entity_type not in (USER, CLIENT_ID):
            raise _Invalid(f"Unsupported quota entity type {p.entity_type!r} (kbroker has user "
                           "and client-id quotas)")
        if p.entity_type in names:
            raise _Invalid(f"Duplicate entity type {p.entity_type}")
        names[p.entity_type] = DEFAULT if p.entity_name is None else p.entity_name
    if not names:
        raise _Invalid("Invalid empty client quota entity")
    return names.get(USER), names.get(CLIENT_ID)


def _ops(ops: list[AlterClientQuotasRequest.OpData]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for op in ops:
        if op.key not in QUOTA_KEYS:
            raise _Invalid(f"Invalid configuration key {op.key}")
        if op.key in out:
            raise _Invalid(f"Duplicate quota key {op.key}")
        if not op.remove and not op.value > 0:
            raise _Invalid(f"Invalid value {op.value} for {op.key}: must be above 0")
        out[op.key] = None if op.remove else float(op.value)
    return out


def error_response(request: AlterClientQuotasRequest, version: int, code: int) -> AlterClientQuotasResponse:
    return R(throttle_time_ms=0, entries=[
        R.EntryData(error_code=code, error_message=None, entity=_answered_entity(entry.entity))
        for entry in request.entries])
