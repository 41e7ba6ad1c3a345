"""Kafka's ZooKeeper layout and the JSON of each znode, as Kafka 3.x's ZooKeeper mode
writes them (kafka.zk.ZkData), so that Kafka's own tools would read a kbroker cluster's
ZooKeeper and the other way round. Paths are below the chroot of `zookeeper.connect`.

    /cluster/id                                  {"version":"1","id":"<cluster id>"}
    /controller (ephemeral)                      {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                            "3"  (an integer as text; its zk version
                                                 guards every controller write)
    /brokers/ids/<id> (ephemeral)                {"version":5,"host":"h","port":9092,
                                                  "endpoints":["PLAINTEXT://h:9092"],
                                                  "listener_security_protocol_map":{...},
                                                  "rack":"r1"|null,"jmx_port":-1,
                                                  "timestamp":"<ms>","features":{}}
                                                 (its creation zxid is the broker epoch)
    /brokers/topics/<topic>                      {"version":3,"topic_id":"<base64 uuid>",
                                                  "partitions":{"0":[1,2,3],...},
                                                  "adding_replicas":{"0":[3]},
                                                  "removing_replicas":{"0":[1]}}
    /brokers/topics/<topic>/partitions/<p>/state {"version":1,"controller_epoch":1,"leader":1,
                                                  "leader_epoch":0,"isr":[1,2,3],
                                                  "leader_recovery_state":0}
    /config/topics/<topic>                       {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id> and /config/brokers/<default>   the same shape, dynamic broker configs
    /config/client-metrics/<name>                the same shape, a client metrics subscription
    /config/groups/<group id>                    the same shape, a group's configs (GROUP
                                                 resource: share.auto.offset.reset, ...)
    /config/changes/config_change_<seq>          {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>                 (empty: a deletion the controller carries out)
    /admin/reassign_partitions                   {"version":1,"partitions":[{"topic":"t",
                                                  "partition":0,"replicas":[1,2]}]}
    /admin/preferred_replica_election            {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /latest_producer_id_block                    {"version":1,"broker":1,"block_start":"0",
                                                  "block_end":"999"}

Topic ids are written as Kafka's Uuid.toString (kbroker.common.kafka_uuid).
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kbroker.common.kafka_uuid import uuid_from_base64, uuid_to_base64

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
# client metrics subscriptions (KIP-714): /config/client-metrics/<name, sanitized>
CLIENT_METRICS_ENTITY = "client-metrics"
# group configs (KIP-932's GROUP config resource): /config/groups/<group id, sanitized>
GROUP_ENTITY = "groups"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
DEFAULT_BROKER_ENTITY = "<default>"

# Created at startup by every broker (Kafka's ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
    "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
    "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
    "/config/brokers", "/config/ips",
)

NO_LEADER = -1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def config_path(entity_type: str, name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{name}"


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(data: bytes | None) -> dict[str, object]:
    if not data:
        return {}
    value = json.loads(data.decode())
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {data[:80]!r}")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _list(value: object) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {value!r}")
    return value


def _dict(value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, got {value!r}")
    return value


def _ints(value: object) -> list[int]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list of integers, got {value!r}")
    return [_int(v) for v in value]


# -- /brokers/ids/<id>


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)
    rack: str | None
    epoch: int = -1  # the znode's creation zxid, filled in when read
    protocols: tuple[tuple[str, str], ...] = ()  # (listener name, security protocol)

    def protocol(self, listener: str) -> str:
        return dict(self.protocols).get(listener, "PLAINTEXT")

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None

    def encode(self, timestamp_ms: int) -> bytes:
        first = self.endpoints[0] if self.endpoints else ("PLAINTEXT", "", -1)
        return _dump({
            "features": {},
            "listener_security_protocol_map": {name: self.protocol(name)
                                               for name, _h, _p in self.endpoints},
            "endpoints": [f"{name}://{host}:{port}" for name, host, port in self.endpoints],
            "jmx_port": -1,
            "port": first[2],
            "host": first[1],
            "version": 5,
            "timestamp": str(timestamp_ms),
            "rack": self.rack,
        })

    @classmethod
    def decode(cls, broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
        d = _load(data)
        endpoints = []
        for text in _list(d.get("endpoints")):
            name, _, rest = str(text).partition("://")
            host, _, port = rest.rpartition(":")
            endpoints.append((name.upper(), host.strip("[]"), int(port)))
        rack = d.get("rack")
        protocols = tuple((str(k).upper(), str(v)) for k, v in
                          _dict(d.get("listener_security_protocol_map")).items())
        return cls(broker_id, tuple(endpoints), str(rack) if rack is not None else None, epoch,
                   protocols)


# -- /controller


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    """The controller's broker id; -1 when the znode is absent or unreadable."""
    try:
        return _int(_load(data).get("brokerid", -1))
    except ValueError:
        return -1


