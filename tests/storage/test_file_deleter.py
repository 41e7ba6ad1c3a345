"""FileDeleter: deleted segments' files go after the delay, not before; shutdown runs what is left."""

from __future__ import annotations

import os
from pathlib import Path

from kbroker.storage.file_deleter import FileDeleter
from kbroker.utils.time import MockTime


def test_files_go_after_the_delay_and_the_rest_at_shutdown(tmp_path: Path) -> None:
    time = MockTime()
    deleter = FileDeleter(time)
    early, late = tmp_path / "early.log.deleted", tmp_path / "late.log.deleted"
    for f in (early, late):
        f.write_bytes(b"x")
    closed: list[str] = []
    deleter.schedule_segment(1000, lambda: closed.append("early"), [str(early)])
    deleter.schedule_segment(5000, lambda: closed.append("late"), [str(late)])
    assert deleter.run_due() == 0 and early.exists()
    time.sleep(1000)
    assert deleter.run_due() == 1
    assert not early.exists() and late.exists() and closed == ["early"]
    deleter.shutdown()  # runs everything still pending
    assert not late.exists() and closed == ["early", "late"] and deleter.pending == 0


def test_a_failed_task_does_not_stop_the_others(tmp_path: Path) -> None:
    deleter = FileDeleter(MockTime())
    d = tmp_path / "t-0.abc-delete"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"x")

    def boom() -> None:
        raise OSError("disk trouble")

    deleter.schedule(0, boom)
    deleter.schedule_dir(0, str(d))
    assert deleter.run_due() == 2
    assert not os.path.exists(d)
