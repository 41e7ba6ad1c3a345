"""Capture raw request frames from real Kafka clients, for decode tests.

A tiny fake broker on 127.0.0.1 that answers just enough for producers and
consumers to send Produce and Fetch: ApiVersions (the ranges of NOTES.md 2.2, or
--max overrides), Metadata (one broker, itself; every topic asked for has one
partition led by it; topic "t" when all topics are asked for), Produce (success,
base offset 0), Fetch (empty, after max_wait_ms capped at 0.5 s) and ListOffsets
(offset 0). Other requests are recorded and left unanswered.

Each request frame (request header + body, without the int32 size prefix) is written
to OUT/<client>-<api>-v<N>.bin, the first one of each (api, version) per client.

    python tools/capture_frames.py serve --client NAME [--port 9092] [--out DIR]
    python tools/capture_frames.py run [--out DIR] [--only CLIENT ...]  # all clients

``run`` starts the server and drives each installed client in a subprocess:
confluent_kafka (librdkafka 2.16), kcat (Debian librdkafka 2.0.2), kafka_python,
aiokafka; each produces one message to "t" and then fetches "t"/0 from offset 0.
"""

from __future__ import annotations

import argparse
import socket
import socketserver
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.common.error_code import ErrorCode  # noqa: E402
from kbroker.protocol.api_key import (  # noqa: E402
    ApiKey,
    request_header_version,
    response_header_version,
)
from kbroker.protocol.codec import Reader, Writer  # noqa: E402
from kbroker.protocol.messages import REQUESTS  # noqa: E402
from kbroker.protocol.messages.api_versions import ApiVersionsResponse  # noqa: E402
from kbroker.protocol.messages.fetch import FetchResponse  # noqa: E402
from kbroker.protocol.messages.list_offsets import ListOffsetsResponse  # noqa: E402
from kbroker.protocol.messages.metadata import MetadataResponse  # noqa: E402
from kbroker.protocol.messages.produce import ProduceResponse  # noqa: E402
from kbroker.protocol.messages.request_header import RequestHeader  # noqa: E402
from kbroker.protocol.messages.response_header import ResponseHeader  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tests" / "protocol" / "fixtures"

# NOTES.md section 2.2 "advertise" column (ApiVersions up to 4, its trivial version).
ADVERTISED: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
}

TOPIC_ID = uuid.UUID("6b6b6b6b-0000-4000-8000-000000000001")
NODE_ID = 1


class CaptureServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, out: Path, advertised: dict[int, tuple[int, int]]) -> None:
        super().__init__(("127.0.0.1", port), CaptureHandler)
        self.out = out
        self.advertised = advertised
        self.client = "client"
        self.seen: set[tuple[str, int, int]] = set()
        self.lock = threading.Lock()
        self.log: list[str] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def record(self, api_key: int, version: int, frame: bytes) -> None:
        with self.lock:
            key = (self.client, api_key, version)
            self.log.append(f"{self.client} {ApiKey(api_key).name} v{version} ({len(frame)} bytes)")
            if key in self.seen:
                return
            self.seen.add(key)
        name = ApiKey(api_key).name.lower()
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{self.client}-{name}-v{version}.bin").write_bytes(frame)


class CaptureHandler(socketserver.BaseRequestHandler):
    server: CaptureServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            size_bytes = _recv_exact(sock, 4)
            if size_bytes is None:
                return
            frame = _recv_exact(sock, struct.unpack(">i", size_bytes)[0])
            if frame is None:
                return
            api_key, version = struct.unpack_from(">hh", frame)
            if api_key in REQUESTS:
                self.server.record(api_key, version, frame)
            response = self.respond(frame, api_key, version)
            if response is not None:
                sock.sendall(struct.pack(">i", len(response)) + response)

    def respond(self, frame: bytes, api_key: int, version: int) -> bytes | None:
        r = Reader(frame)
        header = RequestHeader.decode(r, request_header_version(api_key, version))
        body_writer = Writer()
        if api_key == ApiKey.API_VERSIONS:
            lo, hi = self.server.advertised[ApiKey.API_VERSIONS]
            if version > hi:  # answer in v0 format with the supported range (KIP-511)
                resp = ApiVersionsResponse(
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=18, min_version=lo, max_version=hi)
                    ],
                )
                version = 0
            else:
                resp = api_versions(self.server.advertised)
            resp.encode(body_writer, version)
        else:
            lo, hi = self.server.advertised.get(api_key, (0, -1))
            if not lo <= version <= hi:
                return None
            request = REQUESTS[api_key].decode(r, version)  # type: ignore[attr-defined]
            body = self.answer(api_key, version, request)
            if body is None:
                return None
            body.encode(body_writer, version)
        w = Writer()
        ResponseHeader(correlation_id=header.correlation_id).encode(
            w, response_header_version(api_key, version)
        )
        return w.to_bytes() + body_writer.to_bytes()

    def answer(self, api_key: int, version: int, req: Any) -> Any:
        if api_key == ApiKey.METADATA:
            return metadata(req, self.server.port)
        if api_key == ApiKey.PRODUCE:
            return produce(req)
        if api_key == ApiKey.FETCH:
            time.sleep(min(getattr(req, "max_wait_ms", 0), 500) / 1000)
            return fetch(req)
        if api_key == ApiKey.LIST_OFFSETS:
            return list_offsets(req)
        return None


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def api_versions(advertised: dict[int, tuple[int, int]]) -> ApiVersionsResponse:
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(advertised.items())
    ]
    return ApiVersionsResponse(api_keys=keys)


