"""Reader and Writer for the Kafka wire primitives; the runtime of the generated codecs.

Wire formats (all integers big-endian):

    int8/int16/int32/int64     two's complement, 1/2/4/8 bytes
    uint16/uint32              unsigned, 2/4 bytes
    float64                    IEEE 754 double, 8 bytes
    boolean                    int8, 0 = false, anything else = true
    uvarint                    unsigned LEB128, at most 5 bytes (32 bits)
    uuid                       16 bytes
    string                     int16 length N, N bytes of UTF-8 (nullable: N = -1 is null)
    compact_string             uvarint N+1, N bytes of UTF-8 (nullable: 0 is null)
    bytes                      int32 length N, N bytes (nullable: N = -1 is null)
    compact_bytes              uvarint N+1, N bytes (nullable: 0 is null)
    array                      int32 count N (-1 null), or compact: uvarint N+1 (0 null)
    records                    nullable bytes / compact nullable bytes holding record batches
    tagged fields              uvarint count, then per field: uvarint tag, uvarint size, data

Every Reader method raises DecodeError on truncated or invalid input. Writer
accumulates into a bytearray; a records value may be a file slice (any object with
integer fd/position/size, e.g. kbroker.records.file_slice.FileSlice), which becomes a
separate part of the output so the connection can sendfile it.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["ZERO_UUID", "BytesLike", "DecodeError", "Reader", "SliceLike", "Writer"]

ZERO_UUID = _uuid.UUID(int=0)

# Aliases: Reader and Writer have methods named `bytes`, which shadow the builtin
# inside their class bodies.
_Bytes = bytes
BytesLike = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_I8_pack = _I8.pack
_I16_pack = _I16.pack
_I32_pack = _I32.pack
_I64_pack = _I64.pack
_U16_pack = _U16.pack
_U32_pack = _U32.pack
_F64_pack = _F64.pack
_I16_unpack = _I16.unpack_from
_I32_unpack = _I32.unpack_from

_NULL_I16 = _I16_pack(-1)
_NULL_I32 = _I32_pack(-1)
# Records of at least this many bytes, held in an immutable bytes object, become a part of
# their own (see Writer.parts()) instead of being copied into the encoding: a 1 MB Produce
# from the Spark sink was copied three times on its way to sendmsg.
SHARE_RECORDS_BYTES = 64 * 1024


class DecodeError(ValueError):
    """The input is truncated or is not a valid encoding."""


class SliceLike(Protocol):
    """A region of a file, sent with os.sendfile (kbroker.records.file_slice.FileSlice)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...


