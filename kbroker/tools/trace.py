"""`kbroker trace`: read a protocol trace written by `kbroker serve --trace FILE` (its
format: kbroker.server.protocol_trace).

    kbroker trace FILE                                  every request and response
    kbroker trace FILE --client-id X --api Fetch --errors-only
    kbroker trace FILE --summary                        per client and API
    kbroker trace FILE --json                           the matching lines as they are

FILE's rotated predecessors (FILE.N ... FILE.1, oldest first) are read before it.
One line per request (->) and response (<-), bodies cut at --body-chars:

    14:03:07.532118 127.0.0.1:9092-127.0.0.1:50514-0 "rdkafka" -> FindCoordinator v4 #3 {"key_type":1,...}
    14:03:07.532630 127.0.0.1:9092-127.0.0.1:50514-0 "rdkafka" <- FindCoordinator v4 #3 0.512 ms
        [1 x COORDINATOR_NOT_AVAILABLE] "The coordinator is not available." {"throttle_time_ms":0,...}

(one line; wrapped here). `--api` takes the protocol guide's name (Fetch,
FindCoordinator) or Kafka's (FETCH, FIND_COORDINATOR), in any case. `--errors-only`
keeps the responses carrying an error code other than NONE, each after its request.
`--summary` prints, per client id and API: requests, responses, the error codes of
the responses (per partition counted), and latency p50 / p99 / max in ms (request
read whole to response written). A line that is not JSON (the last one of a broker
killed mid-write) is skipped and counted on stderr. Exit status: 0, or 2 when no
file can be read.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kbroker.server.protocol_trace import rotated_paths

HELP = "read a protocol trace (kbroker serve --trace FILE): filter it, or summarise it"
MAX_BACKUPS = 1000  # rotated files looked for: FILE.1 .. FILE.1000


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the trace file (kbroker serve --trace FILE)")
    p.add_argument("--client-id", help="only this client id")
    p.add_argument("--api", help="only this API: Fetch, FindCoordinator, ... (or FETCH, ...)")
    p.add_argument("--errors-only", action="store_true",
                   help="only responses with an error code other than NONE, with their requests")
    p.add_argument("--summary", action="store_true",
                   help="per client id and API: counts, error codes, latency percentiles")
    p.add_argument("--json", action="store_true", help="print the matching lines as they are")
    p.add_argument("--body-chars", type=int, default=300, metavar="N",
                   help="cut bodies at N characters (default 300; 0: no bodies, -1: whole)")


def run(args: argparse.Namespace) -> int:
    paths = [p for p in rotated_paths(args.file, MAX_BACKUPS) if os.path.exists(p)]
    if not paths:
        print(f"kbroker trace: no such file: {args.file}", file=sys.stderr)
        return 2
    reader = TraceReader(paths)
    lines = select(reader.lines(), args.client_id, args.api, args.errors_only)
    try:
        if args.summary:
            print(format_summary(summarize(lines)), end="")
        else:
            for line in lines:
                print(json.dumps(line, separators=(",", ":")) if args.json
                      else format_line(line, args.body_chars))
        sys.stdout.flush()
    except BrokenPipeError:  # `kbroker trace FILE | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if reader.skipped:
        print(f"kbroker trace: skipped {reader.skipped} line(s) that are not JSON",
              file=sys.stderr)
    return 0


class TraceReader:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.skipped = 0

    def lines(self) -> Iterator[dict[str, Any]]:
        for path in self.paths:
            with open(path, encoding="utf-8", errors="replace") as f:
                for text in f:
                    try:
                        line = json.loads(text)
                    except ValueError:
                        self.skipped += 1
                        continue
                    if isinstance(line, dict):
                        yield line
                    else:
                        self.skipped += 1


def select(lines: Iterator[dict[str, Any]], client_id: str | None, api: str | None,
           errors_only: bool) -> Iterator[dict[str, Any]]:
    wanted_api = _api_key(api) if api else None
    held: dict[tuple[str, int], dict[str, Any]] = {}  # requests awaiting their response
    for line in lines:
        if client_id is not None and line.get("client_id") != client_id:
            continue
        if wanted_api is not None and _api_key(line.get("api", "")) != wanted_api:
            continue
        if not errors_only:
            yield line
            continue
        key = (line.get("connection", ""), line.get("correlation_id", -1))
        if line.get("direction") == "request":
            held[key] = line
            continue
        request = held.pop(key, None)
        if any(name != "NONE" for name in line.get("errors", {})):
            if request is not None:
                yield request
            yield line


def _api_key(name: str) -> str:
    """FindCoordinator, FIND_COORDINATOR, findcoordinator -> findcoordinator."""
    return name.replace("_", "").lower()


def format_line(line: dict[str, Any], body_chars: int) -> str:
    t = line.get("t", 0.0)
    stamp = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1e6) % 1000000:06d}"
    arrow = "->" if line.get("direction") == "request" else "<-"
    parts = [stamp, line.get("connection", "?"), json.dumps(line.get("client_id")), arrow,
             f"{line.get('api')} v{line.get('api_version')} #{line.get('correlation_id')}"]
    if line.get("direction") == "response":
        parts.append(f"{line.get('latency_ms', 0):.3f} ms")
        errors = line.get("errors", {})
        if errors:
            parts.append("[" + ", ".join(f"{n} x {name}" for name, n in errors.items()) + "]")
        parts += [json.dumps(m) for m in line.get("error_messages", [])]
        if line.get("no_response"):
            parts.append(f"(no response: {line['no_response']})")
    if body_chars and line.get("body") is not None:
        body = json.dumps(line["body"], separators=(",", ":"))
        parts.append(body if body_chars < 0 or len(body) <= body_chars
                     else body[:body_chars] + "...")
    return " ".join(str(p) for p in parts)


@dataclass
class ApiStats:
    requests: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


def summarize(lines: Iterator[dict[str, Any]]) -> dict[tuple[str, str], ApiStats]:
    stats: dict[tuple[str, str], ApiStats] = {}
    for line in lines:
        client = line.get("client_id")
        key = ("-" if client is None else str(client), str(line.get("api")))
        entry = stats.setdefault(key, ApiStats())
        if line.get("direction") == "request":
            entry.requests += 1
        else:
            entry.latencies_ms.append(float(line.get("latency_ms", 0.0)))
            entry.errors.update(line.get("errors", {}))
    return stats


def format_summary(stats: dict[tuple[str, str], ApiStats]) -> str:
    header = ("CLIENT-ID", "API", "REQUESTS", "RESPONSES", "P50-MS", "P99-MS", "MAX-MS",
              "ERRORS")
    rows = [header]
    for (client, api), s in sorted(stats.items()):
        lat = sorted(s.latencies_ms)
        rows.append((client, api, str(s.requests), str(len(lat)), _pct(lat, 0.50),
                     _pct(lat, 0.99), f"{lat[-1]:.3f}" if lat else "-",
                     ", ".join(f"{n} x {name}" for name, n in s.errors.most_common()) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return "".join(
        " ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=False))) + "  " + row[-1] + "\n"
        for row in rows)


def _pct(ordered: list[float], q: float) -> str:
    """The nearest-rank percentile of sorted values."""
    if not ordered:
        return "-"
    return f"{ordered[max(0, math.ceil(q * len(ordered)) - 1)]:.3f}"
