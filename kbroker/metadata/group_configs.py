"""GroupConfigStore: the group configs (Kafka's GroupConfig, set with
IncrementalAlterConfigs on a GROUP resource, as `kafka-configs --entity-type groups`
does), stored durably.

Single broker: one file beside the logs, replaced atomically (write_atomically) at each
change; a group with no override has no entry:

    group-configs.json   {"<group id>": {"<key>": "<value>", ...}, ...}

Cluster mode: ZooKeeper, where Kafka's ZooKeeper mode keeps entity configs:
/config/groups/<group id, sanitized> ({"version":1,"config":{...}}), with a change
notification under /config/changes naming `groups/<group id>` (`persist`, given by the
wiring: ZkBroker.persist_group_config); every broker applies the changes any broker
makes through `apply` (the share-partition leaders read share.auto.offset.reset, the
lock duration and the isolation level from here), and loads them all at start. Kafka
keeps group configs in its KRaft metadata; its ZooKeeper mode had none, so the znodes
take the shape of its other entity configs.

Which keys a group may have, and their checks, are GROUP_CONFIGS' (common/configs.py,
checked by server/config_alter.py); this module only keeps them.

Owns: the file (a single broker) and the overrides in memory.
Lock: the broker's event-loop thread (`load` runs before the loop serves anyone).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping

from kbroker.utils.atomic_file import write_atomically

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"

# cluster mode: (group id, its overrides) -> written to ZooKeeper
Persist = Callable[[str, Mapping[str, str]], Awaitable[None]]


class GroupConfigStore:
    def __init__(self, log_dir: str | None, persist: Persist | None = None) -> None:
        self.path = os.path.join(log_dir, GROUP_CONFIGS_FILE) if log_dir and persist is None else None
        self.persist = persist
        self.overrides: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: not a JSON object")
        self.overrides = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in data.items()}
        log.info("group configs of %d groups loaded", len(self.overrides))

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self.overrides.get(group_id, {}))

    async def alter(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace the group's overrides (checked by the caller; none: the group's entry
        goes): stored, then applied."""
        if self.persist is not None:
            await self.persist(group_id, overrides)
        elif self.path is not None:
            new = {g: c for g, c in self.overrides.items() if g != group_id}
            if overrides:
                new[group_id] = dict(overrides)
            write_atomically(self.path, json.dumps(new, sort_keys=True, indent=1))
        self.apply(group_id, overrides)

    def apply(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """A group's overrides as stored now (cluster mode: read from ZooKeeper)."""
        if overrides:
            self.overrides[group_id] = dict(overrides)
        else:
            self.overrides.pop(group_id, None)
