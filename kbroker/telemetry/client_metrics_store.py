"""The client metrics subscriptions (CLIENT_METRICS config resources), stored durably.

Single broker: `kbroker-client-metrics.json` in the first log dir, replaced atomically at
each change:

    {"version": 1, "subscriptions": {"<name>": {"metrics": "org.apache.kafka.producer.",
                                                "interval.ms": "1000"}}}

Cluster mode: ZooKeeper, where Kafka's ZooKeeper mode keeps entity configs:
/config/client-metrics/<name> ({"version":1,"config":{...}}), with a change notification
under /config/changes naming `client-metrics/<name>` (`persist`, given by the wiring:
ZkBroker.persist_client_metrics); every broker applies the changes other brokers make
through `set_subscription`, and loads them all at start. A subscription whose configs
are all deleted is removed (its file entry, its znode's config emptied).

Owns: the stored configs of each subscription; the parsed subscriptions are the
ClientMetricsManager's, told of every change.
Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping

from kbroker.telemetry.client_metrics_configs import ClientMetricsConfigError
from kbroker.telemetry.client_metrics_manager import ClientMetricsManager
from kbroker.utils.atomic_file import write_atomically

log = logging.getLogger(__name__)

CLIENT_METRICS_FILE = "kbroker-client-metrics.json"
ENTITY_TYPE = "client-metrics"  # /config/client-metrics/<name>

# cluster mode: (subscription name, its configs) -> written to ZooKeeper
Persist = Callable[[str, Mapping[str, str]], Awaitable[None]]


class ClientMetricsConfigStore:
    """See the module docstring."""

    def __init__(self, log_dir: str | None, manager: ClientMetricsManager,
                 persist: Persist | None = None) -> None:
        self._path = os.path.join(log_dir, CLIENT_METRICS_FILE) if log_dir is not None else None
        self.manager = manager
        self.persist = persist
        self._configs: dict[str, dict[str, str]] = {}
        if self._path is not None and os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                stored = json.load(f).get("subscriptions") or {}
            for name, props in stored.items():
                self.set_subscription(name, {str(k): str(v) for k, v in props.items()})

    def names(self) -> list[str]:
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str]:
        """A subscription's stored configs (none: it does not exist)."""
        return dict(self._configs.get(name, {}))

    async def alter(self, name: str, props: Mapping[str, str]) -> None:
        """A subscription's new configs (checked by the caller; empty: removed): stored,
        then applied."""
        if self.persist is not None:
            await self.persist(name, props)
        elif self._path is not None:
            new = {**self._configs, name: dict(props)}
            if not props:
                del new[name]
            write_atomically(self._path, json.dumps({"version": 1, "subscriptions": new},
                                                    indent=1, sort_keys=True))
        self.set_subscription(name, props)

    def set_subscription(self, name: str, props: Mapping[str, str]) -> None:
        """A subscription's configs as stored now (cluster mode: read from ZooKeeper)."""
        try:
            self.manager.update_subscription(name, props)
        except ClientMetricsConfigError as e:
            log.warning("client metrics subscription %s: ignoring invalid configs %s: %s",
                        name, dict(props), e)
            return
        if props:
            self._configs[name] = dict(props)
        else:
            self._configs.pop(name, None)
