"""One broker per log directory (Kafka's .lock), and embedded brokers on fresh dirs."""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.storage.log_dir_lock import LogDirLockedError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LOCAL = {"listeners": "PLAINTEXT://127.0.0.1:0"}


def test_second_serve_on_a_locked_dir_refuses_naming_it(broker_factory: Any, tmp_path: Path) -> None:
    first = broker_factory().start()
    second = broker_factory(log_dir=first.log_dir)
    with pytest.raises(RuntimeError) as e:
        second.start()
    assert "Failed to acquire lock on file .lock in " + str(first.log_dir) in str(e.value)
    assert "kbroker: cannot start" in str(e.value)
    # as the port-in-use message does, it says what to do: a log.dirs of its own
    assert ("each broker needs its own log.dirs, and another broker uses "
            f"{first.log_dir}. To run a second one: --override log.dirs={first.log_dir}-2") in str(e.value)
    # the first broker serves on, and its dir was not touched by the second
    assert first.proc is not None and first.proc.poll() is None
    first.stop()
    broker_factory(log_dir=first.log_dir).start()  # free once the first has stopped


def test_embedded_broker_and_server_exclude_each_other(tmp_path: Path) -> None:
    with Broker({**LOCAL, "log.dirs": str(tmp_path)}):
        other = Broker({**LOCAL, "log.dirs": f"{tmp_path / 'free'},{tmp_path}"})
        with pytest.raises(LogDirLockedError, match=str(tmp_path)):
            other.start()
        # a failed start releases the dirs it had locked
        with Broker({**LOCAL, "log.dirs": str(tmp_path / "free")}):
            pass


def test_lock_dies_with_a_killed_broker(broker_factory: Any) -> None:
    first = broker_factory().start()
    first.kill()
    broker_factory(log_dir=first.log_dir).start()


def test_embedded_broker_without_log_dirs_uses_a_fresh_dir_removed_on_stop() -> None:
    a, b = Broker(LOCAL), Broker(LOCAL)
    with a, b:  # both start: neither uses the shared /tmp/kbroker-logs
        dirs = [a.config.log_dirs[0], b.config.log_dirs[0]]
        assert dirs[0] != dirs[1] and "/tmp/kbroker-logs" not in dirs
        assert all(os.path.exists(os.path.join(d, ".lock")) for d in dirs)
    assert not any(os.path.exists(d) for d in dirs)


def test_serve_raises_the_soft_open_file_limit(tmp_path: Path) -> None:
    """`kbroker serve` started under a soft limit of 256 runs with the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("hard limit too low to lower the soft one below it")

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    stderr = tmp_path / "stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbroker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={tmp_path / 'logs'}"],
            stdout=subprocess.DEVNULL, stderr=err, preexec_fn=low_soft_limit)
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"open-file limit (\d+)", stderr.read_text())):
            assert proc.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        limit = int(m.group(1))
        assert limit > 256
        assert hard == resource.RLIM_INFINITY or limit == hard
        soft_now = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)[0]
        assert soft_now == limit
    finally:
        proc.terminate()
        proc.wait(30)


def test_failed_start_releases_locks_and_writes_no_clean_marker(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with Broker({**LOCAL, "log.dirs": str(a), "num.partitions": "1"}) as broker:
        broker.state.create_topic("t")  # type: ignore[union-attr]
    (a / ".kafka_cleanshutdown").unlink()  # as after a crash
    os.makedirs(b / "t-0")  # the same partition in a second dir: startup must refuse
    with pytest.raises(Exception, match="duplicate log directories"):
        Broker({**LOCAL, "log.dirs": f"{a},{b}"}).start()
    # Recovery is still owed: no marker may claim a clean shutdown; the dirs are free again.
    assert not (a / ".kafka_cleanshutdown").exists() and not (b / ".kafka_cleanshutdown").exists()
    shutil.rmtree(b / "t-0")
    with Broker({**LOCAL, "log.dirs": str(a)}) as broker:
        assert broker.state.log_manager.last_load_recovered  # type: ignore[union-attr]
