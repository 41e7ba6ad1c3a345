"""Producer ids in a cluster: blocks claimed in ZooKeeper (Kafka's ZkProducerIdManager), so
that no two brokers ever hand out the same id.

/latest_producer_id_block holds the last block claimed by any broker
({"version":1,"broker":1,"block_start":"1000","block_end":"1999"}, inclusive end). A
broker claims the next block with a version-checked write and retries when another
broker claimed one meanwhile; ids are handed out from its block until it runs out.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kbroker.cluster import zk_data

if TYPE_CHECKING:
    from kbroker.cluster.zk_client import ZooKeeperClient

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000


class ZkProducerIdManager:
    def __init__(self, broker_id: int, zk: ZooKeeperClient) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.next_id = 0
        self.block_end = -1  # inclusive; next_id > block_end: a new block is needed
        self._issued: list[tuple[int, int]] = []  # blocks this broker claimed
        self._lock = asyncio.Lock()

    def issued(self, producer_id: int) -> bool:
        """Whether this broker handed out `producer_id` (an epoch bump of one of ours)."""
        return any(start <= producer_id < min(end + 1, self.next_id) for start, end in self._issued)

    async def generate(self) -> int:
        async with self._lock:
            if self.next_id > self.block_end:
                await self._claim_block()
            pid = self.next_id
            self.next_id += 1
            return pid

    async def _claim_block(self) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError

        path = zk_data.PRODUCER_ID_BLOCK_PATH
        while True:
            found = await self.zk.get(path)
            current = zk_data.decode_producer_id_block(found[0]) if found is not None else None
            start = current[1] + 1 if current is not None else 0
            end = start + PRODUCER_ID_BLOCK_SIZE - 1
            data = zk_data.encode_producer_id_block(self.broker_id, start, end)
            try:
                if found is None:
                    await self.zk.create(path, data, makepath=True)
                else:
                    await self.zk.set(path, data, found[1].version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed a block meanwhile
            self.next_id, self.block_end = start, end
            self._issued.append((start, end))
            log.info("claimed producer id block %d-%d", start, end)
            return
