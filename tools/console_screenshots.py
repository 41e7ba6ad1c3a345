"""The manual's screenshots of the web console (docs/operations.md), made afresh:

    python -m tools.console_screenshots [--out docs/images] [--samples 20]

starts an embedded broker (operations listener on a free port), a producer of JSON
orders to `orders` and a consumer group `billing` that commits as it reads, opens the
console in headless chromium (Debian's, tools/browser.py) and saves one PNG per page
(console-overview.png, console-topics.png, console-groups.png, console-messages.png)
once the page has loaded its data and the charts hold `--samples` samples (one a
second). Everything it started is stopped when it ends, however it ends.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer
from playwright.sync_api import Page

from kbroker import Broker
from tools.browser import chromium

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "images"
WAIT_MS = 120_000  # for a page's data, at most


@contextmanager
def _workload(bootstrap: str) -> Iterator[None]:
    """Orders produced at a steady pace and a group reading them, until the block ends."""
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        i = 0
        while not stop.is_set():
            for _ in range(20):
                order = {"order": i, "item": ("widget", "gadget", "gizmo")[i % 3], "qty": i % 7}
                producer.produce("orders", key=f"customer-{i % 40}".encode(),
                                 value=json.dumps(order).encode(), headers=[("source", b"web")])
                i += 1
            producer.poll(0)
            stop.wait(0.05)  # the producer's pace
        producer.flush(30)

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing",
                             "auto.offset.reset": "earliest", "client.id": "billing-1"})
        try:
            consumer.subscribe(["orders"])
            while not stop.is_set():
                consumer.poll(0.5)
        finally:
            consumer.close()

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(60)


def _shoot(page: Page, url: str, out: Path, samples: int) -> list[Path]:
    shots = []

    def save(name: str) -> None:
        path = out / f"console-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        shots.append(path)

    page.goto(url + "/#overview")
    page.wait_for_selector("#page-overview:not(.loading)", timeout=WAIT_MS)
    page.wait_for_function(f"samples.length >= {samples}", timeout=WAIT_MS)
    page.wait_for_function("Object.keys(samples.at(-1).topics || {}).includes('orders')",
                           timeout=WAIT_MS)
    save("overview")
    page.click("nav a[data-page=topics]")
    page.wait_for_selector("#topics tr[data-topic=orders]", timeout=WAIT_MS)
    page.click("#topics tr[data-topic=orders]")
    page.wait_for_selector("#topic-detail table.partitions tbody tr", timeout=WAIT_MS)
    save("topics")
    page.click("nav a[data-page=groups]")
    page.wait_for_selector("#groups table.lag tbody tr", timeout=WAIT_MS)
    save("groups")
    page.click("nav a[data-page=messages]")
    page.wait_for_function(
        "[...document.querySelectorAll('#browse-topic option')].some(o => o.value === 'orders')",
        timeout=WAIT_MS)
    page.select_option("#browse-topic", "orders")
    page.fill("#browse-limit", "8")
    page.select_option("#browse-format", "json")
    page.click("#browse button")
    page.wait_for_selector("#records tbody tr", timeout=WAIT_MS)
    save("messages")
    return shots


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(prog="python -m tools.console_screenshots",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where the PNGs go (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=20,
                        help="live samples in the charts first, one a second (default 20)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbroker-screenshots-") as tmp, \
            Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": f"{tmp}/logs",
                    "operations.listener": "127.0.0.1:0", "num.partitions": "3",
                    "group.initial.rebalance.delay.ms": "0"}) as broker, \
            _workload(broker.bootstrap_servers), chromium(Path(tmp) / "profile") as context:
        shots = _shoot(context.new_page(), str(broker.operations_url), args.out, args.samples)
    for path in shots:
        print(path)
    return shots


if __name__ == "__main__":
    main()
