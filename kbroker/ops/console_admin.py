"""The console's write actions (operations.write.enable): create and delete topics, reset a
group's committed offsets, done as Kafka's AdminClient does them, over the Kafka protocol.

    POST   /api/topics                  {"name": T, "partitions": N, "replication_factor": R,
                                         "configs": {key: value}}; N and R absent or -1:
                                         the broker's num.partitions and
                                         default.replication.factor
    DELETE /api/topics/{topic}
    POST   /api/groups/{group}/offsets  {"topic": T, "to": "earliest" | "latest" | N}: every
                                         partition of T; N is brought into each partition's
                                         [log start offset, high watermark], as
                                         kafka-consumer-groups.sh --to-offset does

Each sends the requests AdminClient sends, to the broker that answers them: Metadata and
FindCoordinator to this broker, CreateTopics and DeleteTopics to the controller (again,
if it moved meanwhile), ListOffsets to each partition's leader, OffsetCommit with
generation -1 and no member id to the group's coordinator
(AdminClient.alterConsumerGroupOffsets). So every check and error is the Kafka APIs'
own (delete.topic.enable, TOPIC_ALREADY_EXISTS, invalid configs, a group with active
members refused with UNKNOWN_MEMBER_ID), in cluster mode as on a single broker.

Who asks (kbroker.ops.console_auth): a request this broker answers is handed to its
Kafka API in the process, as the console's user: encoded as on the wire and given to the
broker's one RequestDispatcher (kbroker.server.request_dispatcher, the connections' own)
through a _ConsoleChannel, so it is decoded, authorized by the broker's authorizer for
that user and host and handled exactly as a client's request is (so the console needs
no Kafka listener it could reach, whatever their security), with client id
`kbroker-console`; the response's bytes are decoded as a client decodes them. A request another broker answers
(cluster mode) is first authorized here for the user as that API would authorize it
(REMOTE_CHECKS; every broker holds the same ACLs) and then sent over the inter-broker
listener, as the brokers send each other theirs. Refused: a 403 with the API's
*_AUTHORIZATION_FAILED code.

Refused before anything is sent: a user the console does not know (401, console_auth);
every write while operations.write.enable is false
(403, the default); a request that says it comes from another origin (403: an Origin
header other than this listener's, or Sec-Fetch-Site cross-site; a browser sends a JSON
POST or a DELETE cross-origin only after a preflight, which gets no CORS answer here);
a POST whose body is not JSON (415) or not an object with the right fields (400); any
write while the broker is not running (503). A Kafka error is 404 for an unknown topic,
409 for a topic that exists or a group with active members, 503 when the broker that
should answer is not there, else 400, each with {"error": "NAME: message",
"error_code": n}; success is 200 with what was done. Every write empties the console's
cache of GET answers, so the next page shows it.

Lock: the broker's event loop (the connections live for one action).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kbroker.client.async_connection import AsyncBrokerConnection
from kbroker.client.connection import KafkaClientError, encode_request
from kbroker.common.error_code import ErrorCode
from kbroker.ops.console_auth import context, listener_name, principal_of
from kbroker.protocol.api_key import ApiKey, response_header_version
from kbroker.protocol.codec import Reader
from kbroker.protocol.messages import RESPONSES
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.delete_topics import DeleteTopicsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.server.authorization import (
    authorize_cluster,
    authorize_group,
    authorize_topic,
)
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse, RequestContext
from kbroker.server.request_frame import encode_response
from kbroker.server.response_slots import ResponseSlot

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker

log = logging.getLogger(__name__)

CLIENT_ID = "kbroker-console"
TIMEOUT_MS = 30_000
CONTROLLER_ATTEMPTS = 3  # NOT_CONTROLLER: the controller moved; ask Metadata again
# what AdminClient retries, after fresh Metadata / FindCoordinator, for up to RETRY_S
RETRIABLE = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REQUEST_TIMED_OUT})
RETRY_S = 30.0
RETRY_BACKOFF_S = 0.2
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
METADATA_V, CREATE_TOPICS_V, DELETE_TOPICS_V = 9, 5, 5
FIND_COORDINATOR_V, LIST_OFFSETS_V, OFFSET_COMMIT_V = 3, 5, 7


class AdminFailed(Exception):
    """A Kafka error code (ErrorCode) and the broker's message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


