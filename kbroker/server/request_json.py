"""Protocol messages as JSON values (Kafka's RequestConvertToJson), and the error codes a
response carries: for the request log (`kafka.request.logger`) and the protocol trace
(`kbroker serve --trace`). Used only when one of them is on.

A message becomes an object of the fields its version has, in wire order, named as
the protocol guide names them (snake_case); fields absent from the version are left
out. Values:

    int8 .. int64, uint16, float64, bool, string   as they are (null stays null)
    uuid                                            Kafka's text form (Uuid.toString:
                                                    URL-safe base64, kbroker.common.kafka_uuid)
    bytes                                           base64 (as Kafka's JSON converters);
                                                    a consumer group's subscription and
                                                    assignment bytes (JoinGroup, SyncGroup)
                                                    decoded: {"version": V, fields...}
    struct, [] of anything                          object, array
    records                                         never record data unless asked:

        counts   {"size": S, "batches": B, "records": R}
        batches  {"size": S, "batches": [BATCH...], "records": R}
        records  as batches, each BATCH with "records": [RECORD...]

    BATCH   {"base_offset", "last_offset_delta", "record_count", "size", "compression",
             "timestamp_type", "transactional", "control", "producer_id", "producer_epoch",
             "base_sequence", "partition_leader_epoch", "base_timestamp", "max_timestamp"}
    RECORD  {"offset", "timestamp", "key", "value", "headers": [{"key", "value"}...]}; a
             key or value that is not UTF-8 text is base64 under "key_base64", "value_base64"

A field may hold something else than its struct, written as the struct would be
(Metadata's pre-encoded topic entries): it is encoded and decoded back first.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from enum import Enum
from functools import cache
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kbroker.protocol.schema import FieldSpec, Struct
from kbroker.records.batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from kbroker.records.compression import Codec
from kbroker.records.record_iter import Batch

_PRIMITIVES = frozenset({"int8", "int16", "int32", "int64", "uint16", "float64", "bool",
                         "string", "bytes", "records", "uuid"})
# (struct, bytes field) -> the consumer protocol struct those bytes hold
_EMBEDDED = {
    ("JoinGroupRequestProtocol", "metadata"): ConsumerProtocolSubscription,
    ("JoinGroupResponseMember", "metadata"): ConsumerProtocolSubscription,
    ("SyncGroupRequestAssignment", "assignment"): ConsumerProtocolAssignment,
    ("SyncGroupResponse", "assignment"): ConsumerProtocolAssignment,
}


class Records(Enum):
    """How much of a records field to show."""

    COUNTS = "counts"
    BATCHES = "batches"
    RECORDS = "records"


@cache
def api_name(api_key: int) -> str:
    """The API's name as the protocol guide spells it: "FindCoordinator"."""
    cls = REQUESTS.get(api_key)
    return cls.__name__.removesuffix("Request") if cls is not None else str(api_key)


def to_json(message: Struct, version: int, records: Records = Records.COUNTS) -> dict[str, Any]:
    return _struct(message, type(message), type(message), version, records)


def _struct(value: Any, cls: type[Any], top: type[Any], version: int,
            records: Records) -> dict[str, Any]:
    value = _materialize(value, cls, version)
    out: dict[str, Any] = {}
    for field in cls.FIELDS:
        if field.present(version):
            out[field.name] = _value(getattr(value, field.name), field, cls, top, version,
                                     records)
    return out


def _value(value: Any, field: FieldSpec, owner: type[Any], top: type[Any], version: int,
           records: Records) -> Any:
    if value is None:
        return None
    type_ = field.type
    if type_ == "records":
        return records_json(value, records)
    if type_ == "bytes":
        embedded = _EMBEDDED.get((owner.__name__, field.name))
        decoded = _embedded(value, embedded) if embedded is not None else None
        return decoded if decoded is not None else base64.b64encode(value).decode()
    if type_ == "uuid":
        return uuid_to_base64(value)
    if type_.startswith("[]"):
        item = type_[2:]
        if item in _PRIMITIVES:
            return [uuid_to_base64(v) if isinstance(v, uuid.UUID) else v for v in value]
        cls = getattr(top, item)
        return [_struct(v, cls, top, version, records) for v in value]
    if type_ in _PRIMITIVES:
        return value
    return _struct(value, getattr(top, type_), top, version, records)


