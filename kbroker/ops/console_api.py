"""The web console's JSON: what the broker knows, read on its loop (the write actions,
behind operations.write.enable, are kbroker.ops.console_admin's).

    GET /api/overview                 this broker, the cluster's brokers (the live ones,
                                      then those not alive that hold replicas) and
                                      controller, counts (topics, partitions, groups,
                                      connections, the cluster's under-replicated and
                                      offline partitions)
    GET /api/topics                   every topic: partitions, replication factor, size
                                      and records on this broker, its configs that are
                                      not Kafka's defaults (as DescribeConfigs reports)
    GET /api/topics/{topic}           one topic's partitions: leader, leader epoch,
                                      replicas, ISR, offline replicas, and where this
                                      broker holds a replica its offsets, size, segments
    GET /api/groups                   the groups this broker coordinates: state, protocol,
                                      members with their assignments, committed offsets
                                      and lag per partition (as kbroker.ops.metrics)
    GET /api/messages?topic=T&partition=P&offset=O&limit=N
                                      up to N (1-500, default 20) records of a partition
                                      this broker holds, from offset O (default: the
                                      last N below the high watermark): offset,
                                      timestamp, key, value and headers as base64 (the
                                      console shows them as text, JSON or hex)
    GET /api/client-metrics           the client metrics subscriptions and the client
                                      instances pushing metrics (KIP-714), each with its
                                      latest series (kbroker.ops.client_metrics)
    GET /api/bench                    the latest bench/matrix.py report found under
                                      bench/results (the working directory's, then the
                                      source tree's): its JSON summary; /api/bench/image
                                      its PNG

Who may see what (kbroker.ops.console_auth names the user): what each answer holds is
authorized for the console's user as the Kafka API that shows the same authorizes it,
with the broker's authorizer (none: everything). /api/topics and the overview's topic
count hold the topics the user may DESCRIBE (as Metadata), their config overrides only
with DESCRIBE_CONFIGS (DescribeConfigs); /api/topics/{topic} needs DESCRIBE on the
topic and /api/messages READ (Fetch), else a 403 (TOPIC_AUTHORIZATION_FAILED, also for
a topic that does not exist, so a 403 tells nothing of what exists); /api/groups and the
overview's group count hold the groups the user may DESCRIBE (ListGroups,
DescribeGroups), and of each group's offsets and lag those of topics the user may
DESCRIBE (OffsetFetch). /api/client-metrics needs DESCRIBE_CONFIGS on the cluster (as
ListConfigResources and a CLIENT_METRICS DescribeConfigs), else a 403.

Each URL's answer is computed at most once per CACHE_S (a second) for each user and
served from memory meanwhile, so a page reloaded in a loop costs the broker little. A parameter that is missing, not a number or out of range is a 400, a topic or
partition that does not exist here a 404, and anything while the broker is not running
(starting, loading logs, stopped) a 503; each with {"error": "..."}.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kbroker import __version__
from kbroker.common.configs import TOPIC_CONFIGS
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.ops import client_metrics, console_admin
from kbroker.ops.console_auth import cache_key, context, listener_name
from kbroker.ops.metrics import group_lag
from kbroker.protocol.codec import DecodeError, Reader
from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.records.file_slice import FileSlice
from kbroker.records.record_iter import iter_records
from kbroker.server.authorization import (
    authorize_cluster,
    authorize_group,
    authorize_topic,
    authorized_topics,
)
from kbroker.server.config_describe import ConfigSource, describe_topic
from kbroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker

MAX_RECORDS = 500
DEFAULT_RECORDS = 20
READ_BYTES = 4 * 1024 * 1024  # a message browser read, at most
CACHE_S = 1.0  # a URL's answer is computed at most this often
CACHE_ENTRIES = 256
BENCH_DIRS = (Path.cwd() / "bench" / "results",
              Path(__file__).resolve().parents[2] / "bench" / "results")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application, broker: ServedBroker) -> None:
    cache: dict[str, tuple[float, bytes]] = {}  # URL -> (when, body): CACHE_S per URL

    def route(path: str, build: Callable[[RequestContext, web.Request], Any]) -> None:
        async def handler(request: web.Request) -> web.Response:
            services = broker.services
            if services is None or not broker.running:
                return _error(503, f"the broker is not running ({broker.phase.name})")
            now = asyncio.get_running_loop().time()
            key = cache_key(request)
            found = cache.get(key)
            if found is None or now - found[0] >= CACHE_S:
                if len(cache) >= CACHE_ENTRIES:
                    cache.clear()
                user = context(services, request, listener_name(broker))
                found = cache[key] = (now, _dumps(build(user, request)).encode())
            return web.Response(body=found[1], content_type="application/json")
        app.router.add_get(path, handler)

    route("/api/overview", lambda user, _r: overview(broker, user))
    route("/api/topics", lambda user, _r: topics(user))
    route("/api/topics/{topic}", lambda user, r: topic(user, r.match_info["topic"]))
    route("/api/groups", lambda user, _r: groups(user))
    route("/api/messages", lambda user, r: messages(user, r.query))
    route("/api/client-metrics", lambda user, _r: pushed_client_metrics(user))
    console_admin.add_routes(app, broker, cache.clear)  # writes (operations.write.enable)
    app.router.add_get("/api/bench", _bench)
    app.router.add_get("/api/bench/image", _bench_image)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


_REFUSALS: dict[int, type[web.HTTPException]] = {
    400: web.HTTPBadRequest, 403: web.HTTPForbidden, 404: web.HTTPNotFound}


def _refused(status: int, message: str) -> web.HTTPException:
    """A 4xx with a JSON body naming what was wrong."""
    return _REFUSALS[status](text=_dumps({"error": message}), content_type="application/json")


def _topic_refused(name: str, operation: str) -> web.HTTPException:
    return _refused(403, f"TOPIC_AUTHORIZATION_FAILED: {operation} on topic {name!r} is not "
                         "authorized")


def _visible_topics(user: RequestContext) -> list[Any]:
    """The topics `user` may DESCRIBE, as Metadata shows them."""
    state = user.services
    allowed = authorized_topics(user, "DESCRIBE", (i.name for i in state.topics))
    return [i for i in state.topics if i.name in allowed]


def _visible_groups(user: RequestContext) -> list[Any]:
    groups = user.services.group_coordinator.groups.values()
    return [g for g in groups if authorize_group(user, "DESCRIBE", g.group_id)]


def overview(broker: ServedBroker, user: RequestContext) -> dict[str, Any]:
    """As `kbroker cluster status` shows the cluster: the live brokers, then each broker
    that is not alive but holds replicas; under-replicated and offline partitions
    counted over the cluster's partitions (of the topics `user` may DESCRIBE), as the
    Topics page and the CLI count them, not only those this broker leads."""
    state = user.services
    cluster = state.cluster
    controller = cluster.controller_id
    infos = _visible_topics(user)
    partitions = [pm for info in infos for pm in cluster.partitions(info)]
    brokers = []
    for node in sorted(cluster.alive_brokers(), key=lambda b: b.broker_id):
        host, port = next(iter(node.endpoints.values()), ("", 0))
        brokers.append({"id": node.broker_id, "host": host, "port": port, "rack": node.rack,
                        "controller": node.broker_id == controller,
                        "this": node.broker_id == state.node_id, "alive": True})
    alive = {b["id"] for b in brokers}
    for missing in sorted({r for pm in partitions for r in pm.replicas} - alive):
        brokers.append({"id": missing, "host": None, "port": None, "rack": None,
                        "controller": False, "this": False, "alive": False,
                        "status": "not alive; holds replicas"})
    server = broker.server
    return {
        "version": __version__, "node_id": state.node_id, "cluster_id": state.cluster_id,
        "clustered": state.support.clustered, "phase": broker.phase.name,
        "bootstrap_servers": broker.bootstrap_servers, "controller_id": controller,
        "brokers": brokers, "topics": len(infos),
        "partitions": sum(i.partitions for i in infos),
        "replicas_here": len(state.log_manager.all_logs()),
        "groups": len(_visible_groups(user)),
        "connections": len(server.connections) if server is not None else 0,
        "under_replicated_partitions": sum(1 for pm in partitions if len(pm.isr) < len(pm.replicas)),
        "offline_partitions": sum(1 for pm in partitions if pm.leader < 0),
        "writes_enabled": broker.config.operations_write_enable,
        "principal": str(user.principal),
        "authorizer": state.authorizer is not None,
    }


def _broker_topic_configs(user: RequestContext) -> dict[str, str]:
    """The topic configs the broker itself sets (server.properties, dynamic broker
    configs: DescribeConfigs' STATIC_BROKER_CONFIG and DYNAMIC_*_BROKER_CONFIG
    synonyms), rendered as DescribeConfigs renders them: what every topic shows for a
    key it does not override. Computed once per answer, not per topic."""
    state = user.services
    described = describe_topic({}, state.default_log_config, state.config,
                               layers=state.support.dynamic_config_layers())
    return {d.name: d.value or "" for d in described if d.source != ConfigSource.DEFAULT_CONFIG}


def _configs(user: RequestContext, info: Any, broker_level: dict[str, str]) -> dict[str, str] | None:
    """A topic's configs that are not Kafka's defaults, as `kbroker topics describe` (and
    kafka-topics.sh --describe) print them from DescribeConfigs: the broker's settings of
    topic keys (`broker_level`) under the topic's own overrides; None when `user` may not
    DESCRIBE_CONFIGS it."""
    if not authorize_topic(user, "DESCRIBE_CONFIGS", info.name):
        return None
    out = dict(broker_level)
    for name, raw in info.configs.items():
        key = TOPIC_CONFIGS.get(name)
        out[name] = (key.render(key.parse(raw)) or "") if key is not None else raw
    return dict(sorted(out.items()))


def topics(user: RequestContext) -> list[dict[str, Any]]:
    state = user.services
    broker_level = _broker_topic_configs(user)
    out = []
    for info in sorted(_visible_topics(user), key=lambda i: i.name):
        parts = state.cluster.partitions(info)
        size = records = 0
        for p in range(info.partitions):
            lg = state.get_log(info.name, p)
            if lg is not None and not lg.closed:
                size += lg.size_in_bytes
                records += lg.high_watermark - lg.log_start_offset
        out.append({
            "name": info.name, "topic_id": str(info.topic_id), "partitions": info.partitions,
            "replication_factor": max((len(pm.replicas) for pm in parts), default=0),
            "internal": info.is_internal, "size_bytes": size, "records": records,
            "under_replicated": sum(1 for pm in parts if len(pm.isr) < len(pm.replicas)),
            "offline": sum(1 for pm in parts if pm.leader < 0),
            "configs": _configs(user, info, broker_level),
        })
    return out


def topic(user: RequestContext, name: str) -> dict[str, Any]:
    state = user.services
    if not authorize_topic(user, "DESCRIBE", name):
        raise _topic_refused(name, "DESCRIBE")
    info = state.topics.get(name)
    if info is None:
        raise _refused(404, f"no topic {name!r}")
    partitions = []
    for pm in state.cluster.partitions(info):
        entry: dict[str, Any] = {
            "partition": pm.partition, "leader": pm.leader, "leader_epoch": pm.leader_epoch,
            "replicas": list(pm.replicas), "isr": list(pm.isr),
            "offline_replicas": list(pm.offline_replicas)}
        lg = state.get_log(name, pm.partition)
        if lg is not None and not lg.closed:
            entry.update(log_start_offset=lg.log_start_offset, high_watermark=lg.high_watermark,
                         log_end_offset=lg.log_end_offset, size_bytes=lg.size_in_bytes,
                         segments=len(lg.segments))
        partitions.append(entry)
    return {"name": name, "topic_id": str(info.topic_id), "internal": info.is_internal,
            "configs": _configs(user, info, _broker_topic_configs(user)),
            "partitions": partitions}


def groups(user: RequestContext) -> list[dict[str, Any]]:
    state = user.services
    out = []
    for group in sorted(_visible_groups(user), key=lambda g: g.group_id):
        members = [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "assignment": _assignment(m.assignment)} for m in group.members.values()]
        lags = [(t, p, o, lag) for t, p, o, lag in group_lag(state, group)
                if authorize_topic(user, "DESCRIBE", t)]
        offsets = [{"topic": t, "partition": p, "committed_offset": o, "lag": lag}
                   for t, p, o, lag in lags]
        out.append({
            "group_id": group.group_id, "state": group.state.value,
            "protocol_type": group.protocol_type, "protocol": group.protocol_name,
            "generation_id": group.generation_id, "leader_id": group.leader_id,
            "members": members, "offsets": offsets,
            "lag": sum(lag or 0 for _t, _p, _o, lag in lags)})
    return out


def pushed_client_metrics(user: RequestContext) -> dict[str, Any]:
    if not authorize_cluster(user, "DESCRIBE_CONFIGS"):
        raise _refused(403, "CLUSTER_AUTHORIZATION_FAILED: DESCRIBE_CONFIGS on the cluster is "
                            "not authorized")
    return client_metrics.console_view(user.services.client_metrics_manager)


def _assignment(data: bytes) -> dict[str, list[int]] | None:
    """A `consumer` protocol member's assignment, topic -> partitions; None if another
    protocol's (or undecodable)."""
    if not data:
        return {}
    reader = Reader(bytearray(data))
    try:
        version = reader.int16()
        decoded = ConsumerProtocolAssignment.decode(reader, min(max(version, 0), 3))
    except (DecodeError, UnicodeDecodeError, ValueError):
        return None
    return {tp.topic: sorted(tp.partitions) for tp in decoded.assigned_partitions}


