"""What CreateAcls, DescribeAcls and DeleteAcls share: wire values to ACL objects,
checked as Kafka's AclControlManager/AclAuthorizer check them (an invalid binding or
filter is INVALID_REQUEST with the reason)."""

from __future__ import annotations

from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kbroker.security.principal import KafkaPrincipal
from kbroker.server.authorization import authorize_cluster
from kbroker.server.request_context import RequestContext


class InvalidAcl(ValueError):
    pass


def refusal(ctx: RequestContext, operation: str) -> tuple[int, str | None] | None:
    """Why an ACL API is refused before its body is looked at: no authorizer
    (SECURITY_DISABLED), or no `operation` on the cluster; None when it may go on."""
    if ctx.services.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker"
    if not authorize_cluster(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


def _enum(enum: Any, value: int, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise InvalidAcl(f"Unknown {what} {value}") from None


def binding(c: Any) -> AclBinding:
    rtype = _enum(ResourceType, c.resource_type, "resource type")
    ptype = _enum(PatternType, c.resource_pattern_type, "pattern type")
    op = _enum(AclOperation, c.operation, "operation")
    perm = _enum(PermissionType, c.permission_type, "permission type")
    if rtype in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAcl("Invalid resource type")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl("Invalid pattern type")
    if op in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAcl("Invalid operation")
    if perm not in (PermissionType.ALLOW, PermissionType.DENY):
        raise InvalidAcl("Invalid permission type")
    if not c.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    if rtype == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        KafkaPrincipal.parse(c.principal)
    except ValueError:
        raise InvalidAcl(f"Could not parse principal from `{c.principal}` (no colon is present "
                         "separating the principal type from the principal name)") from None
    if not c.host:
        raise InvalidAcl("Invalid host")
    return AclBinding(ResourcePattern(rtype, c.resource_name, ptype),
                      AccessControlEntry(c.principal, c.host, op, perm))


def binding_filter(f: Any) -> AclBindingFilter:
    rtype = _enum(ResourceType, f.resource_type_filter, "resource type")
    ptype = _enum(PatternType, f.pattern_type_filter, "pattern type")
    op = _enum(AclOperation, f.operation, "operation")
    perm = _enum(PermissionType, f.permission_type, "permission type")
    if ResourceType.UNKNOWN in (rtype,) or ptype == PatternType.UNKNOWN or \
            op == AclOperation.UNKNOWN or perm == PermissionType.UNKNOWN:
        raise InvalidAcl("The filter contains UNKNOWN elements")
    return AclBindingFilter(rtype, f.resource_name_filter, ptype, f.principal_filter,
                            f.host_filter, op, perm)
