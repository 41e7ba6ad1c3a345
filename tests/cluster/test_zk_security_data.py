"""The ZooKeeper formats of ACLs and client quota entities, as Kafka writes them
(kafka.zk.ZkData, AclEntry, Sanitizer), byte for byte."""

from __future__ import annotations

import json

import pytest

from kbroker.cluster import zk_acls, zk_data
from kbroker.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kbroker.security.quotas import quota_string, quota_values


def test_acl_paths_and_node_data() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1", PatternType.LITERAL)
    prefixed = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    assert zk_acls.resource_path(literal) == "/kafka-acl/TransactionalId/tx-1"
    assert zk_acls.resource_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/ord"
    entries = frozenset({
        AccessControlEntry("User:alice", "*", AclOperation.CLUSTER_ACTION, PermissionType.ALLOW),
        AccessControlEntry("User:bob", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, PermissionType.DENY)})
    data = zk_acls.encode_acls(entries)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "ClusterAction", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite",
         "host": "10.0.0.1"}]}
    assert zk_acls.decode_acls(data) == entries
    assert zk_acls.decode_acls(b"") == frozenset()


def test_acl_change_notifications() -> None:
    literal = ResourcePattern(ResourceType.GROUP, "g:1", PatternType.LITERAL)
    assert zk_acls.encode_change(literal) == b"GROUP:g:1"
    assert zk_acls.decode_change(zk_acls.LITERAL_CHANGES_PATH, b"GROUP:g:1") == literal
    assert zk_acls.decode_change(zk_acls.LITERAL_CHANGES_PATH, b"Group:g:1") == literal
    prefixed = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    event = zk_acls.encode_change(prefixed)
    assert json.loads(event) == {"version": 1, "resourceType": "TOPIC", "name": "ord",
                                 "patternType": "PREFIXED"}
    assert zk_acls.decode_change(zk_acls.EXTENDED_CHANGES_PATH, event) == prefixed
    for path, bad in ((zk_acls.LITERAL_CHANGES_PATH, b"no separator"),
                      (zk_acls.LITERAL_CHANGES_PATH, b"Bogus:x"),
                      (zk_acls.EXTENDED_CHANGES_PATH, b"{}"),
                      (zk_acls.EXTENDED_CHANGES_PATH, b'{"version":2,"resourceType":"TOPIC",'
                                                      b'"name":"a","patternType":"PREFIXED"}')):
        with pytest.raises((ValueError, KeyError)):
            zk_acls.decode_change(path, bad)
    assert zk_acls.storable("a/b") and zk_acls.storable("..") and zk_acls.storable("ok") is None


def test_quota_entity_paths() -> None:
    assert zk_data.sanitize("alice") == "alice"
    assert zk_data.sanitize("CN=a b,O=*~") == "CN%3Da%20b%2CO%3D%2A~"  # Kafka's Sanitizer
    assert zk_data.sanitize("<default>") == "<default>"
    cases = {("alice", None): ("users", "alice"), (None, "app 1"): ("clients", "app%201"),
             ("alice", "app"): ("users", "alice/clients/app"),
             ("<default>", "<default>"): ("users", "<default>/clients/<default>")}
    for entity, path in cases.items():
        assert zk_data.quota_entity_path(*entity) == path
        assert zk_data.quota_entity(*path) == entity
    assert zk_data.quota_entity("topics", "t") is None
    assert zk_data.quota_entity("users", "a/b") is None
    assert quota_string("producer_byte_rate", 1024.0) == "1024"
    assert quota_string("request_percentage", 50.0) == "50.0"
    assert quota_values({"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=x",
                         "consumer_byte_rate": "fast"}) == {"producer_byte_rate": 1024.0}
