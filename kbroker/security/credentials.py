"""The SCRAM credential store: user -> mechanism -> ScramCredential (salted, never a password).

Single broker: the file `kbroker-scram-credentials.json` in the first log dir,
written atomically (Kafka keeps them in its metadata log, which a single kbroker
does not have):

    {"version": 1, "users": {"<user>": {"SCRAM-SHA-256": "salt=...,stored_key=...,
                                         server_key=...,iterations=4096"}}}

Cluster mode: ZooKeeper, as Kafka's ZooKeeper mode keeps them: `/config/users/<user>`
= {"version":1,"config":{"SCRAM-SHA-256":"salt=...,..."}} with a change notification
under /config/changes (entity_path users/<user>); every broker reloads a user when
notified (kbroker.cluster.zk_broker). The store here is the memory copy; `persist`
is the writer the wiring gives its constructor (ZkBroker.persist_credentials).

Loop thread only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping

from kbroker.security.scram import MECHANISMS, ScramCredential
from kbroker.utils.atomic_file import write_atomically

CREDENTIALS_FILE = "kbroker-scram-credentials.json"

# (user, its credentials after the change) -> written
Persist = Callable[[str, Mapping[str, ScramCredential]], Awaitable[None]]


class ScramCredentialStore:
    def __init__(self, path: str | None = None, persist: Persist | None = None) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._path = path
        self.persist = persist  # cluster mode: the writer to ZooKeeper
        if path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            for user, mechs in (data.get("users") or {}).items():
                self._users[user] = {m: ScramCredential.from_string(v) for m, v in mechs.items()
                                     if m in MECHANISMS}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(m) for u, m in self._users.items()}

    def set_user(self, user: str, credentials: Mapping[str, str]) -> None:
        """A user's credentials as ZooKeeper stores them (mechanism -> Kafka's string)."""
        creds = {m: ScramCredential.from_string(v) for m, v in credentials.items() if m in MECHANISMS}
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)

    async def alter(self, user: str, upserts: Mapping[str, ScramCredential],
                    deletions: set[str]) -> None:
        creds = dict(self._users.get(user, {}))
        creds.update(upserts)
        for mech in deletions:
            creds.pop(mech, None)
        if self.persist is not None:
            await self.persist(user, creds)
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)
        if self._path is not None:
            self._write()

    def _write(self) -> None:
        assert self._path is not None
        data = {"version": 1, "users": {
            u: {m: c.to_string() for m, c in sorted(mechs.items())}
            for u, mechs in sorted(self._users.items())}}
        write_atomically(self._path, json.dumps(data, indent=1))
        os.chmod(self._path, 0o600)
