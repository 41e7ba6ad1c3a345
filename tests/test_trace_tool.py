"""`kbroker trace` on a hand-written trace: filters, errors with their requests, the
summary's percentiles, lines that are not JSON, and a missing file. A trace written by
a broker is read in tests/integration/test_protocol_trace.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbroker.cli import main


def _line(direction: str, api: str, cid: int, client: str = "c1", latency: float = 1.0,
          errors: dict[str, int] | None = None, conn: str = "b-p-0") -> dict[str, object]:
    line: dict[str, object] = {"t": 1700000000.0 + cid, "connection": conn,
                               "direction": direction, "api": api, "api_version": 4,
                               "correlation_id": cid, "client_id": client, "body": {"x": cid}}
    if direction == "response":
        line |= {"latency_ms": latency, "errors": errors or {"NONE": 1}}
    return line


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    older = [_line("request", "FindCoordinator", 1),
             _line("response", "FindCoordinator", 1, latency=3.0,
                   errors={"COORDINATOR_NOT_AVAILABLE": 1})]
    newer = [_line("request", "FindCoordinator", 2),
             _line("response", "FindCoordinator", 2, latency=1.0),
             _line("request", "Fetch", 3, client="c2"),
             _line("response", "Fetch", 3, client="c2", latency=500.0,
                   errors={"NONE": 3, "NOT_LEADER_OR_FOLLOWER": 1})]
    path.with_name("trace.jsonl.1").write_text("".join(json.dumps(x) + "\n" for x in older))
    path.write_text("".join(json.dumps(x) + "\n" for x in newer) + '{"t": 17000')
    return path


def test_filters_read_the_rotated_files_first(trace: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(trace), "--api", "FIND_COORDINATOR", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(x)["correlation_id"] for x in out.splitlines()] == [1, 1, 2, 2]
    assert "skipped 1 line" in err
    assert main(["trace", str(trace), "--client-id", "c2"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2 and '"c2" -> Fetch v4 #3' in rows[0]
    assert "500.000 ms [3 x NONE, 1 x NOT_LEADER_OR_FOLLOWER]" in rows[1]


def test_errors_only_keeps_failed_responses_with_their_requests(
        trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(trace), "--errors-only", "--json"]) == 0
    shown = [(x["direction"], x["correlation_id"])
             for x in map(json.loads, capsys.readouterr().out.splitlines())]
    assert shown == [("request", 1), ("response", 1), ("request", 3), ("response", 3)]


def test_summary_per_client_and_api(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(trace), "--summary"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["CLIENT-ID", "API", "REQUESTS", "RESPONSES", "P50-MS", "P99-MS",
                              "MAX-MS", "ERRORS"]
    by_api = {row.split()[1]: row for row in rows}
    assert by_api["FindCoordinator"].split()[:7] == [
        "c1", "FindCoordinator", "2", "2", "1.000", "3.000", "3.000"]
    assert by_api["FindCoordinator"].endswith("1 x COORDINATOR_NOT_AVAILABLE, 1 x NONE")


def test_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(tmp_path / "nothing")]) == 2
    assert "no such file" in capsys.readouterr().err
