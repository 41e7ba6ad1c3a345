"""A null broker: speaks the Kafka protocol, does no work, stores nothing.

The floor of a broker's part in a benchmark (what a client reaches against a broker that
takes no time), in the spirit of floor/ingest_floor.c: one asyncio process on 127.0.0.1
that answers every request as soon as its frame is whole, with success. It is a benchmark
floor, not a test double: no test uses it in kbroker's place.

    python bench/floor/null_broker.py --port 9092 [--partitions 6]

It serves librdkafka's Producer (idempotent or transactional) and AdminClient as
`kbroker perf produce` uses them, and advertises (ApiVersions) exactly the APIs it answers,
each with the versions kbroker advertises (kbroker.server.api_table):

    ApiVersions          kbroker's ranges for the APIs below
    Metadata             itself (node 0) as the only broker and controller; any topic asked
                         for exists (with --partitions partitions unless CreateTopics said
                         otherwise), every partition led by node 0 at epoch 0; "all topics"
                         lists the topics seen so far
    CreateTopics         NONE; the partition count is remembered
    FindCoordinator      itself, for any key (v0-3 one key, v4+ a batch)
    InitProducerId       a new producer id each time, epoch 0
    AddPartitionsToTxn   NONE for every partition (v0-3 one transaction, v4+ a batch)
    AddOffsetsToTxn      NONE
    EndTxn               NONE
    Produce              NONE per partition, base_offset the partition's next offset (the
                         offsets only count the records; acks=0: no answer)
    ListOffsets          earliest (-2) 0, anything else the partition's next offset
    Fetch                no records, at once (librdkafka writes record batches v2 only
                         to a broker that has Produce v3+ and Fetch v4+, so it is needed)

Frames are parsed, decoded and encoded with kbroker's own code (parse_frame and
encode_response of kbroker.server.request_frame, the generated codecs of kbroker.protocol).
The frames of one read are answered in the order they came, in one write, so pipelined
requests are answered in order.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this tree's kbroker

from kbroker.common.error_code import ErrorCode  # noqa: E402
from kbroker.protocol.api_key import ApiKey  # noqa: E402
from kbroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse  # noqa: E402
from kbroker.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse  # noqa: E402
from kbroker.protocol.messages.api_versions import ApiVersionsResponse  # noqa: E402
from kbroker.protocol.messages.create_topics import CreateTopicsResponse  # noqa: E402
from kbroker.protocol.messages.end_txn import EndTxnResponse  # noqa: E402
from kbroker.protocol.messages.fetch import FetchResponse  # noqa: E402
from kbroker.protocol.messages.find_coordinator import FindCoordinatorResponse  # noqa: E402
from kbroker.protocol.messages.init_producer_id import InitProducerIdResponse  # noqa: E402
from kbroker.protocol.messages.list_offsets import ListOffsetsResponse  # noqa: E402
from kbroker.protocol.messages.metadata import MetadataResponse  # noqa: E402
from kbroker.protocol.messages.produce import ProduceResponse  # noqa: E402
from kbroker.records.batch_header import BATCH_LAYOUT, HEADER_SIZE, LENGTH_POS, LOG_OVERHEAD  # noqa: E402
from kbroker.server.api_table import API_TABLE  # noqa: E402
from kbroker.server.apis.api_versions import unsupported_version_response  # noqa: E402
from kbroker.server.network_receive import FrameError, frame_size  # noqa: E402
from kbroker.server.request_frame import encode_response, parse_frame  # noqa: E402

HOST = "127.0.0.1"
NODE_ID = 0
EARLIEST = -2  # ListOffsets' timestamp for the log start offset
MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes' default

# A frame, in both directions: int32 size, then that many bytes (header and body).
_SIZE = struct.Struct(">i")
RECORD_COUNT_POS = BATCH_LAYOUT["RECORD_COUNT_POS"]


def record_count(records: Any) -> int:
    """The records in a Produce partition's record batches, read from each v2 batch
    header (kbroker's one layout, kbroker/_core/records.pxd: recordCount at
    RECORD_COUNT_POS; the next batch LOG_OVERHEAD + batchLength bytes on)."""
    count = pos = 0
    while pos + HEADER_SIZE <= len(records):
        count += _SIZE.unpack_from(records, pos + RECORD_COUNT_POS)[0]
        pos += LOG_OVERHEAD + _SIZE.unpack_from(records, pos + LENGTH_POS)[0]
    return count


@dataclass
class Topic:
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


class NullBroker:
    """What the null broker remembers: topics' partition counts and ids, each partition's
    next offset, the last producer id given out. Each handler answers at once."""

    def __init__(self, port: int, partitions: int) -> None:
        self.port = port
        self.default_partitions = partitions
        self.topics: dict[str, Topic] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.last_producer_id = 0
        self.handlers = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: lambda request, version: AddOffsetsToTxnResponse(),
            ApiKey.END_TXN: lambda request, version: EndTxnResponse(),
            ApiKey.PRODUCE: self.produce,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.FETCH: self.fetch,
        }
        self.api_table = {key: API_TABLE[key] for key in self.handlers}

    def answer(self, frame: memoryview) -> bytes | None:
        """The framed response to one request frame (without its size prefix), or None
        (acks=0 Produce). FrameError for a request it does not serve."""
        parsed = parse_frame(frame, self.api_table)
        if parsed.request is None:  # an ApiVersions newer than ours: v0's format (KIP-511)
            response = unsupported_version_response(parsed.spec)
            return b"".join(encode_response(response, parsed.api_key, 0, parsed.correlation_id))
        response = self.handlers[parsed.api_key](parsed.request, parsed.version)
        if response is None:
            return None
        return b"".join(encode_response(response, parsed.api_key, parsed.version,
                                        parsed.correlation_id))

    def topic(self, name: str) -> Topic:
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = Topic(self.default_partitions)
        return found

    # -- handlers: (request, version) -> response

    def api_versions(self, request: Any, version: int) -> ApiVersionsResponse:
        return ApiVersionsResponse(api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=spec.min_version,
                                           max_version=spec.max_version)
            for key, spec in sorted(self.api_table.items())])

    def metadata(self, request: Any, version: int) -> MetadataResponse:
        if request.topics is None or (version == 0 and not request.topics):
            names = list(self.topics)
        else:
            by_id = {t.topic_id: name for name, t in self.topics.items()}
            names = [t.name if t.name is not None else by_id.get(t.topic_id, "")
                     for t in request.topics]
        me = [NODE_ID]
        topics = []
        for name in names:
            if not name:  # an id (v10+) of no topic seen
                topics.append(MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None))
                continue
            topic = self.topic(name)
            topics.append(MetadataResponse.MetadataResponseTopic(
                name=name, topic_id=topic.topic_id, partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=p, leader_id=NODE_ID, leader_epoch=0,
                        replica_nodes=me, isr_nodes=me)
                    for p in range(topic.partitions)]))
        return MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host=HOST,
                                                             port=self.port)],
            cluster_id="null-broker", controller_id=NODE_ID, topics=topics)

    def create_topics(self, request: Any, version: int) -> CreateTopicsResponse:
        results = []
        for t in request.topics:
            topic = Topic(t.num_partitions if t.num_partitions > 0 else self.default_partitions)
            if not request.validate_only:
                self.topics[t.name] = topic
            results.append(CreateTopicsResponse.CreatableTopicResult(
                name=t.name, topic_id=topic.topic_id, error_message=None,
                num_partitions=topic.partitions, replication_factor=1))
        return CreateTopicsResponse(topics=results)

    def find_coordinator(self, request: Any, version: int) -> FindCoordinatorResponse:
        if version >= 4:
            return FindCoordinatorResponse(coordinators=[
                FindCoordinatorResponse.Coordinator(key=key, node_id=NODE_ID, host=HOST,
                                                    port=self.port, error_message=None)
                for key in request.coordinator_keys])
        return FindCoordinatorResponse(error_message=None, node_id=NODE_ID, host=HOST,
                                       port=self.port)

    def init_producer_id(self, request: Any, version: int) -> InitProducerIdResponse:
        self.last_producer_id += 1
        return InitProducerIdResponse(producer_id=self.last_producer_id, producer_epoch=0)

    def add_partitions_to_txn(self, request: Any, version: int) -> AddPartitionsToTxnResponse:
        def added(topics: list[Any]) -> list[Any]:
            return [AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                name=t.name, results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=p)
                    for p in t.partitions])
                for t in topics]

        if version >= 4:
            return AddPartitionsToTxnResponse(results_by_transaction=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id, topic_results=added(txn.topics))
                for txn in request.transactions])
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=added(request.v3_and_below_topics))

    def produce(self, request: Any, version: int) -> ProduceResponse | None:
        responses = []
        for t in request.topic_data:
            partitions = []
            for p in t.partition_data:
                key = (t.name, p.index)
                base = self.end(*key)
                self.next_offset[key] = base + record_count(p.records or b"")
                partitions.append(ProduceResponse.PartitionProduceResponse(
                    index=p.index, base_offset=base, log_start_offset=0))
            responses.append(ProduceResponse.TopicProduceResponse(
                name=t.name, partition_responses=partitions))
        return None if request.acks == 0 else ProduceResponse(responses=responses)

    def list_offsets(self, request: Any, version: int) -> ListOffsetsResponse:
        return ListOffsetsResponse(topics=[
            ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=[
                ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, leader_epoch=0,
                    offset=0 if p.timestamp == EARLIEST else self.end(t.name, p.partition_index))
                for p in t.partitions])
            for t in request.topics])

    def fetch(self, request: Any, version: int) -> FetchResponse:
        names = {t.topic_id: name for name, t in self.topics.items()}  # v13+ asks by id
        return FetchResponse(responses=[
            FetchResponse.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
                FetchResponse.PartitionData(
                    partition_index=p.partition, log_start_offset=0, records=b"",
                    high_watermark=self.end(names.get(t.topic_id, t.topic), p.partition),
                    last_stable_offset=self.end(names.get(t.topic_id, t.topic), p.partition))
                for p in t.partitions])
            for t in request.topics])

    def end(self, topic: str, partition: int) -> int:
        """The partition's next offset (its high watermark)."""
        return self.next_offset.get((topic, partition), 0)


