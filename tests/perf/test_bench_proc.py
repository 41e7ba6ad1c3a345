"""/proc parsing and readiness framing of bench/brokers.py."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import brokers  # noqa: E402

STAT = ("4242 (tansu (broker) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 "
        "150 50 7 3 20 0 9 0 100 123456789 2000 18446744073709551615")
STATUS = "Name:\ttansu\nVmPeak:\t  900000 kB\nVmHWM:\t  845896 kB\nVmRSS:\t  844296 kB\n"


def test_parse_stat_handles_spaces_and_parens_in_comm() -> None:
    stat = brokers.parse_stat(STAT)
    assert (stat.pid, stat.ppid) == (4242, 1)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (150, 50, 7, 3)


def test_parse_status_kb() -> None:
    assert brokers.parse_status_kb(STATUS, "VmHWM") == 845896
    assert brokers.parse_status_kb(STATUS, "VmRSS") == 844296
    assert brokers.parse_status_kb(STATUS, "VmSwap") is None


def _fake_proc(root: Path, pid: int, ppid: int, utime: int, stime: int, hwm_kb: int) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} (p) S {ppid} 0 0 0 -1 0 0 0 0 0 {utime} {stime} 2 1 20 0 1 0")
    (d / "status").write_text(f"Name:\tp\nVmHWM:\t {hwm_kb} kB\n")


def test_tree_cpu_and_rss_sum_over_descendants(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 10, 1, 100, 50, 1000)
    _fake_proc(tmp_path, 11, 10, 30, 20, 200)
    _fake_proc(tmp_path, 12, 11, 10, 0, 30)
    _fake_proc(tmp_path, 99, 1, 5000, 5000, 9999)  # not in the tree
    (tmp_path / "self").mkdir()
    assert sorted(brokers.descendants(10, tmp_path)) == [11, 12]
    ticks = (100 + 50 + 2 + 1) + (30 + 20) + 10
    assert brokers.tree_cpu_seconds(10, tmp_path) == ticks / brokers.CLOCK_TICKS
    assert brokers.tree_peak_rss_kb(10, tmp_path) == 1230
    assert brokers.tree_cpu_seconds(12345, tmp_path) == 0.0


def test_own_process_is_readable() -> None:
    assert brokers.read_stat(os.getpid()) is not None
    assert brokers.tree_peak_rss_kb(os.getpid()) > 0


def test_api_versions_v0_frame() -> None:
    frame = brokers.api_versions_v0_request(7, b"c")
    size, key, version, correlation, client_len = struct.unpack_from(">ihhih", frame)
    assert size == len(frame) - 4
    assert (key, version, correlation, client_len) == (18, 0, 7, 1)
    assert frame.endswith(b"c")


def test_resolve_spec_forms() -> None:
    spec = brokers.resolve_spec("cmd:mybroker --port {port} --dir {data_dir}")
    assert spec.command == "mybroker --port {port} --dir {data_dir}"
    assert "kbroker serve" in brokers.resolve_spec("kbroker").command
    assert "{port}" in brokers.resolve_spec("kbroker").command
