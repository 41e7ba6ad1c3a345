"""RequestDispatcher: a frame's way to its handler and its answer to the channel, with a
recording channel in place of a connection."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kbroker.client.connection import encode_request
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kbroker.security.principal import KafkaPrincipal
from kbroker.server.api_table import API_TABLE, ApiSpec
from kbroker.server.request_context import PendingResponse, RequestContext
from kbroker.server.request_dispatcher import RequestDispatcher
from kbroker.server.request_frame import encode_response
from kbroker.server.response_slots import ResponseSlot

ALICE = KafkaPrincipal("User", "alice")


class _Support:
    def api_table(self) -> dict[int, ApiSpec]:
        return API_TABLE


class _Broker:
    """What the dispatcher and ApiVersions read of the RequestServices."""

    authorizer = None
    support = _Support()


class _Quotas:
    active = False


class RecordingChannel:
    """What the dispatcher told it: the slots it took and what completed them."""

    quotas = _Quotas()

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.new_event_loop()
        self.peer = "127.0.0.1:5000"
        self.listener_name = "PLAINTEXT"
        self.principal = ALICE
        self.client_software: str | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.deferred: set[PendingResponse] = set()
        self.slots: list[ResponseSlot] = []
        self.completed: list[tuple[ResponseSlot, Any]] = []
        self.closed = False

    def new_slot(self, api_key: int, version: int, correlation_id: int, size: int,
                 header: Any = None, request: Any = None) -> ResponseSlot:
        slot = ResponseSlot(api_key, version, correlation_id, size)
        self.slots.append(slot)
        return slot

    def complete(self, slot: ResponseSlot, response: Any, close_after: bool = False) -> None:
        self.completed.append((slot, response))

    def recorded(self, quota: str, slot: ResponseSlot, value: float) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def _metadata_frame(correlation_id: int = 7, version: int = 9) -> bytearray:
    return bytearray(encode_request(MetadataRequest(topics=[]), version, correlation_id,
                                    "tester")[4:])


def _table(handler: Any, error_response: Any = None) -> dict[int, ApiSpec]:
    return {ApiKey.METADATA: ApiSpec(ApiKey.METADATA, 0, 12, handler, error_response),
            ApiKey.API_VERSIONS: API_TABLE[ApiKey.API_VERSIONS]}


def test_the_handler_gets_the_channels_context_and_its_answer_completes_the_slot() -> None:
    seen: list[RequestContext] = []
    answer = MetadataResponse()

    def handler(ctx: RequestContext, request: Any) -> Any:
        seen.append(ctx)
        return answer

    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(handler))(channel, _metadata_frame())  # type: ignore[arg-type]
    (ctx,) = seen
    assert (ctx.api_key, ctx.api_version, ctx.correlation_id) == (ApiKey.METADATA, 9, 7)
    assert (ctx.principal, ctx.peer, ctx.listener_name, ctx.client_id) == (
        ALICE, "127.0.0.1:5000", "PLAINTEXT", "tester")
    (slot,) = channel.slots
    assert channel.completed == [(slot, answer)] and slot.client_id == "tester"
    assert slot.size == len(_metadata_frame())


def test_an_api_key_the_table_lacks_closes_the_channel_without_a_slot() -> None:
    frame = _metadata_frame()
    struct.pack_into(">h", frame, 0, ApiKey.FETCH)
    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(lambda ctx, r: None))(channel, frame)  # type: ignore[arg-type]
    assert channel.closed and channel.slots == [] and channel.completed == []


def test_an_unsupported_version_and_an_undecodable_body_close_the_channel() -> None:
    too_new = _metadata_frame()
    struct.pack_into(">h", too_new, 2, 13)
    for frame in (too_new, _metadata_frame()[:-1]):
        channel = RecordingChannel()
        RequestDispatcher(_Broker(), _table(lambda ctx, r: None))(channel, frame)  # type: ignore[arg-type]
        assert channel.closed and channel.slots == []


def test_api_versions_too_new_is_answered_in_v0s_format() -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 3, 5, "tester")[4:])
    struct.pack_into(">h", frame, 2, 99)
    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(lambda ctx, r: None))(channel, frame)  # type: ignore[arg-type]
    ((slot, response),) = channel.completed
    assert (slot.version, slot.correlation_id) == (0, 5)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION and not channel.closed


def test_api_versions_v3_tells_the_channel_the_clients_software() -> None:
    request = ApiVersionsRequest(client_software_name="librdkafka",
                                 client_software_version="2.3.0")
    frame = bytearray(encode_request(request, 3, 1, "tester")[4:])
    channel = RecordingChannel()
    RequestDispatcher(_Broker(), API_TABLE)(channel, frame)  # type: ignore[arg-type]
    assert channel.client_software == "librdkafka/2.3.0"
    ((_slot, response),) = channel.completed
    assert response.error_code == ErrorCode.NONE


def test_a_handler_that_raises_gets_its_apis_error_answer_or_closes_the_channel() -> None:
    def failing(ctx: RequestContext, request: Any) -> Any:
        raise RuntimeError("a bug")

    def error_response(request: Any, version: int, code: int) -> Any:
        return ("error", code)

    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(failing, error_response))(channel, _metadata_frame())  # type: ignore[arg-type]
    assert [r for _s, r in channel.completed] == [("error", ErrorCode.UNKNOWN_SERVER_ERROR)]
    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(failing))(channel, _metadata_frame())  # type: ignore[arg-type]
    assert channel.closed and channel.completed == []


def test_a_pending_response_is_held_by_the_channel_until_its_callback_completes_it() -> None:
    pending = PendingResponse()
    channel = RecordingChannel()
    RequestDispatcher(_Broker(), _table(lambda ctx, r: pending))(channel, _metadata_frame())  # type: ignore[arg-type]
    assert channel.deferred == {pending} and channel.completed == []
    pending.complete("later")
    assert channel.deferred == set() and [r for _s, r in channel.completed] == ["later"]


def test_a_coroutine_answers_at_once_if_it_never_waits_else_from_its_task() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()

        async def at_once(ctx: RequestContext, request: Any) -> Any:
            return "now"

        async def waits(ctx: RequestContext, request: Any) -> Any:
            await gate.wait()
            return "after"

        channel = RecordingChannel(asyncio.get_running_loop())
        RequestDispatcher(_Broker(), _table(at_once))(channel, _metadata_frame())  # type: ignore[arg-type]
        assert [r for _s, r in channel.completed] == ["now"] and not channel.tasks
        channel = RecordingChannel(asyncio.get_running_loop())
        RequestDispatcher(_Broker(), _table(waits))(channel, _metadata_frame())  # type: ignore[arg-type]
        assert channel.completed == [] and len(channel.tasks) == 1
        (task,) = channel.tasks
        gate.set()
        await task
        assert [r for _s, r in channel.completed] == ["after"] and not channel.tasks

    asyncio.run(scenario())


def test_encode_response_frames_header_and_body_behind_their_size() -> None:
    parts = encode_response(MetadataResponse(), ApiKey.METADATA, 9, 42)
    wire = b"".join(parts)
    (size, correlation_id) = struct.unpack_from(">ii", wire)
    assert size == len(wire) - 4 and correlation_id == 42