def _check(code: int, message: str | None = None) -> None:
    if code != ErrorCode.NONE:
        raise AdminFailed(code, message)


# What the APIs the console sends to other brokers check first, as KafkaApis does:
# the refusal's code, or None (ctx is the console's user)
def _create_topics(ctx: RequestContext, r: Any) -> int | None:
    for t in r.topics:
        if not (authorize_cluster(ctx, "CREATE") or authorize_topic(ctx, "CREATE", t.name)):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


def _delete_topics(ctx: RequestContext, r: Any) -> int | None:
    ok = all(authorize_topic(ctx, "DELETE", t) for t in r.topic_names)
    return None if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _list_offsets(ctx: RequestContext, r: Any) -> int | None:
    ok = all(authorize_topic(ctx, "DESCRIBE", t.name) for t in r.topics)
    return None if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _offset_commit(ctx: RequestContext, r: Any) -> int | None:
    if not authorize_group(ctx, "READ", r.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    ok = all(authorize_topic(ctx, "READ", t.name) for t in r.topics)
    return None if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED


REMOTE_CHECKS = {
    ApiKey.CREATE_TOPICS: _create_topics, ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.LIST_OFFSETS: _list_offsets, ApiKey.OFFSET_COMMIT: _offset_commit,
}


class _Unmetered:
    """The console's requests are not a client's: no client quota records them."""

    active = False


class _ConsoleChannel:
    """The console's side of one request that this broker's RequestDispatcher serves, as
    a client connection is for a client's: the console user's principal and host
    (kbroker.ops.console_auth), the listener the console acts on, and `answer`: the
    response's encoded parts, or AdminFailed(NETWORK_EXCEPTION) where a connection would
    be closed (an undecodable request, a refusal or failure without an error answer,
    CLOSE_CONNECTION)."""

    quotas = _Unmetered()

    def __init__(self, http_request: web.Request, listener: str, api_key: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.peer = f"{http_request.remote or 'unknown'}:0"
        self.listener_name = listener
        self.principal = principal_of(http_request)
        self.client_software: str | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.deferred: set[PendingResponse] = set()
        self.api_key = api_key
        self.answer: asyncio.Future[list[Any]] = self.loop.create_future()

    def new_slot(self, api_key: int, version: int, correlation_id: int, size: int,
                 header: Any = None, request: Any = None) -> ResponseSlot:
        return ResponseSlot(api_key, version, correlation_id, size)

    def complete(self, slot: ResponseSlot, response: Any, close_after: bool = False) -> None:
        if self.answer.done():
            return
        if response is CLOSE_CONNECTION or response is None or close_after:
            self.close()
            return
        try:
            parts = encode_response(response, slot.api_key, slot.version, slot.correlation_id)
        except Exception as e:  # as a connection closes on it, without hanging the action
            self.answer.set_exception(e)
            return
        self.answer.set_result(parts)

    def recorded(self, quota: str, slot: ResponseSlot, value: float) -> int:
        return 0

    def close(self) -> None:
        if not self.answer.done():
            self.answer.set_exception(AdminFailed(ErrorCode.NETWORK_EXCEPTION,
                                                  f"{ApiKey(self.api_key).name} closed"))

    def cancel(self) -> None:
        """The action is over: what the handler still runs is cancelled."""
        for task in list(self.tasks):
            task.cancel()
        for pending in self.deferred:
            pending.cancel()
        self.deferred.clear()


class ConsoleAdmin:
    """One write action of one console user (`request`): its connections to other
    brokers, opened as needed and closed at the end."""

    def __init__(self, broker: ServedBroker, request: web.Request) -> None:
        self.broker = broker
        self.http_request = request
        self._connections: dict[tuple[str, int], AsyncBrokerConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}

    async def __aenter__(self) -> ConsoleAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _user(self, api_key: int, version: int) -> RequestContext:
        state = self.broker.services
        if state is None:
            raise AdminFailed(ErrorCode.BROKER_NOT_AVAILABLE, "the broker is not running")
        return context(state, self.http_request, listener_name(self.broker), api_key, version,
                       client_id=CLIENT_ID)

    async def _send(self, node_id: int | None, request: Any, version: int) -> Any:
        """`request`'s answer from broker `node_id` (None: this one)."""
        state = self.broker.services
        if node_id is None or state is not None and node_id == state.node_id:
            return await self._local(request, version)
        check = REMOTE_CHECKS.get(request.API_KEY)
        if check is not None and state is not None and state.authorizer is not None:
            refused = check(self._user(request.API_KEY, version), request)
            if refused is not None:
                raise AdminFailed(refused, f"{ApiKey(request.API_KEY).name} is not authorized "
                                           f"for {principal_of(self.http_request)}")
        return await self._request(self._address_of(node_id), request, version)

    async def _local(self, request: Any, version: int) -> Any:
        """This broker's Kafka API answers `request` as it answers a client: the request
        encoded as on the wire and handed to the broker's RequestDispatcher (decoded,
        authorized for the console's user, handled) through a _ConsoleChannel, and the
        response's bytes decoded as a client decodes them."""
        api_key = request.API_KEY
        state, server = self.broker.services, self.broker.server
        if state is None or server is None:
            raise AdminFailed(ErrorCode.BROKER_NOT_AVAILABLE, "the broker is not running")
        frame = encode_request(request, version, 0, CLIENT_ID)
        channel = _ConsoleChannel(self.http_request, listener_name(self.broker), api_key)
        server.dispatch(channel, bytearray(memoryview(frame)[4:]))
        try:
            parts = await channel.answer
        finally:
            channel.cancel()
        wire = b"".join(p if isinstance(p, bytes | bytearray) else p.read_bytes() for p in parts)
        reader = Reader(bytearray(wire[4:]))
        ResponseHeader.decode(reader, response_header_version(api_key, version))
        return RESPONSES[api_key].decode(reader, version)

    async def _request(self, address: tuple[str, int], request: Any, version: int) -> Any:
        try:
            conn = self._connections.get(address)
            if conn is None or conn.closed:
                conn = await AsyncBrokerConnection.open(*address, CLIENT_ID, TIMEOUT_MS / 1000)
                login = self.broker.config.inter_broker_login
                if login is not None:  # a SASL inter-broker listener: in as the brokers are
                    from kbroker.cluster.broker_channel import authenticate

                    try:
                        await authenticate(conn, login, TIMEOUT_MS / 1000)
                    except BaseException:
                        conn.close()
                        raise
                self._connections[address] = conn
            return await conn.request(request, version, TIMEOUT_MS / 1000)
        except KafkaClientError as e:
            raise AdminFailed(e.error_code or ErrorCode.NETWORK_EXCEPTION, str(e)) from None

    async def _metadata(self, topics: list[str]) -> Any:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False)
        response = await self._send(None, request, METADATA_V)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    def _address_of(self, node_id: int) -> tuple[str, int]:
        address = self._brokers.get(node_id)
        if address is None:
            raise AdminFailed(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not alive")
        return address

    async def _to_controller(self, request: Any, version: int, results: str) -> Any:
        """The one topic result (response.<results>[0]) of a request to the controller."""
        for attempt in range(CONTROLLER_ATTEMPTS):
            metadata = await self._metadata([])
            response = await self._send(metadata.controller_id, request, version)
            found = getattr(response, results)
            if len(found) != 1:
                raise AdminFailed(ErrorCode.UNKNOWN_SERVER_ERROR,
                                  f"{len(found)} results for one topic")
            if found[0].error_code != ErrorCode.NOT_CONTROLLER or attempt + 1 == CONTROLLER_ATTEMPTS:
                return found[0]
        raise AssertionError("unreachable")

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str]) -> dict[str, Any]:
        request = CreateTopicsRequest(timeout_ms=TIMEOUT_MS, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor,
                assignments=[], configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                         for k, v in configs.items()])])
        result = await self._to_controller(request, CREATE_TOPICS_V, "topics")
        _check(result.error_code, result.error_message)
        return {"name": name, "partitions": result.num_partitions,
                "replication_factor": result.replication_factor}

    async def delete_topic(self, name: str) -> dict[str, Any]:
        request = DeleteTopicsRequest(topic_names=[name], timeout_ms=TIMEOUT_MS)
        result = await self._to_controller(request, DELETE_TOPICS_V, "responses")
        _check(result.error_code, result.error_message)
        return {"name": name}

    async def reset_offsets(self, group: str, topic: str, to: str | int) -> dict[int, int]:
        """Commit `to` for every partition of `topic` in `group`: {partition: offset}.
        Retried while the answer is retriable (RETRIABLE: a coordinator or leader moving or
        still loading, __consumer_offsets still being created), as AdminClient does."""
        deadline = asyncio.get_running_loop().time() + RETRY_S
        while True:
            try:
                return await self._reset_offsets(group, topic, to)
            except AdminFailed as e:
                if e.code not in RETRIABLE or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _reset_offsets(self, group: str, topic: str, to: str | int) -> dict[int, int]:
        metadata = await self._metadata([topic])
        found = metadata.topics[0]
        _check(found.error_code, f"topic {topic!r}")
        leaders: dict[int, int] = {p.partition_index: p.leader_id for p in found.partitions}
        if to == "earliest" or to == "latest":
            targets = await self._list_offsets(topic, leaders, EARLIEST if to == "earliest" else LATEST)
        else:
            assert isinstance(to, int)
            low = await self._list_offsets(topic, leaders, EARLIEST)
            high = await self._list_offsets(topic, leaders, LATEST)
            targets = {p: min(max(to, low[p]), high[p]) for p in leaders}
        coordinator = await self._send(None, FindCoordinatorRequest(
            key=group, key_type=0), FIND_COORDINATOR_V)
        _check(coordinator.error_code, coordinator.error_message)
        commit = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                    committed_metadata="")
                for p, o in sorted(targets.items())])])
        self._brokers.setdefault(coordinator.node_id, (coordinator.host, coordinator.port))
        response = await self._send(coordinator.node_id, commit, OFFSET_COMMIT_V)
        for t in response.topics:
            for p in t.partitions:
                _check(p.error_code, f"{t.name}-{p.partition_index}")
        return dict(sorted(targets.items()))

    async def _list_offsets(self, topic: str, leaders: Mapping[int, int],
                            timestamp: int) -> dict[int, int]:
        by_leader: dict[int, list[int]] = {}
        for partition, leader in leaders.items():
            if leader < 0:
                raise AdminFailed(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
            by_leader.setdefault(leader, []).append(partition)
        offsets: dict[int, int] = {}
        for leader, partitions in by_leader.items():
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in partitions])])
            response = await self._send(leader, request, LIST_OFFSETS_V)
            for t in response.topics:
                for p in t.partitions:
                    _check(p.error_code, f"{topic}-{p.partition_index}")
                    offsets[p.partition_index] = p.offset
        return offsets


