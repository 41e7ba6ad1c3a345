"""`kbroker acls`: ACLs of any Kafka-compatible broker, as kafka-acls.sh manages them.

    kbroker acls add    --allow-principal User:alice [--allow-host H] [--deny-principal P]
                        [--operation Read]... (--topic T | --group G | --transactional-id I
                        | --cluster)... [--resource-pattern-type literal|prefixed]
                        [--producer | --consumer]
    kbroker acls list   [--principal P] [resources...] [--resource-pattern-type any|match|...]
    kbroker acls remove [the same selectors as add; --force is accepted, no prompt is asked]

As kafka-acls.sh: principals are Type:name; hosts default to `*`; operations default to
All; `--producer` grants Write, Describe and Create on the topics (and IdempotentWrite on
the cluster), `--consumer` Read and Describe on the topics and Read on the group. `list`
without a resource lists every ACL. `--command-config FILE` reads the client settings
Kafka's tools read (kbroker.tools.common), OAUTHBEARER included. Output is
kafka-acls.sh's.
Exit status: 0 on success, 1 when the broker reports an error, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.tools.common import (
    EXIT_BROKER_ERROR,
    EXIT_USAGE,
    UsageError,
    admin_client,
    connection_options,
    error_text,
    explain_transport_failure,
)

HELP = "add, list and remove ACLs (kafka-acls.sh)"


def configure_parser(acls: argparse.ArgumentParser) -> None:
    common = connection_options()
    for flag, dest in (("--topic", "topics"), ("--group", "groups"),
                       ("--transactional-id", "transactional_ids")):
        common.add_argument(flag, dest=dest, action="append", default=[], metavar="NAME")
    common.add_argument("--cluster", action="store_true", help="the cluster resource")
    common.add_argument("--resource-pattern-type", default=None,
                        choices=("any", "match", "literal", "prefixed"))
    acls.set_defaults(func=run)
    actions = acls.add_subparsers(dest="acls_action", metavar="ACTION", required=True)
    for name, help_text in (("add", "add ACLs"), ("remove", "remove the ACLs that match")):
        p = actions.add_parser(name, parents=[common], help=help_text)
        for flag, dest in (("--allow-principal", "allow_principals"),
                           ("--deny-principal", "deny_principals"),
                           ("--allow-host", "allow_hosts"), ("--deny-host", "deny_hosts"),
                           ("--operation", "operations")):
            p.add_argument(flag, dest=dest, action="append", default=[])
        p.add_argument("--producer", action="store_true")
        p.add_argument("--consumer", action="store_true")
        p.add_argument("--force", action="store_true", help="accepted; nothing is asked")
    p = actions.add_parser("list", parents=[common], help="list ACLs")
    p.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL")


def run(args: argparse.Namespace) -> int:
    try:
        admin = admin_client(args)
        return {"add": _add, "list": _list, "remove": _remove}[args.acls_action](admin, args)
    except UsageError as e:
        print(f"kbroker acls: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:
        print(f"kbroker acls: {error_text(e)}", file=sys.stderr)
        explain_transport_failure("acls", e, args)
        return EXIT_BROKER_ERROR


def _resources(args: argparse.Namespace, default_pattern: str) -> list[tuple[Any, str, Any]]:
    from confluent_kafka.admin import ResourcePatternType, ResourceType

    pattern = ResourcePatternType[(args.resource_pattern_type or default_pattern).upper()]
    out = [(ResourceType.TOPIC, t, pattern) for t in args.topics]
    out += [(ResourceType.GROUP, g, pattern) for g in args.groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_ids]
    if args.cluster:
        out.append((ResourceType.BROKER, "kafka-cluster", pattern))
    return out


def _operation(name: str) -> Any:
    from confluent_kafka.admin import AclOperation

    key = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()
    try:
        return AclOperation[key.replace("-", "_")]
    except KeyError:
        raise UsageError(f"unknown operation {name!r}") from None


def _bindings(args: argparse.Namespace) -> list[Any]:
    """(resource, principal, host, operation, permission) of add/remove, as kafka-acls.sh
    expands them (--producer, --consumer, default host * and operation All)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourceType

    resources = _resources(args, "literal")
    entries = [(p, AclPermissionType.ALLOW, args.allow_hosts or ["*"]) for p in args.allow_principals]
    entries += [(p, AclPermissionType.DENY, args.deny_hosts or ["*"]) for p in args.deny_principals]
    if not resources or not entries:
        raise UsageError("give a resource (--topic, --group, --transactional-id, --cluster) and "
                         "--allow-principal or --deny-principal")
    ops: list[tuple[Any, Any]] = []  # (resource type or None for every one, operation)
    if args.producer:
        ops += [(ResourceType.TOPIC, o) for o in (AclOperation.WRITE, AclOperation.DESCRIBE,
                                                   AclOperation.CREATE)]
        ops += [(ResourceType.TRANSACTIONAL_ID, o) for o in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        ops.append((ResourceType.BROKER, AclOperation.IDEMPOTENT_WRITE))
        if not any(r[0] == ResourceType.BROKER for r in resources):
            resources.append((ResourceType.BROKER, "kafka-cluster", resources[0][2]))
    if args.consumer:
        ops += [(ResourceType.TOPIC, AclOperation.READ), (ResourceType.TOPIC, AclOperation.DESCRIBE),
                (ResourceType.GROUP, AclOperation.READ)]
    if not ops:
        ops = [(None, _operation(o)) for o in (args.operations or ["All"])]
    out = []
    for rtype, name, pattern in resources:
        for principal, permission, hosts in entries:
            for host in hosts:
                for only, op in ops:
                    if only is None or only == rtype:
                        out.append(AclBinding(rtype, name, pattern, principal, host, op, permission))
    return out


def _add(admin: Any, args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    for binding, future in admin.create_acls(bindings).items():
        future.result(timeout=args.timeout)
        print(f"Adding ACLs for resource `{_resource(binding)}`: \n \t{_entry(binding)} ")
    return 0


def _remove(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBindingFilter

    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                b.operation, b.permission_type) for b in _bindings(args)]
    status = 0
    for _flt, future in admin.delete_acls(filters).items():
        try:
            for binding in future.result(timeout=args.timeout):
                print(f"Removed ACL for resource `{_resource(binding)}`: \n \t{_entry(binding)} ")
        except Exception as e:
            print(f"kbroker acls: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
    return status


def _list(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    resources: list[tuple[Any, Any, Any]] = list(_resources(args, "literal")) or [
        (ResourceType.ANY, None, ResourcePatternType[(args.resource_pattern_type or "any").upper()])]
    principals: list[Any] = args.principal or [None]
    any_host: Any = None
    found: dict[str, list[Any]] = {}
    for rtype, name, pattern in resources:
        for principal in principals:
            flt = AclBindingFilter(rtype, name, pattern, principal, any_host, AclOperation.ANY,
                                   AclPermissionType.ANY)
            for b in admin.describe_acls(flt).result(timeout=args.timeout):
                found.setdefault(_resource(b), []).append(b)
    for resource, bindings in found.items():
        print(f"Current ACLs for resource `{resource}`: ")
        for b in bindings:
            print(f" \t{_entry(b)} ")
        print()
    return 0


def _resource(b: Any) -> str:
    rtype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
    return (f"ResourcePattern(resourceType={rtype}, name={b.name}, "
            f"patternType={b.resource_pattern_type.name})")


def _entry(b: Any) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


__all__ = ["EXIT_USAGE", "HELP", "configure_parser", "run"]
