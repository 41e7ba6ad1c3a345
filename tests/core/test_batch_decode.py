"""kbroker._core.batch_decode: what ColumnarRecords reads, and how it refuses what is malformed.

Decoded values are checked through take()'s raw buffers (no pyarrow here; the
Arrow side is tests/spark/test_arrow_records.py). Malformed batches are built by
hand: a record section with one fault, framed with a correct CRC, so that each
error path is reached on its own and its exception type and message are pinned.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import crc32c
import pytest
from batches import Rec, make_batch

from kbroker._core.batch_decode import ColumnarRecords, CorruptRecordError, scan_next_offset

TS = 1_700_000_000_000


def varint(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def blob(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(offset_delta: int, key: bytes | None, value: bytes | None,
           headers: Sequence[tuple[bytes, bytes | None]] = (), body: bytes | None = None) -> bytes:
    """One record, length first; `body` replaces everything after the attributes byte."""
    if body is None:
        body = (varint(offset_delta * 10) + varint(offset_delta) + blob(key) + blob(value)
                + varint(len(headers)) + b"".join(blob(k) + blob(v) for k, v in headers))
    inner = b"\x00" + body
    return varint(len(inner)) + inner


def frame(section: bytes, count: int, base_offset: int = 100, attributes: int = 0,
          magic: int = 2) -> bytes:
    """A v2 batch around a records section, with a correct CRC."""
    tail = struct.pack(">hiqqqhii", attributes, count - 1, TS, TS + 10 * (count - 1), -1, -1, -1,
                       count) + section
    return struct.pack(">qiib", base_offset, len(tail) + 9, 0, magic) + \
        struct.pack(">I", crc32c.crc32c(tail)) + tail


def values(cols: ColumnarRecords) -> list[bytes | None]:
    """The value column of what take() hands over."""
    out = cols.take()
    valid, offsets, data, nulls = out["value"]
    ends = memoryview(offsets).cast("i").tolist()
    bits = bytes(valid) if valid is not None else None
    rows = []
    for i in range(out["num_rows"]):
        if bits is not None and not bits[i >> 3] & (1 << (i & 7)):
            rows.append(None)
        else:
            rows.append(bytes(memoryview(data)[ends[i]:ends[i + 1]]))
    return rows


def test_values_keys_offsets_and_timestamps() -> None:
    data = frame(record(0, b"k0", b"v0") + record(1, None, None) + record(2, b"", b"v2"), 3)
    cols = ColumnarRecords()
    assert cols.add_records(data, 0, 1000) == (103, 100)
    assert (cols.num_rows, cols.key_nulls, cols.value_nulls, cols.data_bytes) == (3, 1, 1, 6)
    out = cols.take()
    assert memoryview(out["offset"]).cast("q").tolist() == [100, 101, 102]
    assert memoryview(out["timestamp"]).cast("q").tolist() == [TS * 1000, (TS + 10) * 1000,
                                                               (TS + 20) * 1000]
    assert memoryview(out["timestampType"]).cast("i").tolist() == [0, 0, 0]
    assert cols.num_rows == 0


def test_headers_are_decoded_when_asked() -> None:
    data = frame(record(0, b"k", b"v", [(b"a", b"1"), (b"b", None)]) + record(1, b"k", b"v"), 2)
    cols = ColumnarRecords(include_headers=True)
    cols.add_records(data, 0, 1000)
    assert (cols.num_headers, cols.header_nulls, cols.header_value_nulls) == (2, 1, 1)
    headers = cols.take()["headers"]
    assert memoryview(headers[1]).cast("i").tolist() == [0, 2, 2]
    assert bytes(headers[5]) == b"ab"


def test_values_of_many_batches_across_buffer_growth() -> None:
    payload = b"".join(make_batch([Rec(b"v%d" % i * 50)] * 3, base_offset=3 * i) for i in range(500))
    cols = ColumnarRecords()
    assert cols.add_records(payload, 0, 1500) == (1500, 0)
    assert values(cols) == [b"v%d" % (i // 3) * 50 for i in range(1500)]


def test_a_compressed_batch_goes_through_the_decompress_given() -> None:
    section = record(0, None, b"a") + record(1, None, b"b")
    data = frame(zlib.compress(section), 2, attributes=1)
    calls: list[int] = []

    def decompress(codec: int, raw: memoryview) -> bytes:
        calls.append(codec)
        return zlib.decompress(raw)

    cols = ColumnarRecords(decompress=decompress)
    assert cols.add_records(data, 0, 1000) == (102, 100)
    assert calls == [1] and values(cols) == [b"a", b"b"]


def bounded(codec: int, raw: memoryview) -> bytes:
    """A decompress as kbroker.records.compression's: a bad stream is a ValueError."""
    try:
        return zlib.decompress(raw)
    except zlib.error as e:
        raise ValueError(str(e)) from e


def errors_of(data: bytes, **kw: Any) -> tuple[type[BaseException], str, int]:
    cols = ColumnarRecords(**kw)
    with pytest.raises(Exception) as e:
        cols.add_records(data, 0, 1000)
    return type(e.value), str(e.value), cols.num_rows


