"""InOrderResponses: responses leave in request order, whatever order they are ready in."""

from __future__ import annotations

from typing import Any

from kbroker.server.response_slots import InOrderResponses


class _Queue:
    def __init__(self) -> None:
        self.bytes = 0

    def add(self, size: int) -> None:
        self.bytes += size

    def remove(self, size: int) -> None:
        self.bytes -= size


class _Server:
    def __init__(self) -> None:
        self.request_queue = _Queue()


class _Writer:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.idle = True

    def send(self, parts: list[Any]) -> None:
        self.sent.extend(parts)


class Responses(InOrderResponses):
    """InOrderResponses with a recording writer, reading never paused."""

    def __init__(self) -> None:
        self.server = _Server()  # type: ignore[assignment]
        self.writer = _Writer()  # type: ignore[assignment]
        self.closed = False
        self.stopped = False
        self._reading = True
        self._draining = False
        self._inbuf = bytearray()
        self._received_ns = 0
        self._init_slots()

    def close(self) -> None:  # type: ignore[override]
        self.closed = True

    def stop_reading(self) -> None:  # type: ignore[override]
        self.stopped = True

    def answer(self, slot: Any, parts: list[Any] | None, close_after: bool = False) -> None:
        slot.parts, slot.done, slot.close_after = parts, True, close_after
        self._send_ready()


def test_a_later_answer_waits_for_every_earlier_one() -> None:
    responses = Responses()
    first, second, third = (responses.new_slot(3, 9, i, 10) for i in range(3))
    assert responses.server.request_queue.bytes == 30
    responses.answer(third, [b"3"])
    responses.answer(second, [b"2"])
    assert responses.writer.sent == []
    responses.answer(first, [b"1"])
    assert responses.writer.sent == [b"1", b"2", b"3"]
    assert responses.server.request_queue.bytes == 0 and not responses._pending


def test_a_slot_without_bytes_holds_its_place_and_sends_nothing() -> None:
    responses = Responses()
    acks0, metadata = responses.new_slot(0, 9, 1, 10), responses.new_slot(3, 9, 2, 10)
    responses.answer(metadata, [b"m"])
    responses.answer(acks0, None)
    assert responses.writer.sent == [b"m"]


def test_close_after_sends_what_came_before_and_drops_the_rest() -> None:
    responses = Responses()
    first, closing, later = (responses.new_slot(3, 9, i, 10) for i in range(3))
    responses.answer(later, [b"later"])
    responses.answer(first, [b"first"])
    responses.answer(closing, None, close_after=True)
    assert responses.writer.sent == [b"first"]
    assert responses.stopped and responses.closed  # the writer was idle: closed at once
    assert responses.server.request_queue.bytes == 0
