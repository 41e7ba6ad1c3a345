"""Debian's chromium for the console's browser tests: tools/browser.py (shared with
tools/console_screenshots)."""

from __future__ import annotations

from tools.browser import CHROMIUM, browser_pids, chromium

__all__ = ["CHROMIUM", "browser_pids", "chromium"]