class Reader:
    """Reads Kafka primitives from a bytes-like object, starting at ``pos``."""

    __slots__ = ("buf", "pos")

    def __init__(self, data: BytesLike, pos: int = 0) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf = view
        self.pos = pos

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _fixed(self, s: struct.Struct) -> Any:
        pos = self.pos
        try:
            value = s.unpack_from(self.buf, pos)[0]
        except struct.error:
            raise DecodeError(f"truncated: need {s.size} bytes at {pos}") from None
        self.pos = pos + s.size
        return value

    def _take(self, n: int) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise DecodeError(f"truncated: need {n} bytes at {pos}, have {len(self.buf) - pos}")
        self.pos = end
        return self.buf[pos:end]

    def skip(self, n: int) -> None:
        self._take(n)

    # fixed-size integers and floats

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        pos = self.pos
        try:
            value: int = _I16_unpack(self.buf, pos)[0]
        except struct.error:
            raise DecodeError(f"truncated: need 2 bytes at {pos}") from None
        self.pos = pos + 2
        return value

    def int32(self) -> int:
        pos = self.pos
        try:
            value: int = _I32_unpack(self.buf, pos)[0]
        except struct.error:
            raise DecodeError(f"truncated: need 4 bytes at {pos}") from None
        self.pos = pos + 4
        return value

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def float64(self) -> float:
        return self._fixed(_F64)

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    # variable-length integers

    def uvarint(self) -> int:
        buf = self.buf
        pos = self.pos
        try:
            b = buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
            value = b & 0x7F
            shift = 7
            while True:
                pos += 1
                b = buf[pos]
                value |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 28:
                    raise DecodeError(f"unsigned varint longer than 5 bytes at {self.pos}")
        except IndexError:
            raise DecodeError(f"truncated varint at {self.pos}") from None
        if value > 0xFFFFFFFF:
            raise DecodeError(f"unsigned varint out of range at {self.pos}")
        self.pos = pos + 1
        return value

    # strings

    def _utf8(self, n: int) -> str:
        view = self._take(n)
        try:
            return str(view, "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid UTF-8 in string at {self.pos - n}: {e}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise DecodeError(f"negative string length {n}")
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative string length {n}")
        return self._utf8(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise DecodeError("null compact string in a non-nullable field")
        return self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._utf8(n)

    # bytes

    def bytes(self) -> _Bytes:
        n = self.int32()
        if n < 0:
            raise DecodeError(f"negative bytes length {n}")
        return self._take(n).tobytes()

    def nullable_bytes(self) -> _Bytes | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative bytes length {n}")
        return self._take(n).tobytes()

    def compact_bytes(self) -> _Bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise DecodeError("null compact bytes in a non-nullable field")
        return self._take(n).tobytes()

    def compact_nullable_bytes(self) -> _Bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n).tobytes()

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=self._take(16).tobytes())

    # records: a zero-copy slice of the input

    def records(self) -> memoryview | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative records length {n}")
        return self._take(n)

    def compact_records(self) -> memoryview | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n)

    # arrays: return the element count, or -1 for a null array

    def array_length(self) -> int:
        n = self.int32()
        if n < -1:
            raise DecodeError(f"negative array length {n}")
        if n > len(self.buf) - self.pos:
            raise DecodeError(f"array of {n} elements but only {self.remaining()} bytes left")
        return n

    def compact_array_length(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.buf) - self.pos:
            raise DecodeError(f"array of {n} elements but only {self.remaining()} bytes left")
        return n

    def array_count(self) -> int:
        """Length of a non-nullable array: a null (-1) is an error."""
        n = self.array_length()
        if n < 0:
            raise DecodeError("null array in a non-nullable field")
        return n

    def compact_array_count(self) -> int:
        n = self.compact_array_length()
        if n < 0:
            raise DecodeError("null compact array in a non-nullable field")
        return n

    # tagged fields

    def tagged_fields(self) -> Iterator[tuple[int, int]]:
        """Yield (tag, size) per tagged field; the caller reads or skips ``size`` bytes."""
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if size > len(self.buf) - self.pos:
                raise DecodeError(f"tagged field {tag} of {size} bytes is truncated")
            yield tag, size

    def skip_tagged_fields(self) -> None:
        buf = self.buf
        pos = self.pos
        if pos < len(buf) and buf[pos] == 0:  # the usual case: no tagged fields
            self.pos = pos + 1
            return
        for _, size in self.tagged_fields():
            self.pos += size

    def end_tagged_field(self, end: int) -> None:
        """Check that a known tagged field consumed exactly its declared size."""
        if self.pos != end:
            raise DecodeError(f"tagged field size mismatch: ended at {self.pos}, declared {end}")


