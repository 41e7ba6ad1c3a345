"""Topic and config changes written to ZooKeeper (Kafka's AdminZkClient). Any broker may
write them; the controller notices through its watches and carries them out:

  create a topic      /config/topics/<t> first (so the config is there when replicas
                      create their logs), then /brokers/topics/<t> with the assignment
  add partitions      /brokers/topics/<t> rewritten with the new partitions (version-checked)
  delete a topic      /admin/delete_topics/<t>
  change configs      /config/<type>/<name>, then a sequential /config/changes/config_change_
                      notification naming it (every broker watches those)

Lock: the broker's event-loop thread (coroutines over the ZooKeeper client).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kbroker.cluster import zk_data
from kbroker.cluster.zk_client import ZooKeeperClient
from kbroker.cluster.zk_data import TopicAssignment
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError

CONFIG_UPDATE_RETRIES = 10


class AdminZkClient:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    async def topic_exists(self, topic: str) -> bool:
        return await self.zk.exists(zk_data.topic_path(topic)) is not None

    async def create_topic(self, topic: str, assignment: Mapping[int, list[int]],
                           config: Mapping[str, str], topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Write the topic's config and assignment. TOPIC_ALREADY_EXISTS when it exists."""
        if await self.topic_exists(topic):
            raise KafkaError(f"Topic '{topic}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
        topic_id = topic_id or uuid.uuid4()
        path = zk_data.config_path("topics", topic)
        data = zk_data.encode_config(config)
        try:
            await self.zk.create(path, data, makepath=True)
        except NodeExistsError:
            await self.zk.set(path, data)
        record = TopicAssignment(topic, topic_id, {p: list(r) for p, r in assignment.items()})
        try:
            await self.zk.create(zk_data.topic_path(topic), record.encode(), makepath=True)
        except NodeExistsError:
            raise KafkaError(f"Topic '{topic}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS) from None
        return topic_id

    async def read_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        found = await self.zk.get(zk_data.topic_path(topic))
        if found is None:
            return None
        return TopicAssignment.decode(topic, found[0]), found[1].version

    async def add_partitions(self, topic: str, new: Mapping[int, list[int]]) -> None:
        found = await self.read_assignment(topic)
        if found is None:
            raise KafkaError(f"Topic '{topic}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        assignment, version = found
        assignment.partitions.update({p: list(r) for p, r in new.items()})
        try:
            await self.zk.set(zk_data.topic_path(topic), assignment.encode(), version)
        except Exception as e:
            raise KafkaError(f"adding partitions to {topic} raced another change: {e}",
                             ErrorCode.REASSIGNMENT_IN_PROGRESS) from e

    async def delete_topic(self, topic: str) -> None:
        try:
            await self.zk.create(f"{zk_data.DELETE_TOPICS_PATH}/{topic}", b"", makepath=True)
        except NodeExistsError:
            pass  # already marked for deletion

    async def read_config(self, entity_type: str, name: str) -> dict[str, str]:
        found = await self.zk.get(zk_data.config_path(entity_type, name))
        return zk_data.decode_config(found[0]) if found is not None else {}

    async def change_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        path = zk_data.config_path(entity_type, name)
        data = zk_data.encode_config(config)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)
        await self.zk.create(f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
                             zk_data.encode_config_change(entity_type, name), sequence=True,
                             makepath=True)

    async def update_config(self, entity_type: str, name: str,
                            change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
        """Read an entity's config, change it and write it back on the version read (a
        concurrent writer of the same node, e.g. a SCRAM credential and a quota of one
        user through two brokers, makes it read again and retry), then notify; the new
        config."""
        path = zk_data.config_path(entity_type, name)
        for _attempt in range(CONFIG_UPDATE_RETRIES):
            found = await self.zk.get(path)
            current = zk_data.decode_config(found[0]) if found is not None else {}
            new = change(dict(current))
            try:
                if found is None:
                    await self.zk.create(path, zk_data.encode_config(new), makepath=True)
                else:
                    await self.zk.set(path, zk_data.encode_config(new), found[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                await asyncio.sleep(0.05)
                continue
            await self.zk.create(f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
                                 zk_data.encode_config_change(entity_type, name), sequence=True,
                                 makepath=True)
            return new
        raise KafkaError(f"{path} kept changing under {CONFIG_UPDATE_RETRIES} attempts to update it",
                         ErrorCode.UNKNOWN_SERVER_ERROR)