class NullConnection(asyncio.Protocol):
    """One client: bytes in, each whole frame answered at once, in order."""

    def __init__(self, broker: NullBroker) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        buffer, view, pos = self.buffer, memoryview(self.buffer), 0
        out: list[bytes] = []
        error: FrameError | None = None
        try:
            while len(buffer) - pos >= 4:
                end = pos + 4 + frame_size(buffer, pos, MAX_FRAME)
                if end > len(buffer):
                    break
                response = self.broker.answer(view[pos + 4:end])
                if response is not None:
                    out.append(response)
                pos = end
        except FrameError as e:
            error = e
        if out:
            self.transport.write(b"".join(out))
        if error is not None:  # as kbroker: earlier answers go out, then the connection closes
            print(f"null broker: closing a connection: {error}", file=sys.stderr, flush=True)
            self.transport.close()
            return
        if pos:  # keep the next frame's start in a new buffer (views may hold the old one)
            self.buffer = bytearray(view[pos:])


async def serve(port: int, partitions: int) -> None:
    broker = NullBroker(port, partitions)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: NullConnection(broker), HOST, port)
    print(f"null broker: ready on {HOST}:{port} (node {NODE_ID}, {partitions} partitions a topic)",
          flush=True)
    async with server:
        await server.serve_forever()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=6,
                    help="partitions of a topic that CreateTopics has not sized")
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.port, args.partitions))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
