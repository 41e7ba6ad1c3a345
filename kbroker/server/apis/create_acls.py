"""CreateAcls (key 30), v0-3: add ACL bindings (v0: LITERAL patterns). Needs ALTER on the
cluster; without an authorizer every creation is SECURITY_DISABLED. An invalid binding
is INVALID_REQUEST with the reason; the valid ones of the request are added. Cluster
mode: they are written to ZooKeeper first (kbroker.cluster.zk_acls), from where every
broker takes them; a name ZooKeeper cannot hold as a znode (a '/') is INVALID_REQUEST,
and a pattern whose write fails is UNKNOWN_SERVER_ERROR with the reason."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kbroker.security.acl import AclBinding
from kbroker.server.apis.acl_support import InvalidAcl, binding, refusal
from kbroker.server.request_context import RequestContext

Result = CreateAclsResponse.AclCreationResult


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    refused = refusal(ctx, "ALTER")
    if refused is not None:
        return error_response(request, ctx.api_version, *refused)
    az = ctx.services.authorizer
    assert az is not None
    outcome: list[AclBinding | InvalidAcl] = []
    for c in request.creations:
        try:
            b = binding(c)
            if az.store is not None:  # cluster mode (kazoo is imported then only)
                from kbroker.cluster.zk_acls import storable

                if (why := storable(b.pattern.name)) is not None:
                    raise InvalidAcl(why)
            outcome.append(b)
        except InvalidAcl as e:
            outcome.append(e)
    valid = [b for b in outcome if isinstance(b, AclBinding)]
    failed = await az.add(valid) if valid else {}
    results = []
    for item in outcome:
        if isinstance(item, InvalidAcl):
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=str(item)))
        elif (failure := failed.get(item.pattern)) is not None:
            results.append(Result(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                  error_message=f"{type(failure).__name__}: {failure}"))
        else:
            results.append(Result(error_code=ErrorCode.NONE, error_message=None))
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def error_response(request: CreateAclsRequest, version: int, code: int,
                   message: str | None = None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=message) for _ in request.creations])
