"""Dynamic broker configs in cluster mode (Kafka's DynamicBrokerConfig, ZooKeeper mode).

A broker's effective config is its server.properties (and --override) values, overridden
by the cluster-wide defaults in /config/brokers/<default>, overridden by its own in
/config/brokers/<id>. IncrementalAlterConfigs / AlterConfigs on a BROKER resource write
there (the resource name "" is the cluster-wide default, an id that broker's own) with
a /config/changes notification; every broker re-reads the entity it is affected by and
applies the new values while running.

Which keys change live: Kafka's dynamic keys whose users kbroker can update in place
(LIVE_KEYS): every broker default of a topic config (log.retention.ms, log.segment.bytes,
message.max.bytes, compression.type, min.insync.replicas, unclean.leader.election.enable,
...: logs without a topic override take the new default), num.replica.fetchers,
max.connections and producer.id.expiration.ms. Any other key, dynamic in Kafka or not,
is refused with INVALID_CONFIG rather than stored and ignored.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.common.config_def import UpdateMode
from kbroker.common.configs import BROKER_CONFIGS, TOPIC_CONFIGS

DEFAULT_ENTITY = "<default>"

_TOPIC_DEFAULTS = frozenset(s for key in TOPIC_CONFIGS for s in key.synonyms)
LIVE_KEYS = frozenset(
    k.name for k in BROKER_CONFIGS
    if k.update_mode != UpdateMode.READ_ONLY
    and (k.name in _TOPIC_DEFAULTS
         or k.name in ("num.replica.fetchers", "max.connections", "producer.id.expiration.ms"))
    and k.name != "log.preallocate"  # only false is accepted; nothing to change
)


class DynamicBrokerConfig:
    """The three layers of one broker's config; see the module docstring."""

    def __init__(self, static: Mapping[str, str], broker_id: int) -> None:
        self.static = dict(static)
        self.broker_id = broker_id
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}

    def props(self) -> dict[str, str]:
        return {**self.static, **self.cluster_default, **self.per_broker}

    def layer(self, entity: str) -> dict[str, str]:
        return self.cluster_default if entity == DEFAULT_ENTITY else self.per_broker

    def set_layer(self, entity: str, values: Mapping[str, str]) -> None:
        if entity == DEFAULT_ENTITY:
            self.cluster_default = dict(values)
        elif entity == str(self.broker_id):
            self.per_broker = dict(values)

    def refused(self, names: set[str]) -> list[str]:
        """The keys of a change that kbroker does not apply while running."""
        return sorted(n for n in names if n not in LIVE_KEYS)
