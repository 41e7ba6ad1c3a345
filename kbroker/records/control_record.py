"""Control records: the transaction markers (COMMIT / ABORT) a partition leader writes for
the transaction coordinator, as Kafka's ControlRecordType and EndTransactionMarker.

A marker is a batch of its own: attributes with the control and transactional bits, the
producer's id and epoch, base sequence -1, uncompressed, one record:

    key:   version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value: version int16 (0) | coordinator_epoch int32

The core reads markers back (kbroker/_core/records.pxd, read_control); this module writes
them and reads the type of a control record's key for the coordinators' loaders.
"""

from __future__ import annotations

import struct

from kbroker.records.batch_header import CONTROL_BIT, TRANSACTIONAL_BIT
from kbroker.records.builder import build_batch

ABORT = 0
COMMIT = 1
UNKNOWN = -2
CURRENT_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   timestamp: int) -> bytes:
    """The control batch ending a transaction of `producer_id` on one partition."""
    key = _KEY.pack(CURRENT_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(CURRENT_VERSION, coordinator_epoch)
    return build_batch([(key, value, 0, ())], timestamp, attributes=CONTROL_BIT | TRANSACTIONAL_BIT,
                       producer_id=producer_id, producer_epoch=producer_epoch)


def control_type(key: bytes | None) -> int:
    """The type of a control record from its key (UNKNOWN when unreadable)."""
    if key is None or len(key) < _KEY.size:
        return UNKNOWN
    version, kind = _KEY.unpack_from(key)
    return kind if version >= 0 else UNKNOWN
