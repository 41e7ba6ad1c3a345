"""CreateAcls (key 30), v0-3: add ACL bindings (v0: LITERAL patterns). Needs ALTER on the
cluster; without an authorizer every creation is SECURITY_DISABLED. An invalid binding
is INVALID_REQUEST with the reason; the valid ones of the request are added."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kbroker.server.apis.acl_support import InvalidAcl, binding, refusal
from kbroker.server.request_context import RequestContext

Result = CreateAclsResponse.AclCreationResult


def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    refused = refusal(ctx, "ALTER")
    if refused is not None:
        return error_response(request, ctx.api_version, *refused)
    az = ctx.broker.authorizer
    assert az is not None
    results, valid = [], []
    for c in request.creations:
        try:
            valid.append(binding(c))
            results.append(Result(error_code=ErrorCode.NONE, error_message=None))
        except InvalidAcl as e:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=str(e)))
    if valid:
        az.add(valid)
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def error_response(request: CreateAclsRequest, version: int, code: int,
                   message: str | None = None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=message) for _ in request.creations])
