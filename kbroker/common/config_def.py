"""ConfigDef: how a configuration key is declared, parsed, validated and rendered.

The machinery of Kafka's org.apache.kafka.common.config.ConfigDef, with no keys
of its own (they are in kbroker.common.configs). A ConfigKey has a name (Kafka's
string), a Type, a typed default (None: no default, Kafka's null), an optional
validator, documentation, for a broker key its update mode (Kafka's
DynamicBrokerConfig) and for a topic key its broker synonyms. One parser and one
renderer per Type:

    type      value            from a string                 rendered
    BOOLEAN   bool             true / false, any case        true / false
    STRING    str              trimmed                       as is
    INT       int              32-bit signed                 decimal
    SHORT     int              16-bit signed                 decimal
    LONG      int              64-bit signed                 decimal
    DOUBLE    float            Python float()                repr
    LIST      tuple[str, ...]  comma-separated, trimmed,     comma-joined
                               empty items dropped
    CLASS, PASSWORD            as STRING

A value that cannot be parsed or that its validator refuses raises ConfigError
with Kafka's message: "Invalid value V for configuration NAME: REASON".
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, Protocol

SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


def invalid(name: str, value: Any, reason: str) -> ConfigError:
    """Kafka's ConfigException(name, value, message)."""
    return ConfigError(f"Invalid value {_shown(value)} for configuration {name}: {reason}")


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


