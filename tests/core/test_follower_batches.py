"""batch_validation.validate_follower_batches: the follower's one walk gives what the two
walks it replaces gave (validate_batches with from_client=False, then scan_segment), on
sound, corrupt and out-of-order payloads; its offsets are 64-bit (scan_segment's bound on
an offset above the segment's base, int32, lifted as the follower's walk lifts it)."""

from __future__ import annotations

import pytest
from batches import Rec, make_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker._core import batch_validation as V
from kbroker._core import segment_scan as S
from kbroker._core.records import RecordValidationError
from tests.sanitized import examples

INFO_FIELDS = ("batch_count", "record_count", "offset_count", "max_timestamp",
               "offset_of_max_timestamp", "codecs", "attributes_or", "producer_id",
               "producer_epoch", "base_sequence", "producer_batches", "valid_bytes")
INT64_MAX = (1 << 63) - 1


def two_walks(buf: bytes, max_message_bytes: int) -> tuple[dict[str, object], S.SegmentScan]:
    info = V.validate_batches(buf, max_message_bytes, from_client=False)
    scan = S.scan_segment(buf, 0, 0, -1, 1 << 62, max_relative_offset=INT64_MAX)
    return {f: getattr(info, f) for f in INFO_FIELDS}, scan


def assert_same_as_two_walks(buf: bytes, max_message_bytes: int = 0x7FFFFFFF) -> None:
    try:
        info, scan = two_walks(buf, max_message_bytes)
    except RecordValidationError as old:
        with pytest.raises(RecordValidationError) as new:
            V.validate_follower_batches(buf, max_message_bytes)
        assert (new.value.error_code, str(new.value)) == (old.error_code, str(old))
        return
    one = V.validate_follower_batches(buf, max_message_bytes)
    assert {f: getattr(one, f) for f in INFO_FIELDS} == info
    assert (one.in_order_bytes, one.next_offset, one.epoch_starts) == (
        scan.valid_bytes, scan.next_offset, scan.epoch_starts)


def batch(base_offset: int, n: int, epoch: int = 0, codec: int = 0, **kw: object) -> bytes:
    recs = [Rec(b"value-%d" % i, key=b"k%d" % i, timestamp_delta=i) for i in range(n)]
    return make_batch(recs, base_offset=base_offset, partition_leader_epoch=epoch, codec=codec,
                      **kw)  # type: ignore[arg-type]


def test_sound_batches_with_epoch_changes() -> None:
    buf = batch(0, 3, epoch=1) + batch(3, 2, epoch=1, codec=3) + batch(5, 4, epoch=4, producer_id=7,
                                                                   producer_epoch=0, base_sequence=0)
    info = V.validate_follower_batches(buf)
    assert (info.next_offset, info.in_order_bytes, info.epoch_starts) == (9, len(buf), [(1, 0), (4, 5)])
    assert info.record_count == 9 and info.producer_batches == 1
    assert_same_as_two_walks(buf)


def test_empty_payload() -> None:
    info = V.validate_follower_batches(b"")
    assert (info.batch_count, info.next_offset, info.in_order_bytes, info.epoch_starts) == (0, -1, 0, [])
    assert_same_as_two_walks(b"")


def test_offsets_out_of_order_are_data_not_an_error() -> None:
    first, second = batch(10, 2, epoch=2), batch(11, 1, epoch=3)
    info = V.validate_follower_batches(first + second)
    assert info.valid_bytes == len(first + second) and info.in_order_bytes == len(first)
    assert (info.next_offset, info.epoch_starts) == (12, [(2, 10)])
    assert_same_as_two_walks(first + second)


@pytest.mark.parametrize("fault", ["crc", "length", "truncated", "magic", "too_large"])
def test_a_corrupt_batch_after_offsets_out_of_order_raises_as_validation_did(fault: str) -> None:
    good = batch(10, 2) + batch(5, 1)  # the second out of order: validation speaks first
    bad = bytearray(batch(20, 3))
    limit = 0x7FFFFFFF
    if fault == "crc":
        bad[-1] ^= 1
    elif fault == "length":
        bad[8:12] = (12).to_bytes(4, "big")
    elif fault == "truncated":
        bad = bad[:-5]
    elif fault == "magic":
        bad[16] = 1
    else:
        limit = len(bad) - 1
    with pytest.raises(RecordValidationError) as exc:
        V.validate_follower_batches(good + bytes(bad), limit)
    assert exc.value.position == len(good)
    assert_same_as_two_walks(good + bytes(bad), limit)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 4), st.integers(-1, 6),
                          st.sampled_from([0, 1, 3])), min_size=0, max_size=6),
       st.one_of(st.none(), st.integers(0, 2000)),
       st.sampled_from([0, (1 << 31) - 20, (1 << 32) - 20]))
def test_matches_validate_then_scan(specs: list[tuple[int, int, int, int]], flip: int | None,
                                    shift: int) -> None:
    buf = bytearray(b"".join(batch(shift + base, n, epoch=epoch, codec=codec)
                             for base, n, epoch, codec in specs))
    if flip is not None and buf:
        buf[flip % len(buf)] ^= 0x5A
    assert_same_as_two_walks(bytes(buf))


@pytest.mark.parametrize("base", [(1 << 31) - 3, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 62) + 5])
def test_offsets_are_64_bit(base: int) -> None:
    """No int32 bound on a follower's offsets (a segment's relative ones are the log's to
    keep): batches at and past 2^31-1 and 2^32 are in order, their epochs where they start."""
    buf = batch(base, 5, epoch=2) + batch(base + 5, 3, epoch=7, codec=3) + batch(base + 100, 2, epoch=7)
    info = V.validate_follower_batches(buf)
    assert (info.in_order_bytes, info.valid_bytes) == (len(buf), len(buf))
    assert info.next_offset == base + 102 and info.epoch_starts == [(2, base), (7, base + 5)]
    assert info.offset_count == 10 and info.record_count == 10
    # and out of order up there is still caught
    info = V.validate_follower_batches(buf + batch(base + 50, 1))
    assert info.in_order_bytes == len(buf) and info.next_offset == base + 102


def test_a_segment_scan_keeps_offsets_within_int32_of_its_base() -> None:
    """The bound the follower's walk lifts is the segment's: its index entries are int32."""
    buf = batch(0x7FFFFFFF - 4, 5) + batch(0x7FFFFFFF + 1, 2)
    scan = S.scan_segment(buf, 0)
    assert scan.valid_bytes == len(batch(0, 5)) and scan.next_offset == 0x80000000
    assert S.scan_segment(buf, 10).valid_bytes == len(buf)
