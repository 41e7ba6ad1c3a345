"""Injected time, so tests can drive retention and session timeouts with a fake clock."""

from __future__ import annotations

import time as _time


class Time:
    """The system clock: wall-clock milliseconds and a monotonic clock."""

    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return _time.monotonic_ns() // 1_000_000


class MockTime(Time):
    """A clock that moves only when told to (`sleep`)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._mono_ms = 0

    def milliseconds(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._mono_ms

    def sleep(self, ms: int) -> None:
        self._now_ms += ms
        self._mono_ms += ms


SYSTEM_TIME = Time()
