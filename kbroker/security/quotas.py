"""Client quotas as Kafka's ClientQuotaManager keeps and enforces them.

Entities: a user, a client id, or both; a name of None is the entity's default
(`<default>`). Keys: producer_byte_rate and consumer_byte_rate (bytes per second of
Produce requests and Fetch responses), request_percentage (handler time per quota
window, 100 = one thread: the broker's one event loop). The quota that applies to a
request is the first set, in Kafka's order, of

    user+client-id, user+<default> client, user, <default> user+client-id,
    <default> user+<default> client, <default> user, client-id, <default> client-id

and everything matching that same entity shares one rate. The rate is Kafka's Rate
over quota.window.num (11) windows of quota.window.size.seconds (1 s), Kafka's keys; a request that
takes it over the quota gets throttle_time_ms = (rate - quota) / quota x the measured
window (at most the quota.window.num windows), reported in its response, and its
connection is not read for that long (Kafka's channel muting, KIP-219).

Storage, single broker: `kbroker-client-quotas.json` in the first log dir (Kafka keeps
them in ZooKeeper's /config/users and /config/clients, or its metadata log):

    {"version": 1, "quotas": [{"entity": {"user": "alice", "client-id": null},
                               "values": {"producer_byte_rate": 1048576.0}}]}

Cluster mode: ZooKeeper, as Kafka's ZooKeeper mode keeps them (`persist`, given by the
wiring: ZkBroker.persist_client_quotas; /config/users/<user>, /config/clients/<client-id>,
/config/users/<user>/clients/<client-id>, `<default>` for a default, with a change
notification under /config/changes); every broker enforces them, the changes other
brokers make arriving through `set_entity`. Each broker measures the rates of the
requests it serves, as Kafka's brokers do (a quota is per broker).

Loop thread only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from kbroker.utils.atomic_file import write_atomically

QUOTAS_FILE = "kbroker-client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
QUOTA_KEYS = frozenset({PRODUCE, FETCH, REQUEST})
# The order Kafka's DescribeClientQuotas / AlterClientQuotas answers list an entity's parts
# and its values in: its ClientQuotaEntity and ClientQuotaImage keep them in
# java.util.HashMaps (ClientQuotaImage.dataToEntity, ClientQuotaDelta.apply), whose
# iteration order for these keys is this one; clients compare the lists as they come.
ENTITY_TYPE_ORDER = (IP, CLIENT_ID, USER)
QUOTA_KEY_ORDER = (FETCH, REQUEST, PRODUCE)


def kafka_rank(name: str, order: tuple[str, ...]) -> int:
    """Where `name` comes in Kafka's answer `order`; names it does not know last (sort
    stably to keep them as given)."""
    return order.index(name) if name in order else len(order)


def in_kafka_order(names: Iterable[str], order: tuple[str, ...]) -> list[str]:
    return sorted(names, key=lambda n: kafka_rank(n, order))

# an entity: (user, client id); each part None (not part of it), DEFAULT (its default) or a name
DEFAULT = "<default>"
Entity = tuple[str | None, str | None]


def quota_string(key: str, value: float) -> str:
    """A quota as Kafka writes it to ZooKeeper: the byte rates are longs ("1024"),
    request_percentage a double ("50.0")."""
    if key != REQUEST and value == int(value):
        return str(int(value))
    return repr(float(value))


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config in ZooKeeper (others, e.g. SCRAM credentials,
    and values that are not numbers are left out)."""
    out = {}
    for key in QUOTA_KEYS & config.keys():
        try:
            out[key] = float(config[key])
        except ValueError:
            continue
    return out


# cluster mode: (entity, its changes) -> the entity's quota values once written
Persist = Callable[[Entity, Mapping[str, "float | None"]], Awaitable[Mapping[str, float]]]


def _precedence(user: str, client: str) -> list[Entity]:
    return [(user, client), (user, DEFAULT), (user, None), (DEFAULT, client), (DEFAULT, DEFAULT),
            (DEFAULT, None), (None, client), (None, DEFAULT)]