class Type(IntEnum):
    """Kafka's ConfigDef.Type, numbered as DescribeConfigsResponse's ConfigType (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class UpdateMode(Enum):
    """How Kafka lets a broker key change without a restart (its docs' "Update Mode")."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


_INTEGER_BOUNDS = {
    Type.SHORT: (SHORT_MIN, SHORT_MAX),
    Type.INT: (INT_MIN, INT_MAX),
    Type.LONG: (LONG_MIN, LONG_MAX),
}


def parse_value(name: str, type_: Type, raw: Any) -> Any:
    """A value of `type_` from a string (as in server.properties or on the wire) or from
    an already-typed value."""
    if type_ in _INTEGER_BOUNDS:
        return _parse_integer(name, type_, raw)
    if type_ == Type.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise invalid(name, raw, "Expected value to be either true or false")
    if type_ == Type.DOUBLE:
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise invalid(name, raw, "Expected value to be a double")
        try:
            return float(raw)
        except ValueError:
            raise invalid(name, raw, "Not a number of type DOUBLE") from None
    if type_ == Type.LIST:
        if isinstance(raw, str):
            raw = raw.split(",")
        if not isinstance(raw, list | tuple) or not all(isinstance(s, str) for s in raw):
            raise invalid(name, raw, "Expected a comma separated list")
        return tuple(s.strip() for s in raw if s.strip())
    if not isinstance(raw, str):
        raise invalid(name, raw, "Expected value to be a string")
    return raw.strip()


def _parse_integer(name: str, type_: Type, raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise invalid(name, raw, f"Expected value to be a number of type {type_.name}")
    try:
        value = int(raw.strip()) if isinstance(raw, str) else raw
    except ValueError:
        raise invalid(name, raw, f"Not a number of type {type_.name}") from None
    lo, hi = _INTEGER_BOUNDS[type_]
    if not lo <= value <= hi:
        raise invalid(name, raw, f"Not a number of type {type_.name} (in [{lo},...,{hi}])")
    return value


def render_value(type_: Type, value: Any) -> str | None:
    """A typed value as Kafka renders it (DescribeConfigs, server.properties)."""
    if value is None:
        return None
    if type_ == Type.BOOLEAN:
        return "true" if value else "false"
    if type_ == Type.LIST:
        return ",".join(value)
    return str(value)


# ---------------------------------------------------------------------------
# validators: called with (name, typed value), raise ConfigError; str() is the
# "Valid Values" column of Kafka's generated docs


class Validator(Protocol):
    def __call__(self, name: str, value: Any) -> None: ...


@dataclass(frozen=True)
class Range:
    """Kafka's Range.atLeast / Range.between; `also` admits a few values outside it."""

    lo: float | None = None
    hi: float | None = None
    also: tuple[int, ...] = ()

    def __call__(self, name: str, value: Any) -> None:
        if value is None or value in self.also:
            return
        if self.lo is not None and value < self.lo:
            raise invalid(name, value, f"Value must be at least {self.lo}")
        if self.hi is not None and value > self.hi:
            raise invalid(name, value, f"Value must be no more than {self.hi}")
        if value != value:  # NaN
            raise invalid(name, value, "Value must be a number")

    def __str__(self) -> str:
        bounds = f"[{'' if self.lo is None else self.lo},...{'' if self.hi is None else f',{self.hi}'}]"
        return bounds + "".join(f" or {a}" for a in self.also)


def at_least(lo: float) -> Range:
    return Range(lo)


def between(lo: float, hi: float) -> Range:
    return Range(lo, hi)


@dataclass(frozen=True)
class ValidString:
    """Kafka's ValidString.in (and, `ignore_case`, CaseInsensitiveValidString.in): one of
    the given strings."""

    choices: tuple[str, ...]
    ignore_case: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if value not in self.choices and not (
                self.ignore_case and str(value).lower() in {c.lower() for c in self.choices}):
            raise invalid(name, value, f"String must be one of: {', '.join(self.choices)}")

    def __str__(self) -> str:
        return f"[{', '.join(self.choices)}]"


def one_of(*choices: str, ignore_case: bool = False) -> ValidString:
    return ValidString(choices, ignore_case)


@dataclass(frozen=True)
class ValidList:
    """Kafka's ValidList.in: a list whose every item is a ValidString. The empty list is
    valid, as in Kafka 3.9 (`cleanup.policy=""`: neither delete nor compact)."""

    items: ValidString

    def __call__(self, name: str, value: Any) -> None:
        for item in value or ():
            self.items(name, item)

    def __str__(self) -> str:
        return str(self.items)


def all_in(*choices: str) -> ValidList:
    return ValidList(ValidString(choices))


_HOST_PORT = re.compile(r"^(\[[^\]]*\]|[^:\[\]]*):(\d{1,5})$")


def parse_host_port(text: str) -> tuple[str, int] | None:
    """`host:port` or `[v6]:port` -> (host, port); None when it is not one (port > 65535
    included)."""
    m = _HOST_PORT.match(text)
    if m is None or int(m.group(2)) > 65535:
        return None
    return m.group(1).strip("[]"), int(m.group(2))


@dataclass(frozen=True)
class HostPort:
    """host:port (an empty host: every interface), port 0-65535; empty means none."""

    def __call__(self, name: str, value: Any) -> None:
        if value and parse_host_port(value) is None:
            raise invalid(name, value, "expected host:port, e.g. 127.0.0.1:9404")

    def __str__(self) -> str:
        return "host:port"


@dataclass(frozen=True)
class Only:
    """kbroker accepts one value of a key whose other values it does not implement:
    refused, never silently ignored."""

    value: Any
    reason: str

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value != self.value:
            raise invalid(name, value, self.reason)

    def __str__(self) -> str:
        return f"[{render_value(Type.BOOLEAN, self.value) if isinstance(self.value, bool) else self.value}]"


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: '*' or partitionId:brokerId pairs."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None or "".join(value) == "*":
            return
        if not all(_REPLICA.fullmatch(item) for item in value):
            raise invalid(name, value, "Must be the literal '*' or a list of replicas in the "
                          "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


# ---------------------------------------------------------------------------
# keys


@dataclass(frozen=True)
class ConfigKey:
    """One key: Kafka's ConfigDef.ConfigKey, plus a broker key's update mode and a topic
    key's broker synonyms (most specific first; the first is the one whose value is the
    topic's default)."""

    name: str
    type: Type
    default: Any = None  # typed; None: no default
    validator: Validator | None = None
    doc: str = ""
    update_mode: UpdateMode = UpdateMode.READ_ONLY
    synonyms: tuple[str, ...] = ()

    @property
    def attr(self) -> str:
        """The field holding its value in BrokerConfig / LogConfig."""
        return self.name.replace(".", "_")

    def parse(self, raw: Any) -> Any:
        try:
            value = parse_value(self.name, self.type, raw)
            if self.validator is not None:
                self.validator(self.name, value)
        except ConfigError as e:
            if self.type == Type.PASSWORD:  # Kafka shows a password as [hidden]
                raise ConfigError(str(e).replace(str(raw).strip(), "[hidden]")) from None
            raise
        return value

    def render(self, value: Any) -> str | None:
        return render_value(self.type, value)

    @property
    def default_string(self) -> str | None:
        return self.render(self.default)


class ConfigDef:
    """An ordered set of ConfigKeys, by name."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            if key.name in self._keys:
                raise ValueError(f"config {key.name} defined twice")
            self._keys[key.name] = key

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def get(self, name: str) -> ConfigKey | None:
        return self._keys.get(name)

    def names(self) -> list[str]:
        return list(self._keys)

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every key's typed value: given in `props` (unknown names are left to the
        caller), else its default."""
        return {
            key.name: key.parse(props[key.name]) if key.name in props else key.default
            for key in self
        }

    def to_text(self, broker: bool) -> str:
        """The table as text (Kafka's ConfigDef.toRst, for `kbroker serve --help-config`)."""
        lines = []
        for key in sorted(self, key=lambda k: k.name):
            default = key.default_string
            facts = [key.type.name.lower(), f"default {'null' if default is None else default}"]
            if key.validator is not None:
                facts.append(f"valid values {key.validator}")
            if broker:
                facts.append(f"Kafka update mode {key.update_mode.value}")
            elif key.synonyms:
                facts.append(f"broker default {', '.join(key.synonyms)}")
            else:
                facts.append("topic only")
            lines.append(key.name)
            lines += textwrap.wrap(key.doc, 96, initial_indent="    ", subsequent_indent="    ")
            lines += textwrap.wrap(f"({'; '.join(facts)})", 96, initial_indent="    ",
                                   subsequent_indent="     ")
        return "\n".join(lines) + "\n"
