"""BrokerChannel: requests from this broker to another one, over one connection that is
opened on first use and reopened after a failure (the controller's channel to each
broker, a follower's channel to its leader, a leader's channel to the controller).

The target's address is looked up at each (re)connection, so a broker that restarts on
another port is found again. On a SASL inter-broker listener each new connection logs
in first (SaslHandshake, then SaslAuthenticate: PLAIN, or SCRAM's two rounds), with the
broker's InterBrokerLogin. Failures surface as KafkaClientError; the caller decides
whether and when to retry.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kbroker.client.async_connection import AsyncBrokerConnection
from kbroker.client.connection import KafkaClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kbroker.security.scram import ScramClient, ScramError
from kbroker.security.settings import InterBrokerLogin

CONNECT_TIMEOUT_S = 10.0


class BrokerChannel:
    def __init__(self, target_id: int, endpoint: Callable[[], tuple[str, int] | None],
                 client_id: str, login: InterBrokerLogin | None = None) -> None:
        self.target_id = target_id
        self.login = login
        self._endpoint = endpoint
        self.client_id = client_id
        self._connection: AsyncBrokerConnection | None = None
        self._connecting: asyncio.Future[AsyncBrokerConnection] | None = None
        self._closed = False

    async def _connect(self) -> AsyncBrokerConnection:
        if self._closed:
            raise KafkaClientError(f"channel to broker {self.target_id} is closed",
                                   ErrorCode.NETWORK_EXCEPTION)
        conn = self._connection
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is not None:
            return await asyncio.shield(self._connecting)
        endpoint = self._endpoint()
        if endpoint is None:
            raise KafkaClientError(f"no endpoint known for broker {self.target_id}",
                                   ErrorCode.BROKER_NOT_AVAILABLE)
        fut: asyncio.Future[AsyncBrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting = fut
        try:
            conn = await AsyncBrokerConnection.open(endpoint[0], endpoint[1], self.client_id,
                                                    CONNECT_TIMEOUT_S)
            if self.login is not None:
                try:
                    await authenticate(conn, self.login, CONNECT_TIMEOUT_S)
                except BaseException:
                    conn.close()
                    raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()
            raise
        finally:
            self._connecting = None
        if not fut.done():
            fut.set_result(conn)
        self._connection = conn
        return conn

    @property
    def closed(self) -> bool:
        """close() was called: its owner is stopping."""
        return self._closed

    async def request(self, request: Any, version: int, timeout_s: float | None = 30.0) -> Any:
        conn = await self._connect()
        return await conn.request(request, version, timeout_s)

    def reset(self) -> None:
        """Drop the connection (the next request opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        self._closed = True
        self.reset()


async def authenticate(conn: AsyncBrokerConnection, login: InterBrokerLogin,
                       timeout_s: float) -> None:
    """Log in on a new connection (SaslHandshake v1, SaslAuthenticate v2); a refusal is
    KafkaClientError with the broker's code (SASL_AUTHENTICATION_FAILED, ...)."""
    handshake = await conn.request(SaslHandshakeRequest(mechanism=login.mechanism), 1, timeout_s)
    if handshake.error_code != ErrorCode.NONE:
        raise KafkaClientError(f"SaslHandshake {login.mechanism}: "
                               f"{ErrorCode(handshake.error_code).name}", handshake.error_code)

    async def send(token: bytes) -> bytes:
        r = await conn.request(SaslAuthenticateRequest(auth_bytes=token), 2, timeout_s)
        if r.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"SaslAuthenticate as {login.username}: "
                                   f"{ErrorCode(r.error_code).name} {r.error_message or ''}",
                                   r.error_code)
        return bytes(r.auth_bytes)

    if login.mechanism == "PLAIN":
        await send(f"\0{login.username}\0{login.password}".encode())
        return
    client = ScramClient(login.mechanism, login.username, login.password)
    try:
        client.verify(await send(client.final(await send(client.first()))))
    except ScramError as e:
        raise KafkaClientError(str(e), ErrorCode.SASL_AUTHENTICATION_FAILED) from None
