"""The fuzz targets: each takes one input (bytes) and raises only on a finding.

Each target feeds hostile bytes to the code that reads them from a client, and catches
exactly the errors that code declares (the ones the connection maps to an error code or
a close). Anything else that escapes is a finding: atheris reports it with the input.

    frame     a byte stream as a connection reads it: size-prefixed frames
              (kbroker.server.network_receive.frame_size), each parsed as the connection
              does before dispatch (parse_frame: header, API key and version check,
              header + body decode). Declared: FrameError.
    requests  one request frame of any API key and version the broker serves, single
              broker or cluster (the first 4 bytes are folded onto a served key and
              version): header + body through the generated codecs (decode_request).
              Declared: DecodeError, UnicodeDecodeError.
    produce   a Produce's records, as ProduceRequest hands them to the partition's leader:
              Log.append_as_leader on a real log in a temporary directory (the batch
              validation in the core, key checks of compacted topics, broker-side
              recompression, the producer state) and the produce handler's peek at the
              transactional bit. The first byte picks the topic config and whether
              the harness fixes the batches' CRCs (to reach what lies behind). Declared:
              KafkaError (the handler answers its code).
    sasl      a sequence of SaslHandshake / SaslAuthenticate (v0-v2) / raw v0 tokens to
              one connection's SaslAuthenticator (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
              enabled; users `alice`/`secret`); `@NONCE@` in a token becomes the server's
              nonce and a trailing `p=@PROOF@` the correct SCRAM proof, so the fuzzer
              reaches the final message's checks and success. Declared: none (the
              authenticator answers every token); every answer must encode, and a
              principal may only come out of a correct password.

Inputs: `tools/fuzz/corpus/<target>/` (valid inputs made by the encoders:
`python -m tools.fuzz seeds`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import shutil
import struct
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

from kbroker._core.crc32c import crc32c
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import DecodeError, Writer
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.records.batch_header import ATTRIBUTES_POS, CRC_POS, LENGTH_POS
from kbroker.security.scram import (
    MECHANISMS,
    ScramCredential,
    credential_from_salted_password,
    salted_password,
)
from kbroker.security.settings import ListenerSecurity
from kbroker.server.api_table import API_TABLE, CLUSTER_API_TABLE
from kbroker.server.apis import produce
from kbroker.server.authenticator import SaslAuthenticator
from kbroker.server.network_receive import FrameError, frame_size
from kbroker.server.request_frame import decode_request, parse_frame
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime

Target = Callable[[bytes], None]

# -- frame

FRAME_LIMIT = 104857600  # socket.request.max.bytes' default


def frame(data: bytes) -> None:
    buf = bytearray(data)
    pos = 0
    while len(buf) - pos >= 4:
        try:
            size = frame_size(buf, pos, FRAME_LIMIT)
        except FrameError:
            return  # the connection closes
        if len(buf) - pos - 4 < size:
            return  # waits for more
        body = buf[pos + 4 : pos + 4 + size]
        pos += 4 + size
        try:
            parse_frame(body, API_TABLE)
        except FrameError:
            return


# -- requests

_SERVED = sorted({(k, spec.min_version, spec.max_version)
                  for table in (API_TABLE, CLUSTER_API_TABLE) for k, spec in table.items()})
_HEAD = struct.Struct(">hh")


def served_key_version(api_key: int, version: int) -> tuple[int, int]:
    """(api_key, version) folded onto a served pair; a served pair maps to itself."""
    for key, lo, hi in _SERVED:
        if key == api_key and lo <= version <= hi:
            return key, version
    key, lo, hi = _SERVED[api_key % len(_SERVED)]
    return key, lo + version % (hi - lo + 1)


def requests(data: bytes) -> None:
    if len(data) < 4:
        return
    key, version = served_key_version(*_HEAD.unpack_from(data, 0))
    frame_bytes = bytearray(data)
    _HEAD.pack_into(frame_bytes, 0, key, version)
    try:
        _header, request = decode_request(frame_bytes, key, version)
    except (DecodeError, UnicodeDecodeError):
        return
    request.encode(Writer(), version)  # what decodes encodes: handlers echo fields back


# -- produce

_TP = TopicPartition("fuzz", 0)
_CONFIGS = (
    LogConfig(segment_bytes=1 << 20),
    LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",)),
    LogConfig(segment_bytes=1 << 20, compression_type="gzip"),
    LogConfig(segment_bytes=1 << 20, message_timestamp_type="LogAppendTime",
              compression_type="zstd", cleanup_policy=("compact",)),
)
_RESET_BYTES = 64 << 20
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class _Logs:
    """One log per topic config, in a temporary directory; started afresh once they
    have taken _RESET_BYTES (the fuzzer runs for hours)."""

    def __init__(self) -> None:
        self.manager: LogManager | None = None
        self.dir = ""
        self.appended = 0

    def log(self, index: int) -> Any:
        if self.manager is None or self.appended > _RESET_BYTES:
            self.close()
            self.dir = tempfile.mkdtemp(prefix="kbroker-fuzz-")
            self.manager = LogManager([self.dir], LogConfig(), MockTime(), recovery_threads=1)
            self.manager.startup()
            self.appended = 0
        tp = TopicPartition(f"fuzz{index}", 0)
        log = self.manager.get_log(tp)
        if log is None:
            log = self.manager.get_or_create_log(tp, uuid.UUID(int=index + 1), _CONFIGS[index])
        return log

    def close(self) -> None:
        if self.manager is not None:
            self.manager.shutdown()
            self.manager = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""


LOGS = _Logs()


def fix_crcs(payload: bytearray) -> None:
    """Give each batch of the payload (as far as its lengths go) its correct CRC32C, so
    the fuzzer gets past the CRC check to what lies behind it (decompression, keys,
    producer state)."""
    pos = 0
    while pos + ATTRIBUTES_POS <= len(payload):
        (length,) = _I32.unpack_from(payload, pos + LENGTH_POS)
        end = pos + LENGTH_POS + 4 + length
        if length < 0 or end > len(payload):
            return
        _U32.pack_into(payload, pos + CRC_POS, crc32c(payload[pos + ATTRIBUTES_POS : end]))
        pos = end


def produce_records(data: bytes) -> None:
    """First byte: bits 0-1 the topic config, bit 2 fix the batches' CRCs first."""
    if not data:
        return
    index = data[0] % len(_CONFIGS)
    payload = bytearray(data[1:])
    if data[0] & 4:
        fix_crcs(payload)
    records = memoryview(payload)  # writable, as a request frame's slice is
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="fuzz", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    produce._has_transactional_records(request)
    if len(records) == 0:
        return  # the handler answers CORRUPT_MESSAGE before the log sees it
    log = LOGS.log(index)
    try:
        log.append_as_leader(records, leader_epoch=0)
    except KafkaError:
        return
    LOGS.appended += len(records)


