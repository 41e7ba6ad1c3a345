"""Periodic duties on the event loop: call a function every so many seconds (awaiting what
it returns when that is awaitable), logging (not raising) its failures, until the task
is cancelled."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


async def every(seconds: float, fn: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            result = fn()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("periodic task %s failed", getattr(fn, "__name__", fn))
