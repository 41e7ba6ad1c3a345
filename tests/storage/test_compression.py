"""Codecs: round trips, both snappy framings, gzip via zlib, lz4 frame, zstd."""

from __future__ import annotations

import gzip

import cramjam
import pytest

from kbroker.records import compression
from kbroker.records.compression import XERIAL_MAGIC, Codec

DATA = b"".join(b"record %d payload " % i for i in range(5000))


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip(codec: Codec) -> None:
    packed = compression.compress(codec, DATA)
    assert compression.decompress(codec, packed) == DATA
    if codec != Codec.NONE:
        assert len(packed) < len(DATA)


def test_snappy_raw_and_xerial() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert compression.decompress(Codec.SNAPPY, raw) == DATA
    framed = compression.compress(Codec.SNAPPY, DATA)
    assert framed.startswith(XERIAL_MAGIC)
    assert compression.decompress(Codec.SNAPPY, framed) == DATA


def test_gzip_interoperates() -> None:
    assert compression.decompress(Codec.GZIP, gzip.compress(DATA)) == DATA
    assert gzip.decompress(compression.compress(Codec.GZIP, DATA)) == DATA


def test_unknown_codec() -> None:
    with pytest.raises(ValueError):
        compression.decompress(6, b"")
