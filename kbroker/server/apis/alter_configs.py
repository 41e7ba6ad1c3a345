"""AlterConfigs (key 33), v0-2: replace a topic's whole set of config overrides.

The legacy API: the request's configs become the topic's overrides and every
key not listed returns to its default (Kafka's semantics; clients that want to
change one key read all with DescribeConfigs first, or use
IncrementalAlterConfigs). A null value -> INVALID_REQUEST. Applied live and
persisted; see kbroker.server.config_alter for the checks.
"""

from __future__ import annotations

from typing import Any

from kbroker.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kbroker.server.config_alter import Inherited, alter_resources, failed, reject_nulls, responses
from kbroker.server.request_context import RequestContext

Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    outcomes = await alter_resources(ctx, request.resources, _replace, request.validate_only,
                               incremental=False)
    return AlterConfigsResponse(responses=responses(outcomes, Result))


def _replace(res: Any, current: dict[str, str], inherited: Inherited) -> dict[str, str]:
    reject_nulls([(c.name, c.value) for c in res.configs])
    return {c.name: c.value for c in res.configs}


def error_response(request: AlterConfigsRequest, version: int, code: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=responses(failed(request.resources, code), Result))
