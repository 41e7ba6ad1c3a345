"""GroupConfigStore: the single broker's group configs (Kafka's GroupConfig, set with
IncrementalAlterConfigs on a GROUP resource, as `kafka-configs --entity-type groups`
does), kept in one file beside the logs:

    group-configs.json   {"<group id>": {"<key>": "<value>", ...}, ...}

replaced atomically (write_atomically) at each change; a group with no override has no
entry. Which keys a group may have, and their checks, are GROUP_CONFIGS'
(common/configs.py, checked by server/config_alter.py); this module only keeps them.
Kafka keeps group configs in its KRaft metadata; a ZooKeeper cluster had none, and
kbroker's cluster mode refuses them for now (config_alter.py).

Owns: the file and the overrides in memory.
Lock: the broker's event-loop thread (`load` runs before the loop serves anyone).
"""

from __future__ import annotations

import json
import logging
import os

from kbroker.utils.atomic_file import write_atomically

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"


class GroupConfigStore:
    def __init__(self, log_dir: str | None) -> None:
        self.path = os.path.join(log_dir, GROUP_CONFIGS_FILE) if log_dir else None
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

    def set(self, group_id: str, overrides: dict[str, str]) -> None:
        """Replace the group's overrides (none: the group's entry goes)."""
        new = {g: c for g, c in self.overrides.items() if g != group_id}
        if overrides:
            new[group_id] = dict(overrides)
        if self.path is not None:
            write_atomically(self.path, json.dumps(new, sort_keys=True, indent=1))
        self.overrides = new
