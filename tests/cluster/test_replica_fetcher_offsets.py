"""A new follower of a leader whose log starts above 2^31 (and 2^32): the fetcher's answer
handling on a real log. The leader answers the follower's fetch at 0 with
OFFSET_OUT_OF_RANGE and its log start offset, the follower starts its log over there,
and the leader's batches from that offset on are appended and read back (Kafka's
offsets are 64-bit; only a segment's index entries are relative to its base)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from batches import decode_batches, values_batch

from kbroker.cluster.partition import Partition, PartitionState
from kbroker.cluster.replica_fetcher import (
    FetcherConfig,
    FetchState,
    ReplicaFetcher,
    ReplicaFetcherManager,
)
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.fetch import FetchResponse
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime

TP = TopicPartition("t", 0)
LEADER, EPOCH = 2, 4


def answer(error_code: int, log_start: int, high_watermark: int, records: bytes | None = None
           ) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(partition_index=TP.partition, error_code=error_code,
                                       high_watermark=high_watermark, last_stable_offset=high_watermark,
                                       log_start_offset=log_start, records=records)


@pytest.mark.parametrize("leader_start", [(1 << 31) + 10, (1 << 32) + 10], ids=["2^31+10", "2^32+10"])
def test_a_new_follower_copies_a_log_that_starts_above_int32(tmp_path: Path, leader_start: int) -> None:
    manager = LogManager([str(tmp_path)], LogConfig(segment_bytes=8192, index_interval_bytes=256),
                         MockTime(), recovery_threads=1)
    manager.startup()
    try:
        log = manager.get_or_create_log(TP, uuid.uuid4())
        partition = Partition(TP, 1, log, lambda: 0)
        partition.make_follower(PartitionState(LEADER, EPOCH, (LEADER, 1), (LEADER, 1)))
        fetched = [b"".join(values_batch(20, base_offset=leader_start + 200 * f + 20 * i,
                                         partition_leader_epoch=EPOCH) for i in range(10))
                   for f in range(3)]  # three fetches of 200 records: segments roll on the way

        async def follow() -> None:
            fetcher = ReplicaFetcher(ReplicaFetcherManager(1, FetcherConfig(), lambda _: None), LEADER, 0)
            fetcher.stop()  # no fetch loop: the leader's answers are handed to it below
            state = FetchState(partition, EPOCH)
            fetcher._process(state, answer(ErrorCode.OFFSET_OUT_OF_RANGE, leader_start, leader_start + 600))
            assert (log.log_start_offset, log.log_end_offset) == (leader_start, leader_start)
            state.truncating = False  # (the epoch check that comes next finds nothing to truncate)
            for records in fetched:
                fetcher._process(state, answer(ErrorCode.NONE, leader_start, leader_start + 600, records))
                assert not state.truncating, "the leader's batches were refused"

        asyncio.run(follow())
        assert (log.log_end_offset, log.high_watermark) == (leader_start + 600, leader_start + 600)
        assert log.latest_epoch == EPOCH and len(log.segments) > 1
        for seg in log.segments:
            assert seg.next_offset - 1 - seg.base_offset <= 0x7FFFFFFF
        for offset in (leader_start, leader_start + 299, leader_start + 599):
            data = log.read(offset, 1 << 16).records
            assert data is not None
            assert offset in [r[0] for b in decode_batches(data.read_bytes()) for r in b[2]]
    finally:
        manager.shutdown()
