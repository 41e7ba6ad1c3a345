"""TopicDeletionManager: deletes the topics /admin/delete_topics names (Kafka's
TopicDeletionManager, ZooKeeper mode).

For each topic named there: unknown, or delete.topic.enable false: the request znode is
removed and nothing else. A topic with a reassignment in progress waits (Kafka finishes
the reassignment first). Otherwise: UpdateMetadata to every broker marking its
partitions deleted (leader -2, with the topic id), StopReplica(delete) to each replica,
its znodes removed in one multi guarded by the controller epoch (one by one when some
were missing), then its config and request znodes; it leaves the context.

Owns: nothing of its own; it changes the context's assignments and states of the topics
it deletes. Lock: the controller's event processing (one event at a time, on the loop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from kbroker.cluster import zk_data
from kbroker.cluster.controller.channel_manager import ControllerChannels, RequestBatch
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.controller.kafka_zk_client import KafkaZkClient, delete_quietly
from kbroker.cluster.controller.partition_state_machine import (
    ControllerMovedError,
    PartitionStateMachine,
)

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, states: PartitionStateMachine,
                 channels: ControllerChannels, delete_enabled: Callable[[], bool],
                 on_deleted: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.states = states
        self.channels = channels
        self._delete_enabled = delete_enabled  # delete.topic.enable
        self._on_deleted = on_deleted  # the controller forgets the topic's watch

    async def process(self) -> None:
        """Delete what /admin/delete_topics asks for (see the module docstring)."""
        ctx = self.ctx
        for topic in await self.zk.get_children(zk_data.DELETE_TOPICS_PATH):
            if topic not in ctx.assignments or not self._delete_enabled():
                await delete_quietly(self.zk, f"{zk_data.DELETE_TOPICS_PATH}/{topic}")
                continue
            if any(tp.topic == topic for tp in ctx.reassigning()):
                continue  # Kafka waits for a reassignment to finish first
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        ctx = self.ctx
        tps = ctx.partitions_of(topic)
        assignment = ctx.assignments[topic]
        batch = RequestBatch(ctx)
        ctx.deleted_topic_ids[topic] = assignment.topic_id
        batch.add_deleted(tps)
        for tp in tps:
            for r in ctx.replicas(tp):
                batch.add_stop_replica(r, tp, delete=True)
        paths = []
        for tp in tps:
            base = f"{zk_data.partitions_path(topic)}/{tp.partition}"
            if tp in ctx.states:
                paths.append(f"{base}/state")
            paths.append(base)
        ops: list[tuple[Any, ...]] = [self.states.check_epoch()]
        for path in paths + [zk_data.partitions_path(topic), zk_data.topic_path(topic)]:
            ops.append(("delete", path, -1))
        try:
            await self.zk.multi(ops)
        except NoNodeError:  # some znode was missing: remove what is there, one by one
            await self.zk.delete_recursive(zk_data.topic_path(topic))
        except BadVersionError:
            raise ControllerMovedError() from None
        await delete_quietly(self.zk, zk_data.config_path("topics", topic))
        await delete_quietly(self.zk, f"{zk_data.DELETE_TOPICS_PATH}/{topic}")
        for tp in tps:
            ctx.states.pop(tp, None)
        del ctx.assignments[topic]
        self._on_deleted(topic)
        batch.send(self.channels)
        ctx.deleted_topic_ids.pop(topic, None)
        log.info("controller: deleted topic %s", topic)
