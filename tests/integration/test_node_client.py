"""@platformatic/kafka (Node.js, tests/node/) against the embedded broker: topics made and
listed by its admin, records sent by its producer and read by its group consumer; its
deleteConsumerGroupOffsets on a Stable group whose member is its consumer (it sends a v1
subscription without owned_partitions); its client quotas in Kafka's answer order."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E

from .node_support import needs_node_client, run_node

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), needs_node_client]


def test_produce_consume_and_admin_topics(kbroker_broker: Any) -> None:
    r = run_node("smoke.mjs", kbroker_broker.bootstrap_servers, topic="node-smoke", group="node-g",
                 count=9)
    assert r["created"] == [{"name": "node-smoke", "partitions": 3}]
    assert "node-smoke" in r["listed"]
    assert sorted((m["key"], m["value"]) for m in r["consumed"]) == [(f"k{i}", f"v{i}") for i in range(9)]
    assert sorted({m["partition"] for m in r["consumed"]}) == [0, 1, 2]


def test_offset_delete_on_a_stable_group_of_this_client(kbroker_broker: Any) -> None:
    r = run_node("offset_delete.mjs", kbroker_broker.bootstrap_servers, group="node-od",
                 subscribed="node-od-in", other="node-od-out")
    assert r["before"] == ["node-od-in", "node-od-out"]
    assert r["state"] == "Stable"
    assert r["other"] == {"ok": [{"name": "node-od-out", "partitionIndexes": [0]}]}
    assert E.GROUP_SUBSCRIBED_TO_TOPIC in r["subscribed"]["error"]["codes"]
    assert E.NON_EMPTY_GROUP not in r["subscribed"]["error"]["codes"]
    assert r["after"] == ["node-od-in"]


def test_client_quotas_in_kafkas_order(kbroker_broker: Any) -> None:
    r = run_node("client_quotas.mjs", kbroker_broker.bootstrap_servers,
                 entity=[["user", "node-user"], ["client-id", "node-client"]],
                 ops=[["producer_byte_rate", 1000], ["consumer_byte_rate", 1000],
                      ["request_percentage", 0.5]],
                 components=[["client-id", 0, "node-client"], ["user", 0, "node-user"]])
    entity = [{"entityType": "client-id", "entityName": "node-client"},
              {"entityType": "user", "entityName": "node-user"}]
    assert r["altered"] == [{"errorCode": 0, "errorMessage": None, "entity": entity}]
    assert r["described"] == [{"entity": entity, "values": [
        {"key": "consumer_byte_rate", "value": 1000},
        {"key": "request_percentage", "value": 0.5},
        {"key": "producer_byte_rate", "value": 1000}]}]


def test_an_idempotent_producer_of_this_client_sends(kbroker_broker: Any) -> None:
    """Its InitProducerId carries producer id 0 and epoch 0: without a transactional id
    Kafka answers any such request with a new id (TransactionCoordinator)."""
    r = run_node("idempotent.mjs", kbroker_broker.bootstrap_servers, topic="node-idem", count=5)
    assert "error" not in r["sent"], r["sent"]
    assert [(m["key"], m["value"]) for m in r["consumed"]] == [(f"k{i}", f"v{i}") for i in range(5)]