# -- HTTP

_NOT_FOUND = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND}
_FORBIDDEN = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
              ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
_CONFLICT = {ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.UNKNOWN_MEMBER_ID,
             ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS}
_UNAVAILABLE = {ErrorCode.NETWORK_EXCEPTION, ErrorCode.BROKER_NOT_AVAILABLE,
                ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}
INT32_MAX, INT16_MAX = 2**31 - 1, 2**15 - 1

Action = Callable[[ConsoleAdmin, web.Request], Awaitable[Any]]


class BadRequest(ValueError):
    """The HTTP request itself is wrong (400), before anything is sent to Kafka."""


def add_routes(app: web.Application, broker: ServedBroker, written: Callable[[], None]) -> None:
    """The write routes; `written` is called after every write that was sent."""

    def route(method: str, path: str, action: Action) -> None:
        async def handler(request: web.Request) -> web.Response:
            refusal = _refusal(broker, request)
            if refusal is not None:
                return refusal
            try:
                async with ConsoleAdmin(broker, request) as admin:
                    done = await action(admin, request)
            except BadRequest as e:
                return web.json_response({"error": str(e)}, status=400)
            except AdminFailed as e:
                return web.json_response({"error": str(e), "error_code": int(e.code)},
                                         status=_status(e.code))
            finally:
                written()
            log.info("console: %s %s by %s: %s", method, request.path, principal_of(request), done)
            return web.json_response(done)
        app.router.add_route(method, path, handler)

    route("POST", "/api/topics", _create_topic)
    route("DELETE", "/api/topics/{topic}", _delete_topic)
    route("POST", "/api/groups/{group}/offsets", _reset_offsets)


