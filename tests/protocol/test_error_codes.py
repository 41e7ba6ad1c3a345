"""The error table (kbroker/common/error_code.py, generated) against Kafka 4's Errors.java:
every code from -1 to the newest with Kafka's name, a message for each, and Kafka's
retriable flags; kafka-python's table (which mirrors Errors.java up to 127) agrees."""

from __future__ import annotations

import inspect

import kafka.errors

from kbroker.common.error_code import MESSAGES, RETRIABLE, ErrorCode


def test_every_code_of_kafka_4_is_known() -> None:
    codes = sorted(e.value for e in ErrorCode)
    assert codes == list(range(-1, 137))  # Errors.java has no gaps; 136 is Kafka 4.4's newest
    assert set(MESSAGES) == set(codes) and all(MESSAGES[c] for c in codes)
    assert ErrorCode(99).name == "POSITION_OUT_OF_RANGE"
    assert [ErrorCode(c).name for c in range(128, 137)] == [
        "INVALID_REGULAR_EXPRESSION", "REBOOTSTRAP_REQUIRED", "STREAMS_INVALID_TOPOLOGY",
        "STREAMS_INVALID_TOPOLOGY_EPOCH", "STREAMS_TOPOLOGY_FENCED", "SHARE_SESSION_LIMIT_REACHED",
        "GROUP_DELETION_FAILED", "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
        "CONTROLLER_ID_NOT_REGISTERED"]


def test_retriable_flags_are_kafkas() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and ErrorCode.NOT_CONTROLLER.retriable
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED.retriable and ErrorCode.UNKNOWN_TOPIC_ID.retriable
    assert not ErrorCode.NONE.retriable and not ErrorCode.UNKNOWN_SERVER_ERROR.retriable
    assert not ErrorCode.REBOOTSTRAP_REQUIRED.retriable and not ErrorCode.GROUP_DELETION_FAILED.retriable
    assert RETRIABLE <= {e.value for e in ErrorCode}


def test_kafka_python_agrees_up_to_its_newest_code() -> None:
    theirs = {cls.errno: cls.retriable for _n, cls in inspect.getmembers(kafka.errors, inspect.isclass)
              if issubclass(cls, kafka.errors.BrokerResponseError) and isinstance(cls.errno, int)}
    assert max(theirs) >= 127
    # CorruptRecordException extends RetriableException in Java; kafka-python says otherwise
    differ = {c for c, retriable in theirs.items() if retriable != (c in RETRIABLE)}
    assert differ == {ErrorCode.CORRUPT_MESSAGE}
