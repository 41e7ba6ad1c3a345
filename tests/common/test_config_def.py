"""ConfigDef: one parser and one renderer per type, Kafka's validators and messages."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.common.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Only,
    Range,
    ThrottledReplicas,
    Type,
    all_in,
    at_least,
    between,
    one_of,
    parse_value,
    render_value,
)


@pytest.mark.parametrize(("type_", "raw", "value", "rendered"), [
    (Type.INT, " 42 ", 42, "42"),
    (Type.INT, str(INT_MAX), INT_MAX, str(INT_MAX)),
    (Type.SHORT, "-32768", -32768, "-32768"),
    (Type.LONG, str(LONG_MAX), LONG_MAX, str(LONG_MAX)),
    (Type.LONG, 7, 7, "7"),
    (Type.BOOLEAN, "TRUE", True, "true"),
    (Type.BOOLEAN, False, False, "false"),
    (Type.DOUBLE, "0.25", 0.25, "0.25"),
    (Type.LIST, " compact , delete,, ", ("compact", "delete"), "compact,delete"),
    (Type.LIST, ["a"], ("a",), "a"),
    (Type.STRING, " CreateTime ", "CreateTime", "CreateTime"),
])
def test_each_type_parses_and_renders(type_: Type, raw: Any, value: Any, rendered: str) -> None:
    assert parse_value("k", type_, raw) == value
    assert render_value(type_, value) == rendered
    assert parse_value("k", type_, rendered) == value


@pytest.mark.parametrize(("type_", "raw"), [
    (Type.INT, "1.5"), (Type.INT, str(INT_MAX + 1)), (Type.SHORT, "40000"),
    (Type.LONG, str(LONG_MAX + 1)), (Type.LONG, True), (Type.BOOLEAN, "yes"),
    (Type.DOUBLE, "lots"), (Type.STRING, 5), (Type.LIST, 5),
])
def test_ill_typed_values_are_kafkas_config_exception(type_: Type, raw: Any) -> None:
    with pytest.raises(ConfigError, match=r"^Invalid value .* for configuration some\.key: "):
        parse_value("some.key", type_, raw)


def test_validators() -> None:
    at_least(1)("k", 1)
    with pytest.raises(ConfigError, match="at least 1"):
        at_least(1)("k", 0)
    with pytest.raises(ConfigError, match="no more than 1"):
        between(0, 1)("k", 1.5)
    with pytest.raises(ConfigError):
        between(0, 1)("k", float("nan"))
    Range(1, 9, also=(-1,))("k", -1)
    with pytest.raises(ConfigError):
        Range(1, 9, also=(-1,))("k", 0)
    with pytest.raises(ConfigError, match="one of: a, b"):
        one_of("a", "b")("k", "c")
    all_in("a")("k", ())  # Kafka's ValidList takes the empty list
    with pytest.raises(ConfigError, match="one of: a"):
        all_in("a")("k", ("a", "b"))
    with pytest.raises(ConfigError, match="not implemented"):
        Only(False, "not implemented")("k", True)
    ThrottledReplicas()("k", ("*",))
    ThrottledReplicas()("k", ("0:1", "2:3"))
    with pytest.raises(ConfigError, match="partitionId"):
        ThrottledReplicas()("k", ("0-1",))
    assert (str(at_least(1)), str(between(0, 1)), str(Range(1, 9, also=(-1,)))) == (
        "[1,...]", "[0,...,1]", "[1,...,9] or -1")


def test_config_def() -> None:
    keys = ConfigDef([ConfigKey("a.b", Type.INT, 1, at_least(0), "doc"),
                      ConfigKey("c", Type.STRING)])
    assert keys.names() == ["a.b", "c"] and "a.b" in keys and keys["a.b"].attr == "a_b"
    assert keys.parse({"a.b": "5", "other": "x"}) == {"a.b": 5, "c": None}
    with pytest.raises(ConfigError, match="for configuration a.b"):
        keys.parse({"a.b": "-1"})
    with pytest.raises(ValueError, match="twice"):
        ConfigDef([ConfigKey("c", Type.STRING), ConfigKey("c", Type.INT)])
    text = keys.to_text(broker=True)
    assert "a.b\n    doc\n    (int; default 1; valid values [0,...]" in text
    assert "c\n" in text and "default null" in text