def _refusal(broker: ServedBroker, request: web.Request) -> web.Response | None:
    if not broker.config.operations_write_enable:
        return web.json_response({"error": "the console is read-only: writes need "
                                           "operations.write.enable=true"}, status=403)
    origin = request.headers.get("Origin")
    if (origin is not None and origin != f"{request.scheme}://{request.host}"
            or request.headers.get("Sec-Fetch-Site") == "cross-site"):
        return web.json_response({"error": f"a write from another origin ({origin})"},
                                 status=403)
    if broker.services is None or not broker.running:
        return web.json_response({"error": f"the broker is not running ({broker.phase.name})"},
                                 status=503)
    if request.method == "POST" and request.content_type != "application/json":
        return web.json_response({"error": "the body must be application/json"}, status=415)
    return None


def _status(code: ErrorCode) -> int:
    if code in _NOT_FOUND:
        return 404
    if code in _FORBIDDEN:
        return 403
    if code in _CONFLICT:
        return 409
    return 503 if code in _UNAVAILABLE else 400


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.text())
    except ValueError as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _string(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} must be a non-empty string")
    return value


def _integer(body: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{name} must be an integer in [{low}, {high}]")
    return value


async def _create_topic(admin: ConsoleAdmin, request: web.Request) -> dict[str, Any]:
    body = await _body(request)
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int | float) and not isinstance(v, bool)
            for k, v in configs.items()):
        raise BadRequest("configs must be an object of key: value (strings or numbers)")
    return await admin.create_topic(
        _string(body, "name"), _integer(body, "partitions", -1, -1, INT32_MAX),
        _integer(body, "replication_factor", -1, -1, INT16_MAX),
        {k: str(v) for k, v in configs.items()})


async def _delete_topic(admin: ConsoleAdmin, request: web.Request) -> dict[str, Any]:
    return await admin.delete_topic(request.match_info["topic"])


async def _reset_offsets(admin: ConsoleAdmin, request: web.Request) -> dict[str, Any]:
    body = await _body(request)
    group, topic, to = request.match_info["group"], _string(body, "topic"), body.get("to")
    if not (to in ("earliest", "latest")
            or isinstance(to, int) and not isinstance(to, bool) and to >= 0):
        raise BadRequest('to must be "earliest", "latest" or an offset >= 0')
    try:
        offsets = await admin.reset_offsets(group, topic, to)
    except AdminFailed as e:
        if e.code in _CONFLICT - {ErrorCode.TOPIC_ALREADY_EXISTS}:
            raise AdminFailed(e.code, f"group {group!r} has active members: stop them first "
                                      "(as kafka-consumer-groups.sh requires)") from None
        raise
    return {"group": group, "topic": topic,
            "offsets": [{"partition": p, "offset": o} for p, o in offsets.items()]}