class Writer:
    """Accumulates an encoding; file slices and large immutable records become separate
    parts (see parts())."""

    __slots__ = ("_buf", "_parts", "_done")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._parts: list[_Bytes | SliceLike] = []
        self._done = 0  # encoded size of the finished parts

    def __len__(self) -> int:
        return self._done + len(self._buf)

    def parts(self) -> list[_Bytes | SliceLike]:
        """The encoding in order: in-memory chunks (bytes, the large records among them
        the caller's own objects) and file slices."""
        if self._buf:
            return [*self._parts, bytes(self._buf)]
        return list(self._parts)

    def to_bytes(self) -> _Bytes:
        if self._parts:
            if any(not isinstance(p, bytes) for p in self._parts):
                raise ValueError("Writer holds file slices; use parts()")
            return b"".join(self._parts) + self._buf  # type: ignore[arg-type]
        return bytes(self._buf)

    def raw(self, data: BytesLike) -> None:
        self._buf += data

    def extend(self, other: Writer) -> None:
        """Append another Writer's in-memory encoding (no slices)."""
        self._buf += other.to_bytes()

    # fixed-size

    def int8(self, v: int) -> None:
        self._buf += _I8_pack(v)

    def int16(self, v: int) -> None:
        self._buf += _I16_pack(v)

    def int32(self, v: int) -> None:
        self._buf += _I32_pack(v)

    def int64(self, v: int) -> None:
        self._buf += _I64_pack(v)

    def uint16(self, v: int) -> None:
        self._buf += _U16_pack(v)

    def uint32(self, v: int) -> None:
        self._buf += _U32_pack(v)

    def float64(self, v: float) -> None:
        self._buf += _F64_pack(v)

    def boolean(self, v: bool) -> None:
        self._buf.append(1 if v else 0)

    # varints

    def uvarint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self._buf.append(v)
            return
        if v < 0 or v > 0xFFFFFFFF:
            raise ValueError(f"unsigned varint out of range: {v}")
        self._uvarlong(v)

    def _uvarlong(self, v: int) -> None:
        buf = self._buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    # strings

    def string(self, v: str) -> None:
        data = v.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long")
        self._buf += _I16_pack(len(data))
        self._buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self._buf += _NULL_I16
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        data = v.encode()
        self.uvarint(len(data) + 1)
        self._buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self._buf.append(0)
        else:
            self.compact_string(v)

    # bytes

    def bytes(self, v: BytesLike) -> None:
        self._buf += _I32_pack(len(v))
        self._buf += v

    def nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self._buf += _NULL_I32
        else:
            self.bytes(v)

    def compact_bytes(self, v: BytesLike) -> None:
        self.uvarint(len(v) + 1)
        self._buf += v

    def compact_nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self._buf.append(0)
        else:
            self.compact_bytes(v)

    def uuid(self, v: _uuid.UUID) -> None:
        self._buf += v.bytes

    # records

    def records(self, v: BytesLike | SliceLike | None) -> None:
        if v is None:
            self._buf += _NULL_I32
        elif type(v) is bytes and len(v) >= SHARE_RECORDS_BYTES:
            self._buf += _I32_pack(len(v))
            self._part(v, len(v))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self._buf += _I32_pack(len(v))
            self._buf += v
        else:
            self._buf += _I32_pack(v.size)
            self._slice(v)

    def compact_records(self, v: BytesLike | SliceLike | None) -> None:
        if v is None:
            self._buf.append(0)
        elif type(v) is bytes and len(v) >= SHARE_RECORDS_BYTES:
            self.uvarint(len(v) + 1)
            self._part(v, len(v))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self.uvarint(len(v) + 1)
            self._buf += v
        else:
            self.uvarint(v.size + 1)
            self._slice(v)

    def _slice(self, s: SliceLike) -> None:
        self._part(s, s.size)

    def _part(self, part: _Bytes | SliceLike, size: int) -> None:
        """End the current chunk; `part` follows it as a part of its own."""
        if self._buf:
            chunk = bytes(self._buf)
            self._parts.append(chunk)
            self._done += len(chunk)
            self._buf = bytearray()
        self._parts.append(part)
        self._done += size

    # arrays and tagged fields

    def array_length(self, n: int) -> None:
        self._buf += _I32_pack(n)

    def compact_array_length(self, n: int) -> None:
        self.uvarint(n + 1)

    def empty_tagged_fields(self) -> None:
        self._buf.append(0)
