"""IncrementalAlterConfigs APPEND / SUBTRACT on the keys of either table: a topic's
overrides over its broker defaults, and a cluster's dynamic broker layers over the
layers below them (log.cleanup.policy of a BROKER resource). The client-facing cases
run through confluent-kafka in tests/integration/test_list_configs.py."""

from __future__ import annotations

import pytest

from kbroker.common.error_code import ErrorCode
from kbroker.config import BrokerConfig
from kbroker.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kbroker.server.apis.incremental_alter_configs import APPEND, SET, SUBTRACT, _apply_ops
from kbroker.server.config_alter import _broker_inherited, _topic_inherited
from kbroker.server.topic_admin import AdminError

Op = IncrementalAlterConfigsRequest.AlterableConfig


def _resource(*ops: tuple[str, int, str]) -> IncrementalAlterConfigsRequest.AlterConfigsResource:
    return IncrementalAlterConfigsRequest.AlterConfigsResource(
        configs=[Op(name=n, config_operation=o, value=v) for n, o, v in ops])


def test_a_topic_without_override_starts_from_its_broker_default() -> None:
    inherited = _topic_inherited(BrokerConfig.from_props({"log.cleanup.policy": "compact"})
                                 .log_config())
    planned = _apply_ops(_resource(("cleanup.policy", APPEND, "delete")), {}, inherited)
    assert planned == {"cleanup.policy": "compact,delete"}
    planned = _apply_ops(_resource(("cleanup.policy", SUBTRACT, "compact")), {}, inherited)
    assert planned == {"cleanup.policy": ""}


def test_broker_layers_start_from_the_layers_below() -> None:
    below = {"log.cleanup.policy": "compact , delete"}
    planned = _apply_ops(_resource(("log.cleanup.policy", SUBTRACT, "compact")), {},
                         _broker_inherited(below))
    assert planned == {"log.cleanup.policy": "delete"}
    planned = _apply_ops(_resource(("log.cleanup.policy", APPEND, "compact")), {},
                         _broker_inherited({}))  # Kafka's default: delete
    assert planned == {"log.cleanup.policy": "delete,compact"}
    planned = _apply_ops(_resource(("log.cleanup.policy", APPEND, "delete")),
                         {"log.cleanup.policy": ""}, _broker_inherited(below))
    assert planned == {"log.cleanup.policy": "delete"}


@pytest.mark.parametrize(("name", "message"), [
    ("log.retention.ms", "append is not allowed"),
    ("no.such.key", "Unknown config name"),
])
def test_append_needs_a_list_key(name: str, message: str) -> None:
    with pytest.raises(AdminError) as info:
        _apply_ops(_resource((name, APPEND, "1")), {}, _broker_inherited({}))
    assert info.value.error_code == ErrorCode.INVALID_CONFIG
    assert message in (info.value.message or "")


def test_set_then_append_in_one_request() -> None:
    inherited = _topic_inherited(BrokerConfig.from_props({}).log_config())
    planned = _apply_ops(_resource(("cleanup.policy", SET, ""), ("retention.ms", SET, "1")),
                         {}, inherited)
    assert planned == {"cleanup.policy": "", "retention.ms": "1"}
