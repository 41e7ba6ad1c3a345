"""Kafka's text form of a Uuid: URL-safe base64 of its 16 bytes, no padding."""

from __future__ import annotations

import uuid

import pytest

from kbroker.common.kafka_uuid import uuid_from_base64, uuid_to_base64

PLAIN = uuid.UUID("63094593-93f9-4c40-825e-0d6f0bc37a10")
URL_SAFE = uuid.UUID(bytes=b"\xfb\xef\xbe" * 5 + b"\xff")  # "+" and "/" in standard base64


def test_the_text_is_22_url_safe_characters() -> None:
    assert uuid_to_base64(PLAIN) == "YwlFk5P5TECCXg1vC8N6EA"
    assert uuid_to_base64(URL_SAFE) == "--------------------_w"
    for value in (PLAIN, URL_SAFE, uuid.uuid4()):
        assert uuid_from_base64(uuid_to_base64(value)) == value


def test_text_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError):
        uuid_from_base64("YwlFk5P5TECCXg1vC8N6")