def _materialize(value: Any, cls: type[Any], version: int) -> Any:
    if isinstance(value, cls):
        return value
    w = Writer()
    value.encode(w, version)
    return cls.decode(Reader(w.to_bytes()), version)


def _embedded(data: bytes, cls: type[Any]) -> dict[str, Any] | None:
    """A consumer protocol struct (int16 version, then the struct), or None when the
    bytes are not one (another protocol type, or a version we cannot read)."""
    try:
        r = Reader(data)
        version = r.int16()
        lo, hi = cls.VALID_VERSIONS
        decoded = cls.decode(r, min(max(version, lo), hi))
    except (DecodeError, UnicodeDecodeError, ValueError):
        return None
    return {"version": version, **_struct(decoded, cls, cls, min(max(version, lo), hi),
                                          Records.COUNTS)}


# ---------------------------------------------------------------- records


def records_json(records: Any, mode: Records = Records.COUNTS) -> dict[str, Any]:
    """The summary of a records field (bytes in memory, or a file slice of a segment)."""
    size = records.size if _is_slice(records) else len(records)
    batches: list[dict[str, Any]] = []
    n = count = 0
    for header, data in _batches(records, with_data=mode == Records.RECORDS):
        n += 1
        count += header.record_count
        if mode != Records.COUNTS:
            batch = _batch_json(header)
            if data is not None:
                batch["records"] = [_record_json(r) for r in Batch(data).records()]
            batches.append(batch)
    return {"size": size, "batches": n if mode == Records.COUNTS else batches, "records": count}


def _is_slice(records: Any) -> bool:
    return not isinstance(records, bytes | bytearray | memoryview)


def _batches(records: Any, with_data: bool) -> Iterator[tuple[BatchHeader, bytes | None]]:
    """Each whole batch's header (and its bytes when asked); a partial last one is skipped."""
    in_file = _is_slice(records)
    size = records.size if in_file else len(records)
    pos = 0
    while pos + HEADER_SIZE <= size:
        head = (os.pread(records.fd, HEADER_SIZE, records.position + pos) if in_file
                else bytes(records[pos : pos + HEADER_SIZE]))
        if len(head) < HEADER_SIZE:
            return
        header = BatchHeader.parse(head)
        end = pos + header.size_in_bytes
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or end > size:
            return
        data = None
        if with_data:
            data = (os.pread(records.fd, header.size_in_bytes, records.position + pos)
                    if in_file else bytes(records[pos:end]))
        yield header, data
        pos = end


def _batch_json(h: BatchHeader) -> dict[str, Any]:
    try:
        compression = Codec(h.codec).name.lower()
    except ValueError:
        compression = str(h.codec)
    return {
        "base_offset": h.base_offset, "last_offset_delta": h.last_offset_delta,
        "record_count": h.record_count, "size": h.size_in_bytes, "compression": compression,
        "timestamp_type": "LogAppendTime" if h.is_log_append_time else "CreateTime",
        "transactional": h.is_transactional, "control": h.is_control,
        "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence, "partition_leader_epoch": h.partition_leader_epoch,
        "base_timestamp": h.base_timestamp, "max_timestamp": h.max_timestamp,
    }


