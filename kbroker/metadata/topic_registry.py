"""The broker's topic metadata: names, topic ids, partition counts, config overrides.

Persisted as JSON in the first log dir, replaced atomically (write a temp file,
fsync, rename, fsync the directory), so a crash leaves either the old or the
new registry, never a torn one:

    <log.dirs[0]>/kbroker-topics.json
    {"version": 1,
     "topics": [{"name": "orders", "topic_id": "<uuid>", "partitions": 3,
                 "configs": {"retention.ms": "60000"}}, ...]}

The topic id here is the one storage writes into each partition's
`partition.metadata`; the registry is the source of truth and storage is told
the id when a partition log is created.

Locking: the registry is used from the broker's event-loop thread only.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from kbroker.utils.atomic_file import write_atomically

REGISTRY_FILE = "kbroker-topics.json"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class InvalidTopicError(ValueError):
    """The name breaks Kafka's topic naming rules (INVALID_TOPIC_EXCEPTION)."""


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate: [a-zA-Z0-9._-]{1,249}, not "." or ".."."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(sorted(self.configs.items())),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> TopicInfo:
        configs = d.get("configs") or {}
        assert isinstance(configs, dict)
        return cls(
            name=str(d["name"]),
            topic_id=uuid.UUID(str(d["topic_id"])),
            partitions=int(str(d["partitions"])),
            configs={str(k): str(v) for k, v in configs.items()},
        )


class TopicRegistry:
    """All topics by name and by id. Mutations persist before they return."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    # -- reads

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    # -- mutations

    def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self._by_name:
            raise KeyError(name)
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        info = TopicInfo(name, topic_id or _new_topic_id(self._by_id), partitions, dict(configs or {}))
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        self._save_or_undo(lambda: self.forget(name))
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.forget(name)
        self._save_or_undo(lambda: self.adopt_in_memory(info))
        return info

    def forget(self, name: str) -> TopicInfo:
        """Drop the topic from memory only (undoing a creation that failed)."""
        info = self._by_name.pop(name)
        self._by_id.pop(info.topic_id, None)
        return info

    def adopt_in_memory(self, info: TopicInfo) -> None:
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def set_partitions(self, name: str, partitions: int) -> TopicInfo:
        info = self._by_name[name]
        if partitions < info.partitions:
            raise ValueError("partition count can only grow")
        old, info.partitions = info.partitions, partitions
        self._save_or_undo(lambda: setattr(info, "partitions", old))
        return info

    def set_partitions_in_memory(self, name: str, partitions: int) -> None:
        self._by_name[name].partitions = partitions

    def _save_or_undo(self, undo: Callable[[], object]) -> None:
        """Persist a change made in memory; if the file cannot be written, undo the change
        in memory too, so memory and disk never disagree."""
        try:
            self.save()
        except BaseException:
            undo()
            raise

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace the topic's config overrides."""
        info = self._by_name[name]
        info.configs = dict(configs)
        self.save()
        return info

    def adopt(self, info: TopicInfo) -> None:
        """Register a topic found on disk but missing here (registry lost); persists."""
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info
        self.save()

    # -- persistence

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return
        for d in doc.get("topics", []):
            info = TopicInfo.from_json(d)
            self._by_name[info.name] = info
            self._by_id[info.topic_id] = info

    def save(self) -> None:
        doc = {"version": 1, "topics": [t.to_json() for t in sorted(self, key=lambda t: t.name)]}
        write_atomically(self.path, json.dumps(doc, indent=1).encode() + b"\n")


def _new_topic_id(taken: Mapping[uuid.UUID, object]) -> uuid.UUID:
    # Kafka never hands out the zero UUID (Uuid.ZERO_UUID means "no id") nor one
    # whose base64 starts with '-' (METADATA_TOPIC_ID and friends are reserved).
    while True:
        tid = uuid.uuid4()
        if tid.int != 0 and tid not in taken:
            return tid

