"""MarkerWriter: the partition leader's side of WriteTxnMarkers (Kafka's
handleWriteTxnMarkersRequest): write a transaction's COMMIT or ABORT marker to each
partition this broker leads, acks=all, and answer an error code per partition.

A marker is a control batch of the producer's id and epoch with the coordinator's epoch
(records/control_record.py), appended with origin COORDINATOR, so the producer state
checks it (INVALID_PRODUCER_EPOCH for a fenced epoch, TRANSACTION_COORDINATOR_FENCED for a
zombie coordinator) and ends the producer's transaction on the partition. A partition not
led here is NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION (the
coordinator retries both after the metadata changes). Once the markers of
__consumer_offsets partitions are written, the group coordinator makes the transaction's
offsets committed (or drops them).

The transaction coordinator calls it directly for the partitions this broker leads; the
WriteTxnMarkers API calls it for another broker's coordinator.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio

from kbroker.cluster.delayed_produce import PartitionAppendResult
from kbroker.cluster.replica_manager import ReplicaManager
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kbroker.records.control_record import end_txn_marker
from kbroker.storage.producer_state import AppendOrigin
from kbroker.utils.time import Time


class MarkerWriter:
    def __init__(self, replica_manager: ReplicaManager, group_coordinator: GroupCoordinator, time: Time,
                 timeout_s: float = 30.0) -> None:
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.time = time
        self.timeout_s = timeout_s

    async def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Append the marker to each partition and wait until it is replicated (acks=all,
        through the ReplicaManager as a Produce is)."""
        marker = end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, self.time.milliseconds())
        done: asyncio.Future[list[PartitionAppendResult]] = asyncio.get_running_loop().create_future()

        def answered(results: list[PartitionAppendResult]) -> None:
            if not done.done():
                done.set_result(results)
        self.replica_manager.append_records(int(self.timeout_s * 1000), -1, AppendOrigin.COORDINATOR,
                                            [(tp, marker) for tp in partitions], answered)
        errors = {tp: result.error_code for tp, result in zip(partitions, await done, strict=True)}
        offsets = [tp.partition for tp, code in errors.items()
                   if tp.topic == GROUP_METADATA_TOPIC_NAME and code == ErrorCode.NONE]
        if offsets:
            self.group_coordinator.on_transaction_completed(producer_id, offsets, commit)
        return errors
