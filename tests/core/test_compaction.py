"""The log cleaner's core: MurmurHash3, the offset map, map_keys and RecordFilter over
batches in memory, and what validation accepts of a cleaned batch."""

from __future__ import annotations

import pytest
from batches import Rec, make_batch

from kbroker._core import batch_validation, compaction, record_decode
from kbroker._core.offset_map import SLOT_SIZE, OffsetMap, murmur3_x64_128
from kbroker._core.records import RecordValidationError
from kbroker.records.batch_header import DELETE_HORIZON_BIT, BatchHeader
from kbroker.records.builder import frame_records
from kbroker.records.compression import Codec
from kbroker.records.record_iter import iter_batches

NOW = 1_800_000_000_000
RETENTION = 86_400_000


def test_murmur3_x64_128_reference_values() -> None:
    # MurmurHash3_x64_128, seed 0 (smhasher; mmh3.hash64 gives the same pair signed)
    assert murmur3_x64_128(b"") == (0, 0)
    assert murmur3_x64_128(b"hello") == (0xCBD8A7B341BD9B02, 0x5B1E906A48AE1D19)
    fox = b"The quick brown fox jumps over the lazy dog"
    h1, h2 = murmur3_x64_128(fox)
    assert (h1.to_bytes(8, "little") + h2.to_bytes(8, "little")).hex() == \
        "6c1b07bc7bbc4be347939ac4a93c437a"


def test_offset_map_keeps_the_latest_offset_per_key() -> None:
    m = OffsetMap(SLOT_SIZE * 64)
    assert m.max_slots == 64
    m.put(b"a", 1)
    m.put(b"b", 2)
    m.put(b"a", 7)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (7, 2, -1)
    assert len(m) == 2 and m.latest_offset == 7
    m.put(b"", 9)  # an empty key is a key
    assert m.get(b"") == 9


def test_a_full_offset_map_says_so() -> None:
    m = OffsetMap(SLOT_SIZE * 4)
    for i in range(4):
        m.put(b"k%d" % i, i)
    with pytest.raises(OverflowError):
        m.put(b"k9", 9)
    assert all(m.get(b"k%d" % i) == i for i in range(4))


def _log(*batches: bytes) -> bytes:
    return b"".join(batches)


def _map(buf: bytes, max_size: int = 1000, start_offset: int = 0,
         end_offset: int = 1 << 62) -> tuple[OffsetMap, tuple[int, bool, int]]:
    m = OffsetMap(SLOT_SIZE * 2048)
    reached, plan = compaction.batch_plan(buf, 0, len(buf))
    assert reached == len(buf)
    return m, compaction.map_keys(m, buf, 0, len(buf), start_offset, end_offset, max_size, [], [])


def _filter(buf: bytes, m: OffsetMap, producers: dict[int, int] | None = None,
            decisions: list | None = None, sections: list | None = None) -> bytes:
    f = compaction.RecordFilter(m, NOW, RETENTION, producers or {})
    result = f.filter(buf, 0, len(buf), decisions or [], sections or [])
    out = b""
    for kind, start, end in result.pieces:
        if kind == compaction.COPY:
            out += buf[start:end]
        elif kind == compaction.OUT:
            out += result.out[start:end]
        else:
            out += frame_records(result.out[start:start + 61], result.out[start + 61:end])
    return out


def _records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in iter_batches(data) for r in b.records()]


def test_filter_keeps_the_latest_record_per_key_and_copies_whole_batches() -> None:
    b0 = make_batch([Rec(b"a0", b"a"), Rec(b"b0", b"b")], base_offset=0)
    b1 = make_batch([Rec(b"c0", b"c")], base_offset=2)
    b2 = make_batch([Rec(b"a1", b"a")], base_offset=3)
    buf = _log(b0, b1, b2)
    m, (reached, stopped, read) = _map(buf)
    assert (reached, stopped, read, m.latest_offset) == (len(buf), False, 4, 3)
    out = _filter(buf, m)
    assert _records_of(out) == [(1, b"b", b"b0"), (2, b"c", b"c0"), (3, b"a", b"a1")]
    assert out.endswith(b1 + b2)  # whole batches copied as they are
    rebuilt = BatchHeader.parse(out)
    assert (rebuilt.base_offset, rebuilt.last_offset_delta, rebuilt.record_count) == (0, 1, 1)
    batch_validation.validate_batches(out, from_client=False)  # a follower accepts it
    with pytest.raises(RecordValidationError):
        batch_validation.validate_batches(out)  # a producer may not send it


