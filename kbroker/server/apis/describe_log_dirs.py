"""DescribeLogDirs (key 35), v0-5: this broker's log dirs and the replicas each holds, with
their size on disk, (v4) the dir's total and usable bytes and (v5, KIP-1066) whether it is
cordoned, never: kbroker has no cordoned log dirs; a replica being moved into
a dir (AlterReplicaLogDirs) appears there as a future replica with its lag. An offline dir answers
KAFKA_STORAGE_ERROR with no topics. Null topics: every replica.
"""

from __future__ import annotations

import os

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kbroker.server.request_context import RequestContext

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
Partition = DescribeLogDirsResponse.DescribeLogDirsPartition


def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    manager = ctx.services.log_manager
    wanted = None if request.topics is None else {
        (t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    for d in manager.log_dirs:
        if manager.failures.is_offline(d):
            results.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d, topics=[],
                                  total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list[Partition]] = {}
        for tp, plog in sorted(manager.all_logs().items()):
            if manager.dir_of(tp) != d or (wanted is not None and (tp.topic, tp.partition) not in wanted):
                continue
            lag = max(plog.high_watermark - plog.log_end_offset, 0)
            by_topic.setdefault(tp.topic, []).append(Partition(
                partition_index=tp.partition, partition_size=plog.size_in_bytes, offset_lag=lag,
                is_future_key=False))
        for tp, move in sorted(manager.moves.items()):
            if move.target_dir != d or (wanted is not None and (tp.topic, tp.partition) not in wanted):
                continue
            lag = max(move.source.log_end_offset - move.future.log_end_offset, 0)
            by_topic.setdefault(tp.topic, []).append(Partition(
                partition_index=tp.partition, partition_size=move.future.size_in_bytes,
                offset_lag=lag, is_future_key=True))
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        results.append(Result(error_code=ErrorCode.NONE, log_dir=d,
                              topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
                              total_bytes=total, usable_bytes=usable))
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)


def error_response(request: DescribeLogDirsRequest, version: int, code: int) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(error_code=code, results=[])
