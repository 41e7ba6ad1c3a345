"""The keys of a CLIENT_METRICS config resource (type 16), one resource per subscription,
as Kafka's ClientMetricsConfigs defines and checks them (KIP-714):

    metrics      LIST, default empty: metric name prefixes the matching clients push;
                 "*" is every metric, an empty list none
    interval.ms  INT, default 300000 (5 minutes), 100..3600000: how often they push
    match        LIST, default empty (every client): `<selector>=<regex>` items, all of
                 which must match (Java's Pattern.matches: the whole value), selectors
                 client_instance_id, client_id, client_software_name,
                 client_software_version, client_source_address, client_source_port

A subscription's name may not be empty (INVALID_REQUEST). An unknown key, a value of the
wrong type or out of range, or an illegal match item -> INVALID_CONFIG. (Kafka 3.7-3.9
answered INVALID_REQUEST for an unknown key; kbroker answers as for any other resource's
unknown key, with the key named.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.common.config_def import ConfigDef, ConfigError, ConfigKey, Type, between
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError

SUBSCRIPTION_METRICS = "metrics"
PUSH_INTERVAL_MS = "interval.ms"
CLIENT_MATCH_PATTERN = "match"

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_SELECTORS = (CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                   CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT)

ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000

CLIENT_METRICS_CONFIGS = ConfigDef((
    ConfigKey(SUBSCRIPTION_METRICS, Type.LIST, (), None,
              "Metric name prefixes the matching clients push: * for all of them."),
    ConfigKey(PUSH_INTERVAL_MS, Type.INT, DEFAULT_INTERVAL_MS,
              between(MIN_INTERVAL_MS, MAX_INTERVAL_MS),
              "How often the matching clients push their metrics, in ms."),
    ConfigKey(CLIENT_MATCH_PATTERN, Type.LIST, (), None,
              "selector=regex items a client must all match (none: every client); selectors: "
              + ", ".join(MATCH_SELECTORS) + "."),
))


class ClientMetricsConfigError(KafkaError):
    """A subscription's configs refused, with the code the client gets."""


@dataclass(frozen=True)
class Subscription:
    """One CLIENT_METRICS resource, parsed (Kafka's ClientMetricsManager.SubscriptionInfo)."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]] = field(default_factory=dict)

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every selector's regex matches the client's whole attribute (no selector: all)."""
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def parse_match(items: tuple[str, ...]) -> dict[str, re.Pattern[str]]:
    """`selector=regex` items by selector (Kafka's parseMatchingPatterns: split at '=',
    exactly two parts, both trimmed)."""
    out = {}
    for item in items:
        parts = item.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigError(f"Illegal client matching pattern: {item}",
                                           ErrorCode.INVALID_CONFIG)
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(f"Illegal client matching pattern: {item}",
                                           ErrorCode.INVALID_CONFIG) from None
    return out


def validate(name: str, props: Mapping[str, str]) -> Subscription:
    """The subscription `props` make, or ClientMetricsConfigError (Kafka's
    ClientMetricsConfigs.validate)."""
    if not name:
        raise ClientMetricsConfigError("Subscription name can't be empty", ErrorCode.INVALID_REQUEST)
    unknown = sorted(set(props) - set(CLIENT_METRICS_CONFIGS.names()))
    if unknown:
        raise ClientMetricsConfigError(f"Unknown client metrics configuration: {unknown[0]}",
                                       ErrorCode.INVALID_CONFIG)
    try:
        parsed = CLIENT_METRICS_CONFIGS.parse(props)
    except ConfigError as e:
        raise ClientMetricsConfigError(str(e), ErrorCode.INVALID_CONFIG) from None
    return Subscription(name, tuple(parsed[SUBSCRIPTION_METRICS]), parsed[PUSH_INTERVAL_MS],
                        parse_match(parsed[CLIENT_MATCH_PATTERN]))