def test_records_beyond_the_map_are_kept_and_the_walk_stops_at_end_offset() -> None:
    buf = _log(make_batch([Rec(b"a0", b"a")], base_offset=0),
               make_batch([Rec(b"a1", b"a")], base_offset=1),
               make_batch([Rec(b"a2", b"a")], base_offset=2))
    m, (reached, stopped, _read) = _map(buf, end_offset=2)
    assert stopped and m.latest_offset == 1 and reached < len(buf)
    assert _records_of(_filter(buf, m)) == [(1, b"a", b"a1"), (2, b"a", b"a2")]


def test_a_tombstone_gets_a_delete_horizon_then_goes() -> None:
    buf = _log(make_batch([Rec(b"a0", b"a"), Rec(None, b"a"), Rec(b"x", b"x")],
                          base_offset=0, base_timestamp=NOW - 5000))
    m, _ = _map(buf)
    once = _filter(buf, m)
    h = BatchHeader.parse(once)
    assert h.attributes & DELETE_HORIZON_BIT and h.base_timestamp == NOW + RETENTION
    got = [(r.offset, r.key, r.value, r.timestamp) for b in iter_batches(once) for r in b.records()]
    assert got == [(1, b"a", None, NOW - 5000), (2, b"x", b"x", NOW - 5000)]  # timestamps kept
    m2, _ = _map(once)
    assert _filter(once, m2) == once  # before the horizon: copied as it is
    f = compaction.RecordFilter(m2, NOW + RETENTION + 1, RETENTION, {})
    result = f.filter(once, 0, len(once), [], [])
    assert result.messages_retained == 1


def test_a_compressed_batch_is_rebuilt_with_its_codec() -> None:
    batch = make_batch([Rec(b"a0", b"a"), Rec(b"b0", b"b"), Rec(b"a1", b"a")], codec=Codec.LZ4)
    section = next(iter_batches(batch)).records_section()
    m = OffsetMap(SLOT_SIZE * 64)
    compaction.map_keys(m, batch, 0, len(batch), 0, 1 << 62, 100, [], [(0, section)])
    out = _filter(batch, m, sections=[(0, section)])
    assert BatchHeader.parse(out).codec == Codec.LZ4
    assert _records_of(out) == [(1, b"b", b"b0"), (2, b"a", b"a1")]
    with pytest.raises(RecordValidationError):  # its records were not handed over
        compaction.RecordFilter(m, NOW, RETENTION, {}).filter(batch, 0, len(batch), [], [])


def test_a_producers_last_batch_keeps_its_header() -> None:
    b0 = make_batch([Rec(b"a0", b"a")], base_offset=0, producer_id=5, producer_epoch=1,
                    base_sequence=0)
    b1 = make_batch([Rec(b"a1", b"a")], base_offset=1, producer_id=6, producer_epoch=1,
                    base_sequence=0)
    b2 = make_batch([Rec(b"a2", b"a")], base_offset=2)
    buf = _log(b0, b1, b2)
    m, _ = _map(buf)
    out = _filter(buf, m, producers={5: 0, 6: 9})
    headers = [b.header for b in iter_batches(out)]
    assert [(h.base_offset, h.record_count, h.producer_id, h.base_sequence) for h in headers] == \
        [(0, 0, 5, 0), (2, 1, -1, -1)]  # producer 6's batch was not its last: gone
    assert headers[0].size_in_bytes == 61
    batch_validation.validate_batches(out, from_client=False)


def test_the_callers_decisions_drop_or_empty_batches() -> None:
    aborted = make_batch([Rec(b"x", b"x")], base_offset=0, producer_id=5, producer_epoch=0,
                         base_sequence=0, attributes=0x10)
    kept = make_batch([Rec(b"y", b"y")], base_offset=1)
    buf = _log(aborted, kept)
    m = OffsetMap(SLOT_SIZE * 64)
    compaction.map_keys(m, buf, 0, len(buf), 0, 1 << 62, 100, [0], [])
    assert m.get(b"x") == -1  # skipped: aborted data is not mapped
    assert _records_of(_filter(buf, m, decisions=[(0, compaction.DELETE, True, False)])) == \
        [(1, b"y", b"y")]
    out = _filter(buf, m, decisions=[(0, compaction.RETAIN_EMPTY, True, False)])
    assert BatchHeader.parse(out).record_count == 0


def test_keyless_records_of_a_compacted_topic() -> None:
    batch = make_batch([Rec(b"x", b"k"), Rec(b"no key"), Rec(b"y", b"k"), Rec(b"none")])
    with pytest.raises(RecordValidationError) as e:
        batch_validation.validate_batches(batch, require_keys=True)
    assert e.value.error_code == 87
    section = next(iter_batches(batch)).records_section()
    assert record_decode.keyless_records(section, 4) == [1, 3]
