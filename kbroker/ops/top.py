"""`kbroker top`: a broker's live figures in a terminal, for users without a browser.

    kbroker top [--bootstrap-server HOST:PORT | --url URL] [--once] [--samples N]

It finds the operations listener of the broker at --bootstrap-server (default
127.0.0.1:9092) by asking that broker (kbroker.ops.discovery: DescribeConfigs of its
operations.listener), unless --url names the listener itself. It reads the listener's
/api/overview once and then the server-sent events of
/api/live (kbroker.ops.live), and redraws on each sample (one a second): the broker,
its topics with messages and bytes in/out per second, and requests per second with
latency p50/p99 per API. On a terminal it draws with curses (q quits); `--once`, or
output that is not a terminal, prints frames as plain text instead (`--once`: the first
frame with rates, then exit; `--samples N`: N frames). A topic's MSGS SINCE START is
the count since the broker started (its rates are per second over the last sample).
Exit status 1 when the broker or the listener cannot be reached.
"""

from __future__ import annotations

import argparse
import curses
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from kbroker.client.connection import KafkaClientError
from kbroker.ops.discovery import operations_url

HELP = "show a broker's live figures (its operations listener) in the terminal"
TIMEOUT_S = 10.0
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def configure_parser(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                       help="the broker whose figures to show; its operations listener is "
                            "asked of it (default %(default)s)")
    where.add_argument("--url", help="the operations listener itself, e.g. "
                                     "http://127.0.0.1:9404")
    p.add_argument("--once", action="store_true",
                   help="print one frame with rates as text and exit")
    p.add_argument("--samples", type=int, default=0, metavar="N",
                   help="print N frames as text and exit (0: until interrupted)")


def run(args: argparse.Namespace) -> int:
    try:
        base = (args.url or operations_url(args.bootstrap_server, TIMEOUT_S)).rstrip("/")
    except (KafkaClientError, ValueError) as e:
        print(f"kbroker top: the operations listener of {args.bootstrap_server}: {e}",
              file=sys.stderr)
        return 1
    try:
        overview = _get_json(base + "/api/overview")
        samples = _samples(base + "/api/live")
        if args.once or args.samples or not sys.stdout.isatty():
            wanted = 1 if args.once else args.samples
            printed = 0
            for sample in samples:
                if args.once and sample.get("interval_s") is None:
                    continue  # the stream's first event has no rates yet
                print("\n".join(frame(overview, sample)), flush=True)
                printed += 1
                if wanted and printed >= wanted:
                    break
            return 0
        curses.wrapper(_draw, overview, samples)
    except BrokenPipeError:  # its output went to a reader that stopped (`| head`)
        sys.stderr.close()  # nothing more to say, and no second error at exit
        return 0
    except (urllib.error.URLError, OSError, ValueError) as e:
        print(f"kbroker top: cannot read {base}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
        found: dict[str, Any] = json.loads(r.read())
    return found


def _samples(url: str) -> Iterator[dict[str, Any]]:
    """The events of a server-sent event stream, parsed."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
        for line in r:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])


def _rate(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    for prefix in ("", "K", "M", "G"):
        if abs(value) < 1000 or prefix == "G":
            return f"{value:.1f}{prefix}{unit}"
        value /= 1000
    return "-"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def frame(overview: dict[str, Any], sample: dict[str, Any]) -> list[str]:
    """One screen as lines of text."""
    total = sample.get("total") or {}
    lines = [
        f"kbroker {overview.get('version', '')} broker {overview.get('node_id')} "
        f"({sample.get('phase')}) controller {overview.get('controller_id')} "
        f"bootstrap {overview.get('bootstrap_servers')}",
        f"connections {sample.get('connections', '-')}  request queue "
        f"{sample.get('request_queue', '-')}  messages in/s {_rate(total.get('messages_in_per_s'))}"
        f"  bytes in/s {_rate(total.get('bytes_in_per_s'), 'B')}  bytes out/s "
        f"{_rate(total.get('bytes_out_per_s'), 'B')}",
        "",
        f"{'TOPIC':32} {'MSG IN/S':>10} {'BYTES IN/S':>11} {'BYTES OUT/S':>12} {'MSGS SINCE START':>16}",
    ]
    for name, t in (sample.get("topics") or {}).items():
        lines.append(f"{name[:32]:32} {_rate(t.get('messages_in_per_s')):>10} "
                     f"{_rate(t.get('bytes_in_per_s'), 'B'):>11} "
                     f"{_rate(t.get('bytes_out_per_s'), 'B'):>12} {t.get('messages_in', 0):>16}")
    lines += ["", f"{'API':24} {'REQ/S':>8} {'P50-MS':>8} {'P99-MS':>8}"]
    for api, r in (sample.get("requests") or {}).items():
        lines.append(f"{api[:24]:24} {_rate(r.get('per_s')):>8} {_ms(r.get('p50_ms')):>8} "
                     f"{_ms(r.get('p99_ms')):>8}")
    return lines


def _draw(screen: Any, overview: dict[str, Any], samples: Iterator[dict[str, Any]]) -> None:
    screen.nodelay(True)
    for sample in samples:
        if screen.getch() in (ord("q"), ord("Q")):
            return
        screen.erase()
        height, width = screen.getmaxyx()
        for row, line in enumerate(frame(overview, sample)[: height - 1]):
            screen.addnstr(row, 0, line, width - 1)
        screen.addnstr(height - 1, 0, "q quits", width - 1)
        screen.refresh()
