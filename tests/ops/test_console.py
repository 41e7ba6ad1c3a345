"""The web console in a real browser: Debian's chromium driven by Playwright (its Python
package, launched with executable_path: Playwright's own browser download is not
reachable here) against a broker while a producer runs.

Each page loads without console errors, the live charts take new samples as the
producer runs, the message browser shows the produced records, the write forms
(operations.write.enable) create and delete a topic and show a refused offset reset,
and a screenshot of every page is saved to $KBROKER_TEST_ARTIFACTS/console (default build/test-artifacts).
The browser's processes are found by their profile directory and killed by PID after.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from playwright.sync_api import Page

from kbroker import Broker
from kbroker.ops import console_api

from .browser import browser_pids as _browser_pids
from .browser import chromium

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("KBROKER_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
PRODUCE_FOR_S = 60.0  # at most; the test stops the producer when done


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    bench = tmp_path / "bench-results"
    bench.mkdir()
    (bench / "matrix-20260101-000000.json").write_text(json.dumps({
        "a": {"name": "kbroker"}, "b": {"name": "kbroker-ref:main"}, "started": 0,
        "cells": ["1KiB/acks=1/none/p1"], "geomean_ratio": 1.0, "summary": [
            {"cell": "1KiB/acks=1/none/p1", "phase": "produce", "metric": "mb_per_s",
             "a": 101.5, "b": 100.0, "ratio": 1.015},
            {"cell": "1KiB/acks=1/none/p1", "phase": "produce", "metric": "cpu_s_per_gb",
             "a": 9.1, "b": 9.0, "ratio": 1.011}]}))
    monkeypatch.setattr(console_api, "BENCH_DIRS", (bench,))
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                 "operations.listener": "127.0.0.1:0", "num.partitions": "3",
                 "operations.write.enable": "true",
                 "group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


@pytest.fixture
def producing(broker: Broker) -> Iterator[threading.Event]:
    """JSON records with a header to `orders`, a few hundred a second, until the test ends."""
    stop = threading.Event()

    def run() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        deadline = time.monotonic() + PRODUCE_FOR_S
        i = 0
        while not stop.is_set() and time.monotonic() < deadline:
            for _ in range(20):
                value = json.dumps({"order": i, "item": "widget", "qty": i % 7})
                producer.produce("orders", key=f"k{i}".encode(), value=value.encode(),
                                 headers=[("source", b"console-test")])
                i += 1
            producer.poll(0)
            stop.wait(0.05)  # the producer's pace, not a synchronisation
        producer.flush(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield stop
    stop.set()
    thread.join(60)


@pytest.fixture
def consuming(broker: Broker, producing: threading.Event) -> Iterator[Consumer]:
    """A member of `console-group` that read and committed some records, open (its
    heartbeats keep it in the group) until the test ends."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": "console-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe(["orders"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 50 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
        assert got >= 50
        consumer.commit(asynchronous=False)
        yield consumer
    finally:
        consumer.close()


