"""Whether a partition may be reassigned to a target replica list (Kafka 3.9's
KafkaController.validateReplicas, ZooKeeper mode): the list must be non-empty, without
duplicates or negative ids, and the replicas it adds (those not already among the
partition's original replicas) must be on live brokers. Replicas it keeps need not
be alive. The controller and a single broker (whose one replica is its own id) both
ask here, so a target equal to the current replicas is accepted: a reassignment that
moves nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kbroker.common.error_code import ErrorCode


def target_error(target: Sequence[int], original: Sequence[int], live: Collection[int],
                 allow_replication_factor_change: bool = True) -> tuple[int, str] | None:
    """(error code, message) when `target` may not replace `original`, else None.
    AlterPartitionReassignments v1 (Kafka 4.0) may forbid a target whose size differs from
    the original replicas' (INVALID_REPLICATION_FACTOR, as ReplicationControlManager's
    changePartitionReassignment)."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
            "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(r < 0 for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}"
    if not allow_replication_factor_change and len(target) != len(original):
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            f"The replication factor is changed from {len(original)} to {len(target)}")
    adding = [r for r in target if r not in original]
    if any(r not in live for r in adding):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
            f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
            f"live broker list: {sorted(live)}")
    return None