class Rate:
    """Kafka's Rate of a SampledStat: the sum of the last `windows` windows of `window_ms`
    over the time they span (at least windows - 1 whole windows)."""

    __slots__ = ("_starts", "_sums", "_window_ms", "_windows")

    def __init__(self, window_ms: int = 1000, windows: int = 11) -> None:
        self._starts: list[int] = []
        self._sums: list[float] = []
        self._window_ms = window_ms
        self._windows = windows

    def record(self, value: float, now_ms: int) -> None:
        self._expire(now_ms)
        if not self._starts or now_ms >= self._starts[-1] + self._window_ms:
            self._starts.append(now_ms)
            self._sums.append(0.0)
            if len(self._starts) > self._windows:
                del self._starts[0], self._sums[0]
        self._sums[-1] += value

    def window_ms(self, now_ms: int) -> int:
        self._expire(now_ms)
        elapsed = now_ms - self._starts[0] if self._starts else 0
        full = elapsed // self._window_ms
        if full < self._windows - 1:
            elapsed += (self._windows - 1 - full) * self._window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_ms(now_ms)  # expires old windows first
        return sum(self._sums) * 1000.0 / window

    def _expire(self, now_ms: int) -> None:
        while self._starts and now_ms - self._starts[0] >= self._windows * self._window_ms:
            del self._starts[0], self._sums[0]


@dataclass(frozen=True)
class QuotaEntry:
    entity: Entity
    values: Mapping[str, float]


class ClientQuotas:
    """The configured quotas and the rates measured against them."""

    def __init__(self, path: str | None, window_ms: int = 1000, windows: int = 11,
                 persist: Persist | None = None) -> None:
        self._path = path
        self._window_ms, self._windows = window_ms, windows
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, Entity], Rate] = {}
        self.persist = persist  # cluster mode: the writer to ZooKeeper
        if path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for item in json.load(f).get("quotas") or []:
                    e = item["entity"]
                    self._quotas[(e.get(USER), e.get(CLIENT_ID))] = {
                        k: float(v) for k, v in item["values"].items()}

    @property
    def active(self) -> bool:
        return bool(self._quotas)

    def entries(self) -> list[QuotaEntry]:
        return [QuotaEntry(e, dict(v)) for e, v in self._quotas.items()]

    def alter(self, changes: Iterable[tuple[Entity, Mapping[str, float | None]]]) -> None:
        new = {e: dict(v) for e, v in self._quotas.items()}
        for entity, ops in changes:
            values = new.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del new[entity]
        if self._path is not None:
            write_atomically(self._path, json.dumps({"version": 1, "quotas": [
                {"entity": {USER: e[0], CLIENT_ID: e[1]}, "values": v} for e, v in new.items()]},
                indent=1))
        self._quotas = new
        self._rates.clear()  # a changed quota starts measuring afresh, as a new sensor would

    async def apply(self, changes: Iterable[tuple[Entity, Mapping[str, float | None]]]) -> None:
        """alter(), through `persist` first in cluster mode."""
        if self.persist is None:
            self.alter(changes)
            return
        for entity, ops in changes:
            self.set_entity(entity, await self.persist(entity, ops))

    def set_entity(self, entity: Entity, values: Mapping[str, float]) -> None:
        """An entity's quotas as they are now (cluster mode: read from ZooKeeper)."""
        values = {k: float(v) for k, v in values.items() if k in QUOTA_KEYS}
        if self._quotas.get(entity, {}) == values:
            return
        if values:
            self._quotas[entity] = values
        else:
            self._quotas.pop(entity, None)
        # the entity's quota changed: its rates start afresh, as a new sensor would
        self._rates = {k: r for k, r in self._rates.items() if k[1] != entity}

    def quota(self, user: str, client: str, key: str) -> tuple[float, Entity] | None:
        for entity in _precedence(user, client):
            value = self._quotas.get(entity, {}).get(key)
            if value is not None:
                return value, entity
        return None

    def record(self, user: str, client: str, key: str, value: float, now_ms: int) -> int:
        """Count `value` against the quota that applies; the throttle time in ms (0: none)."""
        found = self.quota(user, client, key)
        if found is None:
            return 0
        quota, entity = found
        rate = self._rates.get((key, entity))
        if rate is None:
            rate = self._rates[(key, entity)] = Rate(self._window_ms, self._windows)
        rate.record(value, now_ms)
        observed = rate.rate(now_ms)
        if key == REQUEST:
            observed = observed / 10.0  # ms of handler time per second -> percent of one thread
        if observed <= quota or quota <= 0:
            return 0
        throttle = (observed - quota) / quota * rate.window_ms(now_ms)
        return int(min(throttle, self._window_ms * self._windows))  # at most the whole window
