"""ShareGroupOffsets' arithmetic and the groups a restart brings back (the wire behaviour is
tests/integration/test_share_group_admin_wire.py)."""

from __future__ import annotations

from kbroker.coordinator.share_group import ShareGroupConfig, ShareGroupCoordinator
from kbroker.coordinator.share_partition import RecordState, StateBatch
from kbroker.coordinator.timers import Timers
from kbroker.server.share_group_offsets import delivery_complete_count
from kbroker.utils.time import MockTime

A, ACKED, ARCHIVED = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def test_delivery_complete_count_counts_acknowledged_and_archived_above_the_start() -> None:
    batches = [StateBatch(5, 9, ACKED, 1), StateBatch(10, 12, A, 2), StateBatch(13, 14, ARCHIVED, 5),
               StateBatch(15, 20, A, 0)]
    assert delivery_complete_count(batches, 5) == 7
    assert delivery_complete_count(batches, 8) == 4  # 8, 9 and 13, 14
    assert delivery_complete_count(batches, 15) == 0
    assert delivery_complete_count([], 0) == 0


def test_restored_groups_are_empty_and_never_take_another_groups_id() -> None:
    coordinator = ShareGroupCoordinator(ShareGroupConfig(), Timers(MockTime()), lambda g: g == "classic")
    coordinator.restore_group("jobs")
    coordinator.restore_group("classic")
    group = coordinator.describe("jobs")
    assert group is not None and group.state == "Empty" and not group.members
    assert coordinator.describe("classic") is None
    assert coordinator.delete("jobs") == 0 and coordinator.describe("jobs") is None
