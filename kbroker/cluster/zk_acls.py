"""ACLs in ZooKeeper (cluster mode), as Kafka's AclAuthorizer keeps them in ZooKeeper mode.

Layout (Apache Kafka's kafka.zk.ZkData: ZkAclStore, LiteralAclStore, ExtendedAclStore,
ResourceZNode, ZkAclChangeStore, LiteralAclChangeStore, ExtendedAclChangeStore;
AclEntry.toJsonCompatibleMap for the node data):

    /kafka-acl/<ResourceType>/<name>                     LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>           a LITERAL pattern changed: "TOPIC:orders"
                                                   (ResourceType.toString, ':', the name)
    /kafka-acl-extended-changes/acl_changes_<seq>  a PREFIXED one changed: {"version":1,
                                                   "resourceType":"TOPIC","name":"ord",
                                                   "patternType":"PREFIXED"}

<ResourceType> is Kafka's SecurityUtils.resourceTypeName ("Topic", "Group", "Cluster",
"TransactionalId"); operations and permission types are written as SecurityUtils names
them ("Read", "ClusterAction", "Allow").

A change (AclAuthorizer.updateResourceAcls) reads the pattern's node and its version,
computes the new entries and writes them conditionally on that version (a create when
there was no node, a delete when no entry is left); a write that loses a race (bad
version, node exists, no node) reads again and retries after 100-150 ms, at most 10
times. Only a write that changed something is followed by a change notification.

Every broker loads all ACLs at startup, then follows both change paths (Kafka's
ZkNodeChangeNotificationListener): for each new notification it reads the named
pattern's node again and hands the entries to the authorizer (one that cannot be read
for a ZooKeeper error is read again a second later, so a change reaches every broker
while ZooKeeper answers); notifications older than 15 minutes are deleted by whoever
reads them (changeExpirationMs).

Lock: the broker's event-loop thread (coroutines over the ZooKeeper client).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kbroker.cluster.zk_client import ZooKeeperClient
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    camel,
    from_camel,
)

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
MAX_UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries
RETRY_BACKOFF_S, RETRY_JITTER_S = 0.1, 0.05  # AclAuthorizer's retryBackoffMs, retryBackoffJitterMs
CHANGE_EXPIRATION_S = 15 * 60  # ZkNodeChangeNotificationListener.changeExpirationMs
RETRY_AFTER_FAILURE_S = 1.0  # a notification that could not be read is read again after this

Entries = frozenset[AccessControlEntry]
_RACES = (BadVersionError, NodeExistsError, NoNodeError)


def store_path(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{store_path(pattern.pattern_type)}/{camel(pattern.resource_type.name)}/{pattern.name}"


def storable(name: str) -> str | None:
    """Why ZooKeeper cannot hold a pattern with this name as a znode (None: it can)."""
    if "/" in name or name in (".", "..") or "\x00" in name:
        return (f"Resource name {name!r} cannot be stored in ZooKeeper (a '/', '.', '..' or "
                "NUL makes another path)")
    return None


def encode_acls(entries: Entries) -> bytes:
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": camel(e.permission_type.name),
         "operation": camel(e.operation.name), "host": e.host} for e in sorted(entries)]},
        separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> Entries:
    if not data:
        return frozenset()
    raw = json.loads(data)
    out = set()
    for a in (raw.get("acls") or []) if isinstance(raw, dict) else []:
        out.add(AccessControlEntry(
            str(a["principal"]), str(a["host"]),
            AclOperation(from_camel(AclOperation, str(a["operation"]))),
            PermissionType(from_camel(PermissionType, str(a["permissionType"])))))
    return frozenset(out)


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES_PATH


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(path: str, data: bytes) -> ResourcePattern:
    """ValueError (KeyError, json's) when the notification cannot be read."""
    if path == LITERAL_CHANGES_PATH:
        rtype, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {data[:100]!r}")
        return ResourcePattern(ResourceType(from_camel(ResourceType, rtype)), name,
                               PatternType.LITERAL)
    raw = json.loads(data)
    if int(raw.get("version", 1)) > 1:
        raise ValueError(f"ACL change event of unsupported version {raw.get('version')}")
    return ResourcePattern(ResourceType(from_camel(ResourceType, str(raw["resourceType"]))),
                           str(raw["name"]), PatternType(from_camel(PatternType, str(raw["patternType"]))))


class ZkAclStore:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk
        self._last_seq: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_change: Callable[[ResourcePattern, Entries], None] | None = None
        self._closed = False

    # -- reading

    async def read(self, pattern: ResourcePattern) -> tuple[Entries, int]:
        """The pattern's entries and its node's version (-1: no node)."""
        found = await self.zk.get(resource_path(pattern))
        if found is None:
            return frozenset(), -1
        return decode_acls(found[0]), found[1].version

    async def load_all(self) -> dict[ResourcePattern, Entries]:
        """AclAuthorizer.loadCache: every pattern of every store."""
        out: dict[ResourcePattern, Entries] = {}
        for ptype in (PatternType.LITERAL, PatternType.PREFIXED):
            root = store_path(ptype)
            for type_name in await self.zk.get_children(root):
                try:
                    rtype = ResourceType(from_camel(ResourceType, type_name))
                except ValueError:
                    log.warning("ignoring %s/%s: not a resource type", root, type_name)
                    continue
                for name in await self.zk.get_children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(rtype, name, ptype)
                    try:
                        entries, _v = await self.read(pattern)
                    except (ValueError, KeyError) as e:
                        log.warning("ignoring the ACLs of %s: %s", resource_path(pattern), e)
                        continue
                    if entries:
                        out[pattern] = entries
        return out

    # -- writing

    async def update(self, pattern: ResourcePattern,
                     change: Callable[[Entries], Entries]) -> tuple[Entries, Entries]:
        """AclAuthorizer.updateResourceAcls: (entries before, entries after)."""
        path = resource_path(pattern)
        current, version = await self.read(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            new = frozenset(change(current))
            if new == current:
                return current, current
            try:
                if not new:
                    await self.zk.delete(path, version)
                elif version < 0:
                    await self.zk.create(path, encode_acls(new), makepath=True)
                else:
                    await self.zk.set(path, encode_acls(new), version)
            except _RACES as e:
                log.debug("ACLs of %s changed under us (%s, attempt %d); reading again", path,
                          type(e).__name__, attempt + 1)
                await asyncio.sleep(RETRY_BACKOFF_S + random.uniform(0, RETRY_JITTER_S))
                current, version = await self.read(pattern)
                continue
            await self.zk.create(f"{changes_path(pattern.pattern_type)}/{CHANGE_PREFIX}",
                                 encode_change(pattern), sequence=True, makepath=True)
            return current, new
        raise KafkaError(f"Failed to update ACLs for {path} after trying a maximum of "
                         f"{MAX_UPDATE_RETRIES} times", ErrorCode.UNKNOWN_SERVER_ERROR)

    # -- following the other brokers' changes

    async def start(self, on_change: Callable[[ResourcePattern, Entries], None]
                    ) -> dict[ResourcePattern, Entries]:
        """Load every ACL, then follow the change notifications written after the load's
        listing (those before it are in what it read); returns what it loaded."""
        for path in (LITERAL_ACL_PATH, EXTENDED_ACL_PATH, LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            await self.zk.ensure_path(path)
        for path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            children = await self.zk.get_children(path)
            seqs = [_seq(c) for c in children]
            self._last_seq[path] = max((s for s in seqs if s is not None), default=-1)
            self._locks[path] = asyncio.Lock()
            for child in children:  # those no broker will read again, once expired
                await self._purge(f"{path}/{child}")
        loaded = await self.load_all()
        self._on_change = on_change
        for path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.zk.watch_children(path, self._watcher(path))
        return loaded

    def _watcher(self, path: str) -> Callable[[list[str]], None]:
        return lambda children: self._spawn(self._changes(path, children))

    def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        if self._closed:
            coro.close()
            return
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _changes(self, path: str, children: list[str]) -> None:
        async with self._locks[path]:
            numbered = sorted((s, c) for c in children if (s := _seq(c)) is not None)
            for seq, child in numbered:
                if seq <= self._last_seq[path] or self._closed:
                    continue
                try:
                    await self._process(path, child)
                except Exception:
                    # a ZooKeeper error: this one and those after it are read again in a
                    # second (and at the next change or reconnection)
                    log.warning("reading ACL change %s/%s failed; retrying", path, child,
                                exc_info=True)
                    self._spawn(self._retry(path))
                    return
                self._last_seq[path] = seq

    async def _retry(self, path: str) -> None:
        await asyncio.sleep(RETRY_AFTER_FAILURE_S)
        try:
            children = await self.zk.get_children(path)
        except Exception:  # still failing: once more, a second later
            self._spawn(self._retry(path))
            return
        await self._changes(path, children)

    async def _process(self, path: str, child: str) -> None:
        found = await self.zk.get(f"{path}/{child}")
        if found is None:
            return
        data, stat = found
        try:
            pattern = decode_change(path, data)
        except (ValueError, KeyError) as e:
            log.warning("ignoring ACL change %s/%s: %s", path, child, e)
        else:
            entries, _v = await self.read(pattern)
            if self._on_change is not None:
                self._on_change(pattern, entries)
        await self._purge(f"{path}/{child}", stat.ctime)

    async def _purge(self, path: str, ctime_ms: int | None = None) -> None:
        """Delete a change notification older than CHANGE_EXPIRATION_S."""
        if ctime_ms is None:
            stat = await self.zk.exists(path)
            if stat is None:
                return
            ctime_ms = stat.ctime
        if time.time() - ctime_ms / 1000 > CHANGE_EXPIRATION_S:
            try:
                await self.zk.delete(path)
            except NoNodeError:
                pass


def _seq(child: str) -> int | None:
    if not child.startswith(CHANGE_PREFIX):
        return None
    try:
        return int(child[len(CHANGE_PREFIX):])
    except ValueError:
        return None
