"""The single broker's dynamic broker configs, stored beside its log dirs.

What a cluster keeps in ZooKeeper's /config/brokers/<default> and /config/brokers/<id>
(kbroker.cluster.dynamic_config), a single broker keeps in two files of its first log
dir, in Kafka's properties format, each replaced atomically (write_atomically) when an
AlterConfigs / IncrementalAlterConfigs on its BROKER resource changes it:

    dynamic-default-broker.properties   the cluster-wide default (resource name "")
    dynamic-broker.properties           this broker's own (resource name = node.id)

An empty layer has no file. At start, before the logs open, `load` reads both and the
broker runs with server.properties overridden by them, as Kafka's DynamicBrokerConfig
does with what ZooKeeper holds. Which keys may be stored, and their checks, are the
cluster's (server/config_alter.py); this module only keeps them.

Owns: the two files. The layers themselves are the DynamicBrokerConfig's.
Lock: the broker's event-loop thread (`load` runs before the loop serves anyone).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from kbroker.cluster.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from kbroker.common.config_def import ConfigError
from kbroker.config import format_properties, load_properties_file
from kbroker.utils.atomic_file import write_atomically

log = logging.getLogger(__name__)

DEFAULT_BROKER_FILE = "dynamic-default-broker.properties"
BROKER_FILE = "dynamic-broker.properties"

# The broker's new effective props after a change (BrokerComponents.apply_broker_config).
BrokerConfigListener = Callable[[Mapping[str, str]], None]


class LocalDynamicBrokerConfigs:
    """See the module docstring."""

    def __init__(self, log_dir: str, dynamic: DynamicBrokerConfig,
                 on_broker_config: BrokerConfigListener) -> None:
        self.log_dir = log_dir
        self.dynamic = dynamic
        self._on_broker_config = on_broker_config

    def _path(self, entity: str) -> str:
        name = DEFAULT_BROKER_FILE if entity == DEFAULT_ENTITY else BROKER_FILE
        return os.path.join(self.log_dir, name)

    def load(self) -> dict[str, str] | None:
        """Read both layers; the effective props when either has a key, else None."""
        for entity in (DEFAULT_ENTITY, str(self.dynamic.broker_id)):
            path = self._path(entity)
            if os.path.exists(path):
                try:
                    self.dynamic.set_layer(entity, load_properties_file(path))
                except ConfigError as e:
                    raise ConfigError(f"dynamic broker configs: {e}") from None
        if not (self.dynamic.cluster_default or self.dynamic.per_broker):
            return None
        return self.dynamic.props()

    def alter(self, entity: str, values: Mapping[str, str]) -> None:
        """Store a layer's new values (checked by the caller) and apply them."""
        path = self._path(entity)
        if values:
            write_atomically(path, format_properties(values))
        elif os.path.exists(path):
            os.remove(path)
        self.dynamic.set_layer(entity, values)
        self._on_broker_config(self.dynamic.props())