def _record_json(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
    _put_bytes(out, "key", record.key)
    _put_bytes(out, "value", record.value)
    headers = []
    for key, value in record.headers:
        header = {"key": key}
        _put_bytes(header, "value", value)
        headers.append(header)
    out["headers"] = headers
    return out


def _put_bytes(out: dict[str, Any], name: str, data: bytes | None) -> None:
    if data is None:
        out[name] = None
        return
    try:
        out[name] = bytes(data).decode()
    except UnicodeDecodeError:
        out[f"{name}_base64"] = base64.b64encode(data).decode()


# ---------------------------------------------------------------- errors


def errors(response: Struct, version: int) -> tuple[Counter[str], list[str]]:
    """Every error_code in the response, per partition included, counted by name (in order
    of first appearance), and each distinct non-empty error_message."""
    codes: Counter[str] = Counter()
    messages: dict[str, None] = {}
    _collect(response, type(response), type(response), version, codes, messages)
    return codes, list(messages)


def _collect(value: Any, cls: type[Any], top: type[Any], version: int, codes: Counter[str],
             messages: dict[str, None]) -> None:
    fields = _error_fields(cls, top)
    if not fields:
        return
    value = _materialize(value, cls, version)
    for field, nested in fields:
        if not field.present(version):
            continue
        found = getattr(value, field.name)
        if nested is None:
            if field.name.endswith("error_code"):
                codes[_error_name(found)] += 1
            elif found:
                messages[found] = None
        elif found is not None:
            for item in found if field.type.startswith("[]") else (found,):
                _collect(item, nested, top, version, codes, messages)


def error_counts(response: Struct, version: int) -> dict[int, int]:
    """Every error_code in the response, per partition included, counted by code: what
    `errors` counts, without names or messages, by a plan made once per response type and
    version (the request metrics count every response)."""
    counts: dict[int, int] = {}
    cls = type(response)
    _count(response, cls, _count_plan(cls, cls, version), version, counts)
    return counts


# (field name, nested struct or None for the error_code itself, its plan, a list?)
_CountPlan = tuple[tuple[str, Any, Any, bool], ...]
_COUNT_PLANS: dict[tuple[type[Any], int], _CountPlan] = {}
_LEAF: _CountPlan = (("error_code", None, None, False),)  # a plan that is only an error_code


def _count_plan(cls: type[Any], top: type[Any], version: int) -> _CountPlan:
    plan = _COUNT_PLANS.get((cls, version))
    if plan is None:
        steps: list[tuple[str, Any, Any, bool]] = []
        for field, nested in _error_fields(cls, top):
            if not field.present(version):
                continue
            if nested is None:
                if field.name.endswith("error_code"):  # partition_error_code, ... as errors()
                    steps.append((field.name, None, None, False))
                continue
            inner = _count_plan(nested, top, version)
            if inner:
                steps.append((field.name, nested, inner, field.type.startswith("[]")))
        plan = tuple(steps)
        _COUNT_PLANS[(cls, version)] = plan = _LEAF if plan == _LEAF else plan
    return plan


def _count(value: Any, cls: type[Any], plan: _CountPlan, version: int,
           counts: dict[int, int]) -> None:
    if not isinstance(value, cls):
        value = _materialize(value, cls, version)
    for name, nested, inner, many in plan:
        found = getattr(value, name)
        if nested is None:
            code = int(found)
            counts[code] = counts.get(code, 0) + 1
        elif found is None:
            continue
        elif many and inner is _LEAF:
            # a list of partitions (a Produce or Fetch response): one pass, no recursion
            for item in found:
                if type(item) is not nested:
                    item = _materialize(item, nested, version)
                code = int(item.error_code)  # int: an IntEnum hashes slowly
                counts[code] = counts.get(code, 0) + 1
        else:
            for item in found if many else (found,):
                _count(item, nested, inner, version, counts)


_ERROR_FIELDS: dict[type[Any], tuple[tuple[FieldSpec, Any], ...]] = {}


def _error_fields(cls: type[Any], top: type[Any]) -> tuple[tuple[FieldSpec, Any], ...]:
    """The fields of `cls` that are, or lead to, an error_code or error_message (memoized:
    the classes are generated, so the answer never changes)."""
    found = _ERROR_FIELDS.get(cls)
    if found is None:
        out = []
        for field in cls.FIELDS:
            if (field.name.endswith(("error_code", "error_message"))
                    and field.type in ("int16", "string")):  # partition_error_code (AddPartitionsToTxn v3-), ...
                out.append((field, None))
                continue
            item = field.type.removeprefix("[]")
            if item not in _PRIMITIVES and _error_fields(getattr(top, item), top):
                out.append((field, getattr(top, item)))
        found = _ERROR_FIELDS[cls] = tuple(out)
    return found


def error_name(code: int) -> str:
    """Kafka's name of an error code ("NOT_LEADER_OR_FOLLOWER"), or the number."""
    return _error_name(code)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
