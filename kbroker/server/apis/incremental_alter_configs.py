"""IncrementalAlterConfigs (key 44), v0-1: change some of a topic's config overrides.

Operations (Kafka's AlterConfigOp.OpType): SET (0) sets an override; DELETE (1)
removes it (the key returns to its default); APPEND (2) and SUBTRACT (3) add
items to or remove items from a LIST config (cleanup.policy, the throttled
replica lists; in a cluster log.cleanup.policy of a BROKER resource), starting
from its current value (the override, else the value it inherits). As Kafka's
ConfigAdminManager.prepareIncrementalConfigs: an item already present is not
appended twice, subtracting an absent item changes nothing, subtracting every
item leaves the empty list (valid: `cleanup.policy=""`), and appending to the
empty list gives just the new items. APPEND or SUBTRACT on a non-list key ->
INVALID_CONFIG; a key named twice in one resource, an unknown operation, or a
null value for anything but DELETE -> INVALID_REQUEST (Kafka 3.9's
ConfigAdminManager). The result is applied live (retention.ms, retention.bytes,
segment.bytes, max.message.bytes, ... take effect on the next append, roll or
retention pass) and persisted; see kbroker.server.config_alter.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kbroker.common.config_def import Type, parse_value
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kbroker.server.config_alter import Inherited, alter_resources, failed, reject_nulls, responses
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    outcomes = await alter_resources(ctx, request.resources, _apply_ops, request.validate_only,
                               incremental=True)
    return IncrementalAlterConfigsResponse(responses=responses(outcomes, Result))


def _apply_ops(res: Any, current: dict[str, str], inherited: Inherited) -> dict[str, str]:
    ops = res.configs
    dupes = sorted(n for n, c in Counter(op.name for op in ops).items() if c > 1)
    if dupes:
        raise AdminError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {dupes}")
    if any(op.config_operation not in (SET, DELETE, APPEND, SUBTRACT) for op in ops):
        raise AdminError(ErrorCode.INVALID_REQUEST, "Unknown config operation.")
    reject_nulls([(op.name, op.value) for op in ops if op.config_operation != DELETE])
    overrides = dict(current)
    for op in ops:
        if op.config_operation == SET:
            overrides[op.name] = op.value
        elif op.config_operation == DELETE:
            overrides.pop(op.name, None)
        else:
            overrides[op.name] = _list_op(op, overrides, inherited)
    return overrides


def _list_op(op: Any, overrides: dict[str, str], inherited: Inherited) -> str:
    key = inherited.keys.get(op.name)
    if key is None:
        raise AdminError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
    verb = "append" if op.config_operation == APPEND else "subtract"
    if key.type != Type.LIST:
        raise AdminError(
            ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {op.name}"
        )
    current = overrides[op.name] if op.name in overrides else inherited.value(op.name)
    items = list(parse_value(op.name, Type.LIST, current or ""))
    given = parse_value(op.name, Type.LIST, op.value)
    if op.config_operation == APPEND:
        items += [g for g in dict.fromkeys(given) if g not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


def error_response(
    request: IncrementalAlterConfigsRequest, version: int, code: int
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=responses(failed(request.resources, code), Result))