def metadata(req: object, port: int) -> MetadataResponse:
    requested = getattr(req, "topics", None)
    names = ["t"] if not requested else [t.name or "t" for t in requested]
    topics = [
        MetadataResponse.MetadataResponseTopic(
            name=name,
            topic_id=TOPIC_ID,
            partitions=[
                MetadataResponse.MetadataResponsePartition(
                    partition_index=0,
                    leader_id=NODE_ID,
                    leader_epoch=-1,
                    replica_nodes=[NODE_ID],
                    isr_nodes=[NODE_ID],
                )
            ],
        )
        for name in names
    ]
    return MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=port)
        ],
        cluster_id="capture",
        controller_id=NODE_ID,
        topics=topics,
    )


def produce(req: object) -> ProduceResponse | None:
    if getattr(req, "acks", 1) == 0:
        return None
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(
                        index=p.index, base_offset=0, log_start_offset=0
                    )
                    for p in t.partition_data
                ],
            )
            for t in req.topic_data  # type: ignore[attr-defined]
        ]
    )


def fetch(req: object) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=p.partition,
                        high_watermark=1,
                        last_stable_offset=1,
                        log_start_offset=0,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics  # type: ignore[attr-defined]
        ]
    )


def list_offsets(req: object) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsResponse.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, offset=0, old_style_offsets=[0]
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics  # type: ignore[attr-defined]
        ]
    )


# ---------------------------------------------------------------- client drivers

DRIVERS = {
    "confluent_kafka": """
        from confluent_kafka import Consumer, Producer, TopicPartition
        p = Producer({"bootstrap.servers": ADDR, "client.id": "capture"})
        p.produce("t", key=b"k", value=b"hello")
        p.flush(10)
        c = Consumer({"bootstrap.servers": ADDR, "group.id": "g", "enable.auto.commit": False})
        c.assign([TopicPartition("t", 0, 0)])
        deadline = time.time() + 3
        while time.time() < deadline:
            c.poll(0.5)
        c.close()
    """,
    "kafka_python": """
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        p = KafkaProducer(bootstrap_servers=ADDR, enable_idempotence=False, acks=1)
        p.send("t", key=b"k", value=b"hello").get(timeout=10)
        p.close()
        c = KafkaConsumer(bootstrap_servers=ADDR, group_id=None, enable_auto_commit=False)
        c.assign([TopicPartition("t", 0)])
        c.seek(TopicPartition("t", 0), 0)
        c.poll(timeout_ms=2000)
        c.close()
    """,
    "aiokafka": """
        import asyncio
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
        async def main():
            p = AIOKafkaProducer(bootstrap_servers=ADDR)
            await p.start()
            await p.send_and_wait("t", key=b"k", value=b"hello")
            await p.stop()
            c = AIOKafkaConsumer(bootstrap_servers=ADDR, group_id=None, enable_auto_commit=False)
            await c.start()
            c.assign([TopicPartition("t", 0)])
            c.seek(TopicPartition("t", 0), 0)
            await c.getmany(timeout_ms=2000)
            await c.stop()
        asyncio.run(main())
    """,
    "kcat": """
        subprocess.run(["kcat", "-b", ADDR, "-P", "-t", "t", "-p", "0"], input=b"hello\\n", timeout=20)
        try:  # the fake broker never returns records: stop after a few fetches
            subprocess.run(["kcat", "-b", ADDR, "-C", "-t", "t", "-p", "0", "-o", "0", "-c", "1"], timeout=4)
        except subprocess.TimeoutExpired:
            pass
    """,
}


def run_driver(name: str, port: int, timeout: float = 40) -> None:
    prelude = f"import subprocess, time\nADDR = '127.0.0.1:{port}'\n"
    code = prelude + textwrap.dedent(DRIVERS[name])
    try:
        subprocess.run([sys.executable, "-c", code], timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"{name}: driver timed out (captures so far are kept)", file=sys.stderr)


def parse_max(values: list[str]) -> dict[int, tuple[int, int]]:
    table = dict(ADVERTISED)
    for item in values:
        name, _, hi = item.partition("=")
        key = ApiKey[name.upper()]
        table[key] = (table.get(key, (0, 0))[0], int(hi))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["serve", "run"])
    parser.add_argument("--client", default="client", help="label for file names (serve)")
    parser.add_argument("--only", nargs="*", default=sorted(DRIVERS), help="clients to drive (run)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--max", action="append", default=[], help="override, e.g. fetch=16")
    parser.add_argument("--suffix", default="", help="appended to client labels (run)")
    args = parser.parse_args()
    server = CaptureServer(args.port, args.out, parse_max(args.max))
    print(f"capturing on 127.0.0.1:{server.port} into {args.out}", flush=True)
    if args.mode == "serve":
        server.client = args.client
        server.serve_forever()
        return
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for name in args.only:
        server.client = name + args.suffix
        run_driver(name, server.port)
    server.shutdown()
    print("\n".join(sorted(set(server.log))))


if __name__ == "__main__":
    main()