GOOD = record(0, b"k", b"v")
# (name, batch, ColumnarRecords options, exception type, message, rows decoded before it)
MALFORMED: list[tuple[str, bytes, dict[str, Any], type[BaseException], str, int]] = [
    ("batch length", frame(GOOD, 1)[:8] + struct.pack(">i", 40) + frame(GOOD, 1)[12:], {},
     CorruptRecordError, "record batch length 52 at byte 0", 0),
    ("magic", frame(GOOD, 1, magic=1), {}, CorruptRecordError,
     "record batch magic 1 (only v2 is read)", 0),
    ("crc", frame(GOOD, 1)[:-1] + b"\xff", {}, CorruptRecordError,
     "CRC mismatch in the batch at offset 100", 0),
    ("record length", frame(GOOD + b"\x80\x80\x80\x80\x80\x01", 2), {}, CorruptRecordError,
     "bad record length in the batch at 100", 1),
    ("record length past the section", frame(GOOD + varint(60) + b"\x00", 2), {},
     CorruptRecordError, "bad record length in the batch at 100", 1),
    ("timestamp delta", frame(GOOD + record(1, None, None, body=b"\xff" * 3), 2), {},
     CorruptRecordError, "bad record in the batch at 100", 1),
    ("key length", frame(GOOD + record(1, None, None, body=b"\x02\x02" + varint(9) + b"k"), 2),
     {}, CorruptRecordError, "bad key/value length in the batch at 100", 1),
    ("value length", frame(GOOD + record(1, None, None, body=b"\x02\x02" + blob(b"k") + varint(-3)),
                           2), {}, CorruptRecordError, "bad key/value length in the batch at 100", 1),
    ("header count", frame(GOOD + record(1, None, None, body=b"\x02\x02" + blob(None) + blob(None)
                                         + varint(-1)), 2), {"include_headers": True},
     CorruptRecordError, "bad header count in the batch at 100", 1),
    ("header key", frame(GOOD + record(1, None, None, body=b"\x02\x02" + blob(None) + blob(None)
                                       + varint(1) + varint(-1)), 2), {"include_headers": True},
     CorruptRecordError, "bad header key in the batch at 100", 1),
    ("header value", frame(GOOD + record(1, None, None, body=b"\x02\x02" + blob(None) + blob(None)
                                         + varint(1) + blob(b"h") + varint(5)), 2),
     {"include_headers": True}, CorruptRecordError, "bad key/value length in the batch at 100", 1),
    ("no decompress", frame(zlib.compress(GOOD), 1, attributes=1), {}, CorruptRecordError,
     "the batch at offset 100 is compressed and no decompress was given", 0),
    ("decompress fails", frame(b"not zlib", 1, attributes=1), {"decompress": bounded},
     CorruptRecordError, "cannot decompress the batch at offset 100: Error -3 while "
     "decompressing data: incorrect header check", 0),
    ("decompress returns garbage", frame(zlib.compress(GOOD), 2, attributes=1),
     {"decompress": lambda codec, raw: zlib.decompress(raw) + b"\x7f"}, CorruptRecordError,
     "bad record length in the batch at 100", 1),
]


@pytest.mark.parametrize(("data", "options", "kind", "message", "rows"),
                         [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_batches_raise_as_before(data: bytes, options: dict[str, Any],
                                           kind: type[BaseException], message: str,
                                           rows: int) -> None:
    assert errors_of(data, **options) == (kind, message, rows)


def test_a_bad_stream_is_chained_and_other_errors_of_decompress_pass_through() -> None:
    data = frame(b"not zlib", 1, attributes=1)
    with pytest.raises(CorruptRecordError) as e:
        ColumnarRecords(decompress=bounded).add_records(data, 0, 1000)
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(zlib.error):  # not a ValueError: not the decoder's to translate
        ColumnarRecords(decompress=lambda codec, raw: zlib.decompress(raw)).add_records(data, 0, 1000)


def test_the_range_is_cut_before_a_malformed_key_is_reached() -> None:
    data = frame(GOOD + record(1, None, None, body=b"\x02\x02" + varint(9) + b"k"), 2)
    cols = ColumnarRecords()
    assert cols.add_records(data, 0, 101) == (101, 100)
    assert cols.num_rows == 1


def test_errors_after_good_batches_keep_what_was_decoded() -> None:
    good = make_batch([Rec(b"x")] * 4, base_offset=96)
    kind, message, rows = errors_of(good + frame(GOOD, 1)[:-1] + b"\xff")
    assert (kind, message, rows) == (CorruptRecordError, "CRC mismatch in the batch at offset 100", 4)
    assert scan_next_offset(good + frame(GOOD, 1), 0) == 101


def test_the_object_refuses_a_second_user_while_it_decodes() -> None:
    """add_records runs without the GIL: a second caller meanwhile (here: from inside the
    decompress callback) is refused instead of racing on the column buffers."""
    data = frame(zlib.compress(GOOD), 1, attributes=1)
    cols: ColumnarRecords

    def reentrant(codec: int, raw: memoryview) -> bytes:
        cols.take()
        return zlib.decompress(raw)

    cols = ColumnarRecords(decompress=reentrant)
    with pytest.raises(RuntimeError, match="in use by another thread"):
        cols.add_records(data, 0, 1000)
    assert cols.take()["num_rows"] == 0  # usable again afterwards
    cols = ColumnarRecords(decompress=bounded)
    assert cols.add_records(data, 0, 1000) == (101, 100) and values(cols) == [b"v"]
