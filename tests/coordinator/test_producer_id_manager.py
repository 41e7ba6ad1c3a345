"""ProducerIdManager: ids never repeat, across restarts and crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.coordinator.producer_id_manager import (
    PRODUCER_ID_BLOCK_FILE,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdManager,
)


def test_ids_increase_and_the_block_end_is_written_before_use(tmp_path: Path) -> None:
    m = ProducerIdManager(str(tmp_path))
    assert [m.generate() for _ in range(3)] == [0, 1, 2]
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_text() == f"version=1 block_end={PRODUCER_ID_BLOCK_SIZE}\n"


def test_a_restart_resumes_at_the_next_block(tmp_path: Path) -> None:
    first = ProducerIdManager(str(tmp_path))
    used = [first.generate() for _ in range(5)]
    again = ProducerIdManager(str(tmp_path))  # as after a crash: the rest of the block is skipped
    nxt = again.generate()
    assert nxt == PRODUCER_ID_BLOCK_SIZE and nxt not in used
    ids = [again.generate() for _ in range(PRODUCER_ID_BLOCK_SIZE)]
    assert ids == list(range(nxt + 1, nxt + 1 + PRODUCER_ID_BLOCK_SIZE))  # crosses into a new block
    assert ProducerIdManager(str(tmp_path)).generate() == 3 * PRODUCER_ID_BLOCK_SIZE


def test_an_unknown_file_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_text("version=9 block_end=5\n")
    with pytest.raises(ValueError, match="unknown version"):
        ProducerIdManager(str(tmp_path))