# -- sasl

USER, PASSWORD = "alice", "secret"
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_ITERATIONS = 4096
_SALT = b"kbroker-fuzz-salt"
_SALTED = {m: salted_password(m, PASSWORD, _SALT, _ITERATIONS) for m in MECHANISMS}
_CREDENTIALS = {m: credential_from_salted_password(m, s, _SALT, _ITERATIONS) for m, s in _SALTED.items()}
_SECURITY = ListenerSecurity(name="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT",
                             sasl_mechanisms=_MECHANISMS, plain_users={USER: PASSWORD},
                             reauth_ms=0)
_SECURITY_REAUTH = ListenerSecurity(name="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT",
                                    sasl_mechanisms=_MECHANISMS, plain_users={USER: PASSWORD},
                                    reauth_ms=1)


def _lookup(user: str, mechanism: str) -> ScramCredential | None:
    return _CREDENTIALS[mechanism] if user == USER else None


def sasl_ops(data: bytes) -> list[tuple[int, bytes]]:
    """The input as (op, payload) pairs: op byte, uint16 length, payload."""
    ops, pos = [], 1
    while pos + 3 <= len(data) and len(ops) < 16:
        op = data[pos]
        (n,) = struct.unpack_from(">H", data, pos + 1)
        ops.append((op, data[pos + 3 : pos + 3 + n]))
        pos += 3 + n
    return ops


def _proof(mechanism: str, auth_message: bytes) -> bytes:
    hash_name = MECHANISMS[mechanism][0]
    client_key = hmac.new(_SALTED[mechanism], b"Client Key", hash_name).digest()
    signature = hmac.new(hashlib.new(hash_name, client_key).digest(), auth_message, hash_name).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def _scram_final(sasl: SaslAuthenticator, token: bytes) -> bytes:
    """`@NONCE@` becomes the server's nonce; a trailing `,p=@PROOF@` the right proof."""
    scram = getattr(getattr(sasl, "_server", None), "_scram", None)
    nonce = getattr(scram, "_nonce", None)
    if nonce is None:
        return token
    token = token.replace(b"@NONCE@", nonce.encode())
    if token.endswith(b",p=@PROOF@") and sasl.mechanism in MECHANISMS:
        without = token[: -len(b",p=@PROOF@")]
        auth = f"{scram._client_first_bare},{scram._server_first},".encode() + without  # type: ignore[union-attr]
        token = without + b",p=" + base64.b64encode(_proof(sasl.mechanism, auth))
    return token


def sasl(data: bytes) -> None:
    if not data:
        return
    now = [0]
    security = _SECURITY_REAUTH if data[0] & 1 else _SECURITY
    auth = SaslAuthenticator(security, _lookup, lambda: now[0])
    for op, payload in sasl_ops(data):
        now[0] += 1
        kind, version = op & 3, (op >> 2) & 3
        response: Any
        if kind == 0:
            mechanism = (_MECHANISMS[payload[0] % 3] if len(payload) == 1
                         else payload.decode("utf-8", "replace"))
            version = min(version, 1)
            response, close = auth.handshake(mechanism, version)
            _encodes(response, version)
        else:
            token = _scram_final(auth, payload)
            wire_version = None if kind == 3 else min(version, 2)
            response, close = auth.authenticate(token, wire_version)
            _encodes(response, 0 if wire_version is None else wire_version)
            _check_authenticated(auth)
        if close:
            return


def _encodes(response: Any, version: int) -> None:
    response.encode(Writer(), version)


def _check_authenticated(auth: SaslAuthenticator) -> None:
    if auth.principal is None:
        return
    if auth.principal.name != USER or auth.mechanism not in _MECHANISMS:
        raise AssertionError(f"authenticated as {auth.principal} with {auth.mechanism}")


TARGETS: dict[str, Target] = {
    "frame": frame,
    "requests": requests,
    "produce": produce_records,
    "sasl": sasl,
}
