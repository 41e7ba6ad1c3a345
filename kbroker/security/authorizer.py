"""AclAuthorizer: Kafka's ACL decisions over the bindings it holds, and their storage.

`authorize(principal, host, operation, resource_type, name)`, as Kafka's
AclAuthorizer decides: a super user (super.users) may do everything; a resource that
no ACL applies to is allowed only with allow.everyone.if.no.acl.found=true; a
matching DENY (for the operation or ALL) wins; then a matching ALLOW for the
operation, ALL, or an operation that implies it (READ, WRITE, DELETE, ALTER imply
DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).

Storage, single broker: `kbroker-acls.json` in the first log dir, written atomically
before a change is applied (so ACLs survive a restart):

    {"version": 1, "acls": [{"resourceType": "Topic", "name": "orders",
      "patternType": "Literal", "principal": "User:alice", "host": "*",
      "operation": "Read", "permissionType": "Allow"}, ...]}

Cluster mode: ZooKeeper, as Kafka's AclAuthorizer keeps them there (`store`, a
kbroker.cluster.zk_acls.ZkAclStore given to the constructor): add and remove write each pattern's node there
(version-checked) before the memory copy changes; the changes other brokers make
arrive through `set_pattern`.

Loop thread only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kbroker.security.acl import (
    IMPLIED_BY,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    camel,
    from_camel,
)
from kbroker.security.principal import KafkaPrincipal
from kbroker.utils.atomic_file import write_atomically

if TYPE_CHECKING:
    from kbroker.cluster.zk_acls import ZkAclStore

ACLS_FILE = "kbroker-acls.json"


class AclAuthorizer:
    def __init__(self, path: str | None, super_users: str | None,
                 allow_if_no_acl: bool, store: ZkAclStore | None = None) -> None:
        self._path = path
        self.super_users = frozenset(
            s.strip() for s in (super_users or "").split(";") if s.strip())
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: set[AclBinding] = set()
        # the authorize path's indexes: (type, literal name or *) -> entries; type -> its
        # prefixed (prefix, entry) pairs; type -> all its bindings (authorize_any)
        self._literal: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, list[tuple[str, AccessControlEntry]]] = {}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self.store = store  # cluster mode: ZooKeeper's copy
        if path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self._set(decode_bindings(json.load(f).get("acls") or []))

    # -- decisions

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        p = str(principal)
        if p in self.super_users:
            return True
        matching = [*self._literal.get((resource_type, name), ()),
                    *self._literal.get((resource_type, WILDCARD), ()),
                    *(e for prefix, e in self._prefixed.get(resource_type, ())
                      if name.startswith(prefix))]
        if not matching:
            return self.allow_if_no_acl
        mine = [e for e in matching
                if e.principal in (p, "User:*") and e.host in (host, "*")]
        if any(e.permission_type == PermissionType.DENY
               and e.operation in (operation, AclOperation.ALL) for e in mine):
            return False
        allowed = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(e.permission_type == PermissionType.ALLOW
                   and (e.operation == AclOperation.ALL or e.operation in allowed) for e in mine)

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: whether some resource of the type could be
        allowed (an ALLOW not cancelled by a DENY on the same or a wider pattern)."""
        p = str(principal)
        if p in self.super_users:
            return True
        mine = [b for b in self._by_type.get(resource_type, ())
                if b.entry.principal in (p, "User:*") and b.entry.host in (host, "*")]
        allowed = IMPLIED_BY.get(operation, frozenset({operation}))
        denies = [b.pattern for b in mine if b.entry.permission_type == PermissionType.DENY
                  and b.entry.operation in (operation, AclOperation.ALL)]
        if any(d.pattern_type == PatternType.LITERAL and d.name == "*" for d in denies):
            return False
        for b in mine:
            if b.entry.permission_type != PermissionType.ALLOW or not (
                    b.entry.operation == AclOperation.ALL or b.entry.operation in allowed):
                continue
            pat = b.pattern
            if not any(d.matches(resource_type, pat.name) and (
                    pat.pattern_type == PatternType.LITERAL or d.pattern_type == PatternType.PREFIXED)
                    for d in denies):
                return True
        return False

    # -- bindings

    def acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return sorted(b for b in self._bindings if flt is None or flt.matches(b))

    async def add(self, bindings: Iterable[AclBinding]) -> dict[ResourcePattern, Exception]:
        """Add the bindings; the patterns whose write to ZooKeeper failed (cluster mode),
        with why (their bindings are not added)."""
        bindings = list(bindings)
        if self.store is None:
            new = self._bindings | set(bindings)
            self._save(new)
            self._set(new)
            return {}
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        failed: dict[ResourcePattern, Exception] = {}
        for pattern, entries in by_pattern.items():
            added = frozenset(entries)

            def grow(cur: frozenset[AccessControlEntry], added: frozenset[AccessControlEntry] = added
                     ) -> frozenset[AccessControlEntry]:
                return cur | added
            try:
                _before, after = await self.store.update(pattern, grow)
            except Exception as e:  # ZooKeeper unreachable, or lost every retry
                failed[pattern] = e
                continue
            self.set_pattern(pattern, after)
        return failed

    async def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it removed. Cluster mode: a pattern whose write to
        ZooKeeper fails raises (what was removed before it stays removed)."""
        if self.store is None:
            removed = [[b for b in self._bindings if f.matches(b)] for f in filters]
            new = self._bindings - {b for found in removed for b in found}
            self._save(new)
            self._set(new)
            return removed
        # AclAuthorizer.deleteAcls: the patterns the filters match in the cache, each
        # rewritten without the entries they match as ZooKeeper has them now
        patterns = sorted({b.pattern for b in self._bindings if any(f.matches(b) for f in filters)})
        gone: set[AclBinding] = set()
        for pattern in patterns:
            def keep(cur: frozenset[AccessControlEntry], p: ResourcePattern = pattern
                     ) -> frozenset[AccessControlEntry]:
                return frozenset(e for e in cur
                                 if not any(f.matches(AclBinding(p, e)) for f in filters))
            before, after = await self.store.update(pattern, keep)
            gone |= {AclBinding(pattern, e) for e in before - after}
            self.set_pattern(pattern, after)
        return [[b for b in sorted(gone) if f.matches(b)] for f in filters]

    def set_pattern(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """The entries a pattern has now (from ZooKeeper: a change notification)."""
        new = {b for b in self._bindings if b.pattern != pattern}
        new |= {AclBinding(pattern, e) for e in entries}
        if new != self._bindings:
            self._set(new)

    def load(self, patterns: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Every binding, as loaded from ZooKeeper at startup."""
        self._set(AclBinding(p, e) for p, entries in patterns.items() for e in entries)

    def _set(self, bindings: Iterable[AclBinding]) -> None:
        self._bindings = set(bindings)
        by_type: dict[ResourceType, list[AclBinding]] = {}
        literal: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        prefixed: dict[ResourceType, list[tuple[str, AccessControlEntry]]] = {}
        for b in self._bindings:
            rtype = b.pattern.resource_type
            by_type.setdefault(rtype, []).append(b)
            if b.pattern.pattern_type == PatternType.LITERAL:
                literal.setdefault((rtype, b.pattern.name), []).append(b.entry)
            else:
                prefixed.setdefault(rtype, []).append((b.pattern.name, b.entry))
        self._by_type, self._literal, self._prefixed = by_type, literal, prefixed

    def _save(self, bindings: set[AclBinding]) -> None:
        if self._path is not None:
            write_atomically(self._path, json.dumps(
                {"version": 1, "acls": encode_bindings(sorted(bindings))}, indent=1))


def encode_bindings(bindings: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [{"resourceType": camel(b.pattern.resource_type.name), "name": b.pattern.name,
             "patternType": camel(b.pattern.pattern_type.name), "principal": b.entry.principal,
             "host": b.entry.host, "operation": camel(b.entry.operation.name),
             "permissionType": camel(b.entry.permission_type.name)} for b in bindings]


def decode_bindings(items: Iterable[dict[str, str]]) -> list[AclBinding]:
    return [AclBinding(
        ResourcePattern(ResourceType(from_camel(ResourceType, d["resourceType"])), d["name"],
                        PatternType(from_camel(PatternType, d["patternType"]))),
        AccessControlEntry(d["principal"], d["host"],
                           AclOperation(from_camel(AclOperation, d["operation"])),
                           PermissionType(from_camel(PermissionType, d["permissionType"]))))
        for d in items]
