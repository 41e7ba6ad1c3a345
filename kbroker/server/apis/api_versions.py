"""ApiVersions (key 18): the versions of every API in the API table.

v3+ requests carry the client's software name and version (the connection keeps
them as its client information, for the request log); Kafka checks them
against `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` and answers INVALID_REQUEST
otherwise (librdkafka then retries with v0). A version above our maximum is
answered by the connection, before the body is parsed, with
`unsupported_version_response`: error 35 and only ApiVersions' own range, in
the v0 layout, so the client can retry at our maximum (KIP-511).
The response header is always v0 (no tagged fields), even for v3+.

v5 (KIP-1242, Kafka 4.4) carries the cluster id and node id the client means to reach,
both or neither (one without the other: INVALID_REQUEST, as ApiVersionsRequest.isValid);
when they name another cluster or another broker the client's metadata is stale and the
answer is REBOOTSTRAP_REQUIRED, without API keys, so the client bootstraps again rather
than talk to a broker it did not mean (a restarted broker behind a reused address).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kbroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from kbroker.server.api_spec import ApiSpec

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and client_software(request, ctx.api_version) is None:
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    if ctx.api_version >= 5:
        intended = (request.cluster_id, request.node_id)
        if (intended[0] is None) != (intended[1] == -1):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
        services = ctx.services
        if intended[0] is not None and intended != (services.cluster_id, services.node_id):
            return ApiVersionsResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED, api_keys=[])
    keys = [
        ApiVersionsResponse.ApiVersion(
            api_key=spec.api_key, min_version=spec.min_version, max_version=spec.max_version
        )
        for _key, spec in sorted(ctx.services.support.api_table().items())
    ]
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys)


def client_software(request: ApiVersionsRequest, version: int) -> str | None:
    """The client's software as NAME/VERSION (v3+), when both are valid: the connection's
    client information, as Kafka registers it."""
    name, software_version = request.client_software_name, request.client_software_version
    if version >= 3 and _SOFTWARE.match(name) and _SOFTWARE.match(software_version):
        return f"{name}/{software_version}"
    return None


def unsupported_version_response(spec: ApiSpec) -> ApiVersionsResponse:
    """The v0-format answer to an ApiVersions request of a version we do not know."""
    own = ApiVersionsResponse.ApiVersion(
        api_key=spec.api_key, min_version=spec.min_version, max_version=spec.max_version
    )
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[own])
