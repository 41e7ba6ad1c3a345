"""DeleteAcls (key 31), v0-3: remove the ACL bindings each filter matches, answering per
filter with the bindings it removed. Needs ALTER on the cluster; SECURITY_DISABLED
without an authorizer; an invalid filter is INVALID_REQUEST and removes nothing. Cluster
mode: the removals are written to ZooKeeper first; when that fails every filter's
answer is UNKNOWN_SERVER_ERROR with the reason."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kbroker.security.acl import AclBindingFilter
from kbroker.server.apis.acl_support import InvalidAcl, binding_filter, refusal
from kbroker.server.request_context import RequestContext

R = DeleteAclsResponse


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    refused = refusal(ctx, "ALTER")
    if refused is not None:
        return error_response(request, ctx.api_version, *refused)
    az = ctx.services.authorizer
    assert az is not None
    filters: list[AclBindingFilter | InvalidAcl] = []
    for wire_filter in request.filters:
        try:
            filters.append(binding_filter(wire_filter))
        except InvalidAcl as e:
            filters.append(e)
    valid = [f for f in filters if isinstance(f, AclBindingFilter)]
    try:
        removed = iter(await az.remove(valid))
    except Exception as e:  # cluster mode: ZooKeeper unreachable, or lost every retry
        return error_response(request, ctx.api_version, ErrorCode.UNKNOWN_SERVER_ERROR,
                              f"{type(e).__name__}: {e}")
    results = []
    for f in filters:
        if isinstance(f, InvalidAcl):
            results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                                    error_message=str(f), matching_acls=[]))
            continue
        results.append(R.DeleteAclsFilterResult(
            error_code=ErrorCode.NONE, error_message=None, matching_acls=[
                R.DeleteAclsMatchingAcl(
                    error_code=ErrorCode.NONE, error_message=None,
                    resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                    pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                    host=b.entry.host, operation=b.entry.operation,
                    permission_type=b.entry.permission_type)
                for b in next(removed)]))
    return R(throttle_time_ms=0, filter_results=results)


def error_response(request: DeleteAclsRequest, version: int, code: int,
                   message: str | None = None) -> DeleteAclsResponse:
    return R(throttle_time_ms=0, filter_results=[
        R.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters])
