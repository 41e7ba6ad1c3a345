"""The committed seed corpus (tools/fuzz/corpus/<target>/): valid inputs made by kbroker's
own encoders, so the fuzzer starts from what real clients send.

    requests  every served API key at every served version (default-constructed), and
              Produce, Fetch, Metadata, ListOffsets, ApiVersions, SaslHandshake and
              SaslAuthenticate with content
    frame     a few of those as one stream of size-prefixed frames, and each alone
    produce   record batches: uncompressed, each codec, keyed, idempotent, transactional,
              several batches in one payload (a first byte picks the topic config and CRC fixing)
    sasl      complete PLAIN and SCRAM exchanges over v0 raw tokens and v1/v2 requests,
              a re-authentication, a wrong password

Regenerate with `python -m tools.fuzz seeds` (file names are content hashes: re-running
changes nothing unless the encoders change).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

from kbroker.protocol.api_key import request_header_version
from kbroker.protocol.codec import Writer
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kbroker.records.builder import build_batch

from .targets import _SERVED

CORPUS = Path(__file__).resolve().parent / "corpus"
_TS = 1_700_000_000_000


def request_frame(request: Any, version: int, correlation_id: int = 7) -> bytes:
    """A request frame without its size prefix."""
    w = Writer()
    key = request.API_KEY
    RequestHeader(request_api_key=key, request_api_version=version, correlation_id=correlation_id,
                  client_id="fuzz").encode(w, request_header_version(key, version))
    request.encode(w, version)
    return w.to_bytes()


def batches() -> list[bytes]:
    recs = [(None, b"v0", 0, []), (b"k1", b"value-1", 1, [("h", b"x")]), (b"k2", None, 2, [])]
    out = [build_batch(recs, _TS)]
    out += [build_batch(recs, _TS, codec=c) for c in (1, 2, 3, 4)]
    out.append(build_batch(recs, _TS, producer_id=1000, producer_epoch=0, base_sequence=0))
    out.append(build_batch(recs, _TS, producer_id=1001, producer_epoch=0, base_sequence=0,
                           attributes=0x10))
    out.append(build_batch(recs[:1], _TS) + build_batch(recs[1:], _TS + 5, codec=1))
    return out


def rich_requests() -> list[tuple[Any, tuple[int, ...]]]:
    batch = batches()[0]
    produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="fuzz", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    fetch = FetchRequest(max_wait_ms=10, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="fuzz", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=65536)])])
    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="fuzz")])
    list_offsets = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="fuzz", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return [
        (produce, (3, 8, 9, 11)), (fetch, (4, 11, 12, 13, 16)), (metadata, (0, 4, 9, 12)),
        (list_offsets, (1, 5, 7)),
        (ApiVersionsRequest(client_software_name="fuzz", client_software_version="1.0"), (0, 3, 4)),
        (SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), (0, 1)),
        (SaslAuthenticateRequest(auth_bytes=b"\0alice\0secret"), (0, 1, 2)),
    ]


def request_seeds() -> list[bytes]:
    out = []
    for key, lo, hi in _SERVED:
        for v in range(lo, hi + 1):
            try:
                out.append(request_frame(REQUESTS[key](), v))
            except Exception:  # a default that this version cannot encode: skip it
                continue
    for request, versions in rich_requests():
        out += [request_frame(request, v) for v in versions]
    return out


def frame_seeds() -> list[bytes]:
    frames = [request_frame(r, v) for r, vs in rich_requests() for v in vs[-1:]]
    prefixed = [struct.pack(">i", len(f)) + f for f in frames]
    return [b"".join(prefixed), *prefixed]


def produce_seeds() -> list[bytes]:
    return [bytes([flags]) + b for b in batches() for flags in range(8)]


def _op(op: int, payload: bytes) -> bytes:
    return bytes([op]) + struct.pack(">H", len(payload)) + payload


def sasl_seeds() -> list[bytes]:
    handshake = lambda mech, v: _op(0 | v << 2, bytes([mech]))  # noqa: E731
    auth = lambda token, v: _op(1 | v << 2, token)  # noqa: E731
    raw = lambda token: _op(3, token)  # noqa: E731
    first = b"n,,n=alice,r=fuzznonce"
    final = b"c=biws,r=@NONCE@,p=@PROOF@"
    wrong = b"c=biws,r=@NONCE@,p=AAAA"
    seeds = []
    for flags in (0, 1):
        seeds.append(bytes([flags]) + handshake(0, 1) + auth(b"\0alice\0secret", 1))
        seeds.append(bytes([flags]) + handshake(0, 0) + raw(b"\0alice\0secret"))
        seeds.append(bytes([flags]) + handshake(0, 1) + auth(b"\0alice\0wrong", 2))
        for mech in (1, 2):
            seeds.append(bytes([flags]) + handshake(mech, 1) + auth(first, 1) + auth(final, 1)
                         + handshake(mech, 1) + auth(first, 2) + auth(final, 2))
            seeds.append(bytes([flags]) + handshake(mech, 0) + raw(first) + raw(final))
            seeds.append(bytes([flags]) + handshake(mech, 1) + auth(first, 0) + auth(wrong, 0))
    return seeds


SEEDS = {"requests": request_seeds, "frame": frame_seeds, "produce": produce_seeds,
         "sasl": sasl_seeds}


def write_corpus(root: Path = CORPUS) -> dict[str, int]:
    counts = {}
    for target, make in SEEDS.items():
        d = root / target
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
        seeds = make()
        for s in seeds:
            (d / hashlib.sha1(s).hexdigest()).write_bytes(s)
        counts[target] = len(seeds)
    return counts
