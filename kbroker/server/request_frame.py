"""A request frame read and a response frame written, as the broker's connections, the
controller's Envelope handling (kbroker.server.forwarding) and the console's channel do
it (Kafka's RequestContext.parseRequest and AbstractResponse.toSend).

A request frame, after its int32 size prefix (kbroker.server.network_receive):

    int16 api_key | int16 api_version | int32 correlation_id | rest of the header | body

The header's version follows from the API key and version (request_header_version);
the body is the API's generated message (kbroker.protocol.messages). A response frame:

    int32 size | int32 correlation_id | (header v1+: tagged fields) | body

with the body's file slices (records) left as parts of their own, for sendfile.
"""

from __future__ import annotations

import struct
from typing import Any

from kbroker.protocol.api_key import ApiKey, request_header_version, response_header_version
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.server.api_spec import ApiSpec
from kbroker.server.apis import api_versions
from kbroker.server.network_receive import PREFIX, FrameError

HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id


class ParsedFrame:
    """A request frame read as the connection reads it (parse_frame)."""

    __slots__ = ("api_key", "version", "correlation_id", "spec", "header", "request",
                 "client_software")

    def __init__(self, api_key: int, version: int, correlation_id: int, spec: ApiSpec,
                 header: RequestHeader | None = None, request: Any = None,
                 client_software: str | None = None) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.spec = spec
        self.header = header
        self.request = request  # None: an ApiVersions of a version too new (KIP-511)
        self.client_software = client_software  # NAME/VERSION from a valid ApiVersions v3+


def parse_frame(frame: bytes | bytearray | memoryview, api_table: dict[int, ApiSpec]) -> ParsedFrame:
    """A request frame (without its size prefix) decoded as the connection does before it
    dispatches it: FrameError for everything the connection closes on. An ApiVersions of
    a version above the broker's is not decoded (request None): the connection answers it
    in the v0 format (KIP-511)."""
    if len(frame) < HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is too short")
    api_key, version, correlation_id = HEAD.unpack_from(frame, 0)
    spec = api_table.get(api_key)
    if api_key == ApiKey.API_VERSIONS and spec is not None and version > spec.max_version:
        return ParsedFrame(api_key, version, correlation_id, spec)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        raise FrameError(f"unsupported API key {api_key} version {version}")
    try:
        header, request = decode_request(frame, api_key, version)
    except (DecodeError, UnicodeDecodeError) as e:
        raise FrameError(f"cannot decode {api_name(api_key)} v{version}: {e}") from None
    software = None
    if api_key == ApiKey.API_VERSIONS:
        software = api_versions.client_software(request, version)
    return ParsedFrame(api_key, version, correlation_id, spec, header, request, software)


def decode_request(frame: bytes | bytearray | memoryview, api_key: int,
                   version: int) -> tuple[RequestHeader, Any]:
    """The header and body of a request frame (without its size prefix) of a supported
    API key and version. DecodeError (or UnicodeDecodeError) when it does not decode."""
    reader = Reader(frame)
    header = RequestHeader.decode(reader, request_header_version(api_key, version))
    return header, REQUESTS[api_key].decode(reader, version)


def encode_response(response: Any, api_key: int, version: int, correlation_id: int) -> list[Any]:
    """A response as the parts to send: size prefix, header and body bytes, with the
    body's file slices (records) as parts of their own."""
    w = Writer()
    ResponseHeader(correlation_id=correlation_id).encode(w, response_header_version(api_key, version))
    response.encode(w, version)
    parts = w.parts()
    prefix = PREFIX.pack(len(w))
    if parts and isinstance(parts[0], bytes):
        parts[0] = prefix + parts[0]
    else:
        parts.insert(0, prefix)
    return parts


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
