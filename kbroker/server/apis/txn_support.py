"""What the transaction API handlers share: the coordinator, and the error older request
versions get instead of PRODUCER_FENCED (Kafka answers INVALID_PRODUCER_EPOCH to the
clients that predate it, KIP-588)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.transaction_coordinator import TransactionCoordinator
from kbroker.server.request_context import RequestContext


def txn_coordinator(ctx: RequestContext) -> TransactionCoordinator:
    coord: TransactionCoordinator = ctx.services.txn_coordinator
    return coord


def for_version(code: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below version `fenced_since`."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
