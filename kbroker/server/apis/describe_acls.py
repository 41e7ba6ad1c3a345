"""DescribeAcls (key 29), v0-3: the ACL bindings a filter matches, grouped by resource
pattern. Needs DESCRIBE on the cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kbroker.security.acl import ResourcePattern
from kbroker.server.apis.acl_support import InvalidAcl, binding_filter, refusal
from kbroker.server.request_context import RequestContext

R = DescribeAclsResponse


def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    refused = refusal(ctx, "DESCRIBE")
    if refused is not None:
        return error_response(request, ctx.api_version, *refused)
    az = ctx.services.authorizer
    assert az is not None
    try:
        flt = binding_filter(request)
    except InvalidAcl as e:
        return error_response(request, ctx.api_version, ErrorCode.INVALID_REQUEST, str(e))
    grouped: dict[ResourcePattern, list[R.AclDescription]] = {}
    for b in az.acls(flt):
        grouped.setdefault(b.pattern, []).append(R.AclDescription(
            principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission_type))
    resources = [R.DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name,
                                        pattern_type=p.pattern_type, acls=acls)
                 for p, acls in grouped.items()]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=resources)


def error_response(request: DescribeAclsRequest, version: int, code: int,
                   message: str | None = None) -> DescribeAclsResponse:
    return R(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
