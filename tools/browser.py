"""Debian's chromium under Playwright (its Python package, launched with
executable_path: Playwright's own browser download is not reachable here), with a
profile directory of its own; every process of it found by that directory and killed by
PID at the end. Used by the console's browser tests and tools/console_screenshots."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def browser_pids(profile: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(profile).encode() in cmdline:
                pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def chromium(profile: Path, **options: Any) -> Iterator[BrowserContext]:
    """Debian's chromium under Playwright with its own profile, every process of it
    killed by PID at the end."""
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900}, **options)
            try:
                yield context
            finally:
                context.close()
    finally:
        for pid in browser_pids(profile):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