# -- /brokers/topics/<topic>


@dataclass
class TopicAssignment:
    """A topic's id and each partition's replicas (the first is the preferred leader),
    with an ongoing reassignment's adding and removing replicas."""

    topic: str
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def by_partition(m: Mapping[int, list[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        return _dump({
            "version": 3,
            "topic_id": uuid_to_base64(self.topic_id),
            "partitions": by_partition(self.partitions),
            "adding_replicas": by_partition(self.adding),
            "removing_replicas": by_partition(self.removing),
        })

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        d = _load(data)

        def by_partition(key: str) -> dict[int, list[int]]:
            raw = d.get(key) or {}
            if not isinstance(raw, dict):
                raise ValueError(f"{key}: expected an object")
            return {int(p): _ints(r) for p, r in raw.items()}

        tid = d.get("topic_id")
        topic_id = uuid_from_base64(str(tid)) if tid else uuid.uuid4()
        return cls(topic, topic_id, by_partition("partitions"), by_partition("adding_replicas"),
                   by_partition("removing_replicas"))


# -- /brokers/topics/<topic>/partitions/<p>/state


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR as the controller last wrote them;
    `zk_version` is the znode's version (Kafka's partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0

    def encode(self) -> bytes:
        return _dump({
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "leader_recovery_state": 0,
        })

    @classmethod
    def decode(cls, data: bytes, zk_version: int) -> LeaderAndIsr:
        d = _load(data)
        return cls(_int(d["leader"]), _int(d["leader_epoch"]), tuple(_ints(d["isr"])),
                   _int(d["controller_epoch"]), zk_version)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int], controller_epoch: int) -> LeaderAndIsr:
        """The next state: leader epoch + 1 (every change in ZooKeeper mode bumps it)."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), controller_epoch, self.zk_version)


# -- /config/<type>/<name>


def encode_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(data: bytes | None) -> dict[str, str]:
    raw = _load(data).get("config") or {}
    if not isinstance(raw, dict):
        raise ValueError("config: expected an object")
    return {str(k): str(v) for k, v in raw.items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes | None) -> tuple[str, str] | None:
    path = str(_load(data).get("entity_path") or "")
    entity_type, sep, name = path.partition("/")
    return (entity_type, name) if sep else None


# -- client quota entities: /config/users/<user>, /config/clients/<client-id>,
# /config/users/<user>/clients/<client-id> (Kafka's ConfigEntityName.Default, `<default>`,
# for a default)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a znode name (URL-encoded,
    '*' as %2A and ' ' as %20, '~' kept); `<default>` is not an entity name but the
    default, and stays."""
    if name == DEFAULT_BROKER_ENTITY:
        return name
    return urllib.parse.quote(name, safe="")


def desanitize(name: str) -> str:
    return name if name == DEFAULT_BROKER_ENTITY else urllib.parse.unquote(name)


def quota_entity_path(user: str | None, client: str | None) -> tuple[str, str]:
    """(entity type, entity name) of a quota entity (None: not part of it)."""
    if user is not None and client is not None:
        return "users", f"{sanitize(user)}/clients/{sanitize(client)}"
    if user is not None:
        return "users", sanitize(user)
    if client is not None:
        return "clients", sanitize(client)
    raise ValueError("a quota entity has a user, a client id or both")


def quota_entity(entity_type: str, name: str) -> tuple[str | None, str | None] | None:
    """The (user, client id) an entity path names; None when it is not a quota entity."""
    if entity_type == "clients" and "/" not in name:
        return None, desanitize(name)
    if entity_type != "users":
        return None
    user, sep, client = name.partition("/clients/")
    if "/" in user or "/" in client:
        return None
    return desanitize(user), (desanitize(client) if sep else None)


# -- /admin/reassign_partitions and /admin/preferred_replica_election


def encode_reassignment(moves: Mapping[tuple[str, int], list[int]]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())]})


def decode_reassignment(data: bytes | None) -> dict[tuple[str, int], list[int]]:
    out = {}
    for raw in _list(_load(data).get("partitions")):
        item = _dict(raw)
        out[(str(item["topic"]), _int(item["partition"]))] = _ints(item["replicas"])
    return out


def decode_partition_list(data: bytes | None) -> list[tuple[str, int]]:
    return [(str(_dict(i)["topic"]), _int(_dict(i)["partition"]))
            for i in _list(_load(data).get("partitions"))]


# -- /latest_producer_id_block


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int] | None:
    d = _load(data)
    if not d:
        return None
    return _int(d["block_start"]), _int(d["block_end"])


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return str(_load(data)["id"])