def _int(query: Any, name: str, default: int | None, low: int, high: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        if default is None:
            raise _refused(400, f"{name} is required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise _refused(400, f"{name} must be an integer, not {text[:40]!r}") from None
    if not low <= value <= high:
        raise _refused(400, f"{name} must be in [{low}, {high}]")
    return value


def messages(user: RequestContext, query: Any) -> dict[str, Any]:
    state = user.services
    name = query.get("topic")
    if not name:
        raise _refused(400, "topic is required")
    if not authorize_topic(user, "READ", name):
        raise _topic_refused(name, "READ")
    partition = _int(query, "partition", 0, 0, 2**31 - 1)
    limit = _int(query, "limit", DEFAULT_RECORDS, 1, MAX_RECORDS)
    if state.topics.get(name) is None:
        raise _refused(404, f"no topic {name!r}")
    lg = state.get_log(name, partition)
    if lg is None or lg.closed:
        raise _refused(404, f"this broker holds no replica of {name}-{partition}")
    high_watermark = lg.high_watermark
    start = _int(query, "offset", max(high_watermark - limit, lg.log_start_offset), 0, 2**63 - 1)
    start = max(start, lg.log_start_offset)
    out: list[dict[str, Any]] = []
    try:
        data = lg.read(start, READ_BYTES, max_offset=high_watermark) if start < high_watermark else None
    except KafkaError as e:
        raise _refused(400, str(e)) from None
    if data is not None and data.records is not None:
        raw = FileSlice(*data.records).read_bytes()
        for record in iter_records(raw):
            if record.offset < start:
                continue
            if len(out) >= limit:
                break
            out.append({"offset": record.offset, "timestamp": record.timestamp,
                        "key": _b64(record.key), "value": _b64(record.value),
                        "headers": [[k, _b64(v)] for k, v in record.headers]})
    return {"topic": name, "partition": partition, "offset": start,
            "log_start_offset": lg.log_start_offset, "high_watermark": high_watermark,
            "records": out, "tp": str(TopicPartition(name, partition))}


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


def latest_bench_report() -> Path | None:
    for directory in BENCH_DIRS:
        found = sorted(directory.glob("matrix-*.json")) if directory.is_dir() else []
        if found:
            return found[-1]
    return None


async def _bench(request: web.Request) -> web.Response:
    path = latest_bench_report()
    if path is None:
        return _error(404, "no bench/matrix.py report under bench/results")
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return _error(404, f"cannot read {path.name}: {e}")
    rows = [{k: r.get(k) for k in ("cell", "phase", "metric", "a", "b", "ratio")}
            for r in document.get("summary", [])]
    return web.json_response({
        "file": path.name, "started": document.get("started"),
        "a": (document.get("a") or {}).get("name"), "b": (document.get("b") or {}).get("name"),
        "cells": document.get("cells", []), "summary": rows,
        "geomean_ratio": document.get("geomean_ratio"),
        "image": path.with_suffix(".png").exists()}, dumps=_dumps)


async def _bench_image(request: web.Request) -> web.StreamResponse:
    path = latest_bench_report()
    image = path.with_suffix(".png") if path is not None else None
    if image is None or not image.exists():
        return _error(404, "the latest bench report has no PNG")
    return web.FileResponse(image)
