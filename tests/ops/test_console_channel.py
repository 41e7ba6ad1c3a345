"""The console's channel to this broker's RequestDispatcher: the console user's request
answered with the response's bytes, or AdminFailed where a connection would close."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from kbroker.common.error_code import ErrorCode
from kbroker.ops.console_admin import AdminFailed, _ConsoleChannel
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.metadata import MetadataResponse
from kbroker.security.principal import ANONYMOUS
from kbroker.server.request_context import CLOSE_CONNECTION
from kbroker.server.request_frame import encode_response


def _channel() -> _ConsoleChannel:
    return _ConsoleChannel(make_mocked_request("POST", "/api/topics"), "PLAINTEXT",
                           ApiKey.METADATA)


def test_the_response_is_the_answer_as_a_connection_would_send_it() -> None:
    async def scenario() -> None:
        channel = _channel()
        assert channel.principal == ANONYMOUS and channel.listener_name == "PLAINTEXT"
        assert not channel.quotas.active
        slot = channel.new_slot(ApiKey.METADATA, 9, 0, 10)
        channel.complete(slot, MetadataResponse())
        parts = await channel.answer
        assert parts == encode_response(MetadataResponse(), ApiKey.METADATA, 9, 0)

    asyncio.run(scenario())


@pytest.mark.parametrize("how", ["close", "close_connection", "no_response"])
def test_where_a_connection_would_close_the_action_fails(how: str) -> None:
    async def scenario() -> None:
        channel = _channel()
        slot = channel.new_slot(ApiKey.METADATA, 9, 0, 10)
        if how == "close":
            channel.close()
        else:
            channel.complete(slot, CLOSE_CONNECTION if how == "close_connection" else None)
        with pytest.raises(AdminFailed) as failed:
            await channel.answer
        assert failed.value.code == ErrorCode.NETWORK_EXCEPTION

    asyncio.run(scenario())