def wait_for(condition: Any, what: str, page: Page, timeout_s: float = 30.0) -> None:
    """Until condition() holds, letting Playwright dispatch its events meanwhile."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        page.wait_for_timeout(50)  # dispatches the page's events (a route handler's)


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"), full_page=True)


def test_console_pages_live_charts_and_message_browser(
        broker: Broker, consuming: Consumer, tmp_path: Path) -> None:
    url = broker.operations_url
    assert url is not None
    binary = Producer({"bootstrap.servers": broker.bootstrap_servers})
    binary.produce("binary", key=b"plain-key", value=b"\xff\xfe\x00bin", partition=0)
    assert binary.flush(30) == 0
    profile = tmp_path / "chromium-profile"
    errors: list[str] = []
    with chromium(profile) as context:
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        # loading: until /api/overview answers, the page says so (no empty boxes)
        held: list[Any] = []
        page.route("**/api/overview", lambda route: held.append(route))
        page.goto(url + "/#overview", wait_until="domcontentloaded")
        page.wait_for_function("document.querySelector('#page-overview.loading') !== null")
        assert "Loading" in page.evaluate(
            "getComputedStyle(document.querySelector('#page-overview'), '::before').content")
        assert page.locator("#chart-messages .waiting").count() == 1
        wait_for(lambda: held, "the held /api/overview request", page)
        for route in held:
            route.continue_()
        page.unroute("**/api/overview")
        page.wait_for_selector("#brokers tbody tr")
        page.wait_for_selector("#page-overview:not(.loading)")
        # live: samples arrive once a second and the charts draw them
        page.wait_for_function("Number(document.body.dataset.samples || 0) >= 3",
                               timeout=30000)
        legend = page.inner_text("#chart-messages")
        assert "orders" in legend
        rates = page.evaluate(
            "samples.map(s => (s.topics.orders || {}).messages_in_per_s || 0)")
        assert max(rates) > 0, rates
        assert page.locator("#chart-messages canvas").count() == 1
        # the time axis ticks on whole seconds, labelled as clock times
        ticks = page.evaluate("(() => { const a = charts['chart-messages'].plot.axes[0];"
                              " return {splits: a._splits, values: a._values}; })()")
        assert ticks["splits"] and all(float(t).is_integer() for t in ticks["splits"]), ticks
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d", v) for v in ticks["values"]), ticks
        assert page.locator("#chart-messages .waiting").count() == 0
        first = page.evaluate("samples.length")
        page.wait_for_function(f"samples.length > {first}", timeout=10000)
        _shot(page, "overview")

        page.click("nav a[data-page=topics]")
        page.click("#topics tr[data-topic=orders]")
        page.wait_for_selector("#topic-detail table.partitions tbody tr")
        assert page.locator("#topic-detail table.partitions tbody tr").count() == 3
        _shot(page, "topics")

        page.click("nav a[data-page=groups]")
        page.wait_for_selector("h2.group")
        assert "console-group" in page.inner_text("#groups")
        assert "orders: " in page.inner_text("#groups")  # a member's assignment
        assert page.locator("#groups table.lag tbody tr").count() >= 1
        _shot(page, "groups")
        # a write refused by the coordinator: the group has a member
        page.on("dialog", lambda dialog: dialog.accept())  # the confirm() of writes
        page.click("form.reset button")
        page.wait_for_function(
            "document.querySelector('#group-info').textContent.includes('active members')")

        # create a topic with the form, then delete it with its button
        page.click("nav a[data-page=topics]")
        page.wait_for_selector("#create-topic:not([hidden])")
        page.fill("#create-name", "made-in-browser")
        page.fill("#create-partitions", "2")
        page.fill("#create-configs", "retention.ms=3600000")
        page.click("#create-topic button")
        page.wait_for_selector("#topics tr[data-topic=made-in-browser]")
        assert "retention.ms=3600000" in page.inner_text(
            "#topics tr[data-topic=made-in-browser]")
        _shot(page, "topics-write")
        page.click("#topics tr[data-topic=made-in-browser] button.delete-topic")
        page.wait_for_selector("#topics tr[data-topic=made-in-browser]", state="detached")
        assert "deleted made-in-browser" in page.inner_text("#write-info")

        page.click("nav a[data-page=messages]")
        page.wait_for_function(
            "[...document.querySelectorAll('#browse-topic option')].some(o => o.value === 'orders')")
        page.select_option("#browse-topic", "orders")
        page.fill("#browse-offset", "0")
        page.fill("#browse-limit", "5")
        page.select_option("#browse-format", "json")
        page.click("#browse button")
        page.wait_for_selector("#records tbody tr")
        rows = page.locator("#records tbody tr")
        assert rows.count() == 5
        text = page.inner_text("#records")
        assert '"item": "widget"' in text and "source=console-test" in text
        _shot(page, "messages")
        # bytes that are not UTF-8, in text mode: hex, not replacement characters
        page.select_option("#browse-topic", "binary")
        page.fill("#browse-offset", "0")
        page.select_option("#browse-format", "text")
        page.click("#browse button")
        page.wait_for_function(
            "document.querySelector('#browse-info').textContent.startsWith('binary-0')")
        cells = page.locator("#records tbody tr").first.locator("td")
        assert cells.nth(2).inner_text() == "plain-key"
        assert cells.nth(3).inner_text() == "hex: ff fe 00 62 69 6e"
        assert "\ufffd" not in page.inner_text("#records")

        # client metrics (KIP-714): no subscription, but the consumer asked for one
        page.click("nav a[data-page=clients]")
        page.wait_for_selector("#client-instances h3")
        assert "No subscriptions" in page.inner_text("#subscriptions")
        _shot(page, "client-metrics")

        page.click("nav a[data-page=bench]")
        page.wait_for_selector("#bench table tbody tr")
        assert "kbroker-ref:main" in page.inner_text("#bench")
        _shot(page, "bench")
    # chromium logs the refused reset's answer (409) as a failed load: that one only
    refused = [e for e in errors if "status of 409 (Conflict)" in e]
    assert len(refused) == 1 and [e for e in errors if e not in refused] == [], errors
    assert _browser_pids(profile) == []
