"""List-type configs as Kafka reads them, through confluent-kafka's AdminClient against a
`kbroker serve` subprocess: the empty list is a valid value (Kafka's ValidList), and
IncrementalAlterConfigs APPEND / SUBTRACT follow ConfigAdminManager (an item already
present is not appended twice, subtracting an absent item changes nothing, subtracting
every item leaves "", appending to "" gives just the new items).

The first case is confluent-kafka-python's own admin test: SUBTRACT `delete` from
cleanup.policy and expect cleanup.policy="".
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15
APPEND, SUBTRACT, SET = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT, AlterConfigOpType.SET
POLICY = "cleanup.policy"
THROTTLED = "leader.replication.throttled.replicas"


@pytest.fixture
def admin(broker_process: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker_process.bootstrap_servers})


@pytest.fixture
def topic(admin: AdminClient) -> str:
    name = f"lists-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1)], request_timeout=TIMEOUT)[name].result()
    return name


def _alter(admin: AdminClient, topic: str, *ops: tuple[str, str, AlterConfigOpType],
           validate_only: bool = False) -> None:
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT,
                                    validate_only=validate_only)[res].result()


def _value(admin: AdminClient, topic: str, name: str) -> tuple[str, bool]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entry = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result()[name]
    return entry.value, entry.is_default


def _error(admin: AdminClient, topic: str, *ops: tuple[str, str, AlterConfigOpType]) -> int:
    with pytest.raises(KafkaException) as info:
        _alter(admin, topic, *ops)
    return int(info.value.args[0].code())


def test_subtract_the_only_item_leaves_the_empty_list(admin: AdminClient, topic: str) -> None:
    _alter(admin, topic, (POLICY, "delete", SUBTRACT), ("retention.ms", "5000", SET))
    assert _value(admin, topic, POLICY) == ("", False)
    assert _value(admin, topic, "retention.ms") == ("5000", False)


def test_append_to_the_empty_list_gives_just_the_new_items(admin: AdminClient, topic: str) -> None:
    _alter(admin, topic, (POLICY, "", SET))
    assert _value(admin, topic, POLICY) == ("", False)
    _alter(admin, topic, (POLICY, "compact", APPEND))
    assert _value(admin, topic, POLICY) == ("compact", False)
    _alter(admin, topic, (POLICY, "compact,delete", APPEND))
    assert _value(admin, topic, POLICY) == ("compact,delete", False)


def test_append_of_a_present_item_and_subtract_of_an_absent_one_change_nothing(
        admin: AdminClient, topic: str) -> None:
    _alter(admin, topic, (POLICY, "delete", APPEND))  # the default already holds it
    assert _value(admin, topic, POLICY) == ("delete", False)
    _alter(admin, topic, (POLICY, "compact", SUBTRACT))
    assert _value(admin, topic, POLICY) == ("delete", False)
    _alter(admin, topic, (POLICY, "compact", APPEND))
    _alter(admin, topic, (POLICY, "delete", APPEND))
    assert _value(admin, topic, POLICY) == ("delete,compact", False)


def test_validate_only_changes_nothing(admin: AdminClient, topic: str) -> None:
    _alter(admin, topic, (POLICY, "delete", SUBTRACT), validate_only=True)
    assert _value(admin, topic, POLICY) == ("delete", True)


def test_invalid_items_are_refused(admin: AdminClient, topic: str) -> None:
    assert _error(admin, topic, (POLICY, "shred", APPEND)) == KafkaError.INVALID_CONFIG
    assert _error(admin, topic, ("retention.ms", "1", APPEND)) == KafkaError.INVALID_CONFIG
    assert _error(admin, topic, (THROTTLED, "0-1", APPEND)) == KafkaError.INVALID_CONFIG
    assert _value(admin, topic, POLICY) == ("delete", True)


def test_throttled_replica_lists(admin: AdminClient, topic: str) -> None:
    assert _value(admin, topic, THROTTLED) == ("", True)
    _alter(admin, topic, (THROTTLED, "0:1", APPEND))
    _alter(admin, topic, (THROTTLED, "0:1,1:1", APPEND))
    assert _value(admin, topic, THROTTLED) == ("0:1,1:1", False)
    _alter(admin, topic, (THROTTLED, "2:2", SUBTRACT))
    assert _value(admin, topic, THROTTLED) == ("0:1,1:1", False)
    _alter(admin, topic, (THROTTLED, "1:1,0:1", SUBTRACT))
    assert _value(admin, topic, THROTTLED) == ("", False)
    _alter(admin, topic, (THROTTLED, "*", APPEND))
    assert _value(admin, topic, THROTTLED) == ("*", False)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_create_and_legacy_alter_take_the_empty_list(admin: AdminClient) -> None:
    name = f"lists-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, config={POLICY: ""})],
                        request_timeout=TIMEOUT)[name].result()
    assert _value(admin, name, POLICY) == ("", False)
    res = ConfigResource(ResourceType.TOPIC, name, set_config={POLICY: "compact"})
    admin.alter_configs([res], request_timeout=TIMEOUT)[res].result()
    assert _value(admin, name, POLICY) == ("compact", False)
    res = ConfigResource(ResourceType.TOPIC, name, set_config={POLICY: ""})
    admin.alter_configs([res], request_timeout=TIMEOUT)[res].result()
    assert _value(admin, name, POLICY) == ("", False)
