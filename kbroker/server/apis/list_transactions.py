"""ListTransactions (key 66), v0-2: the transactional ids this broker coordinates, filtered
by state names, producer ids, (v1) a minimum running time in ms and (v2, KIP-1152) a regular
expression the whole transactional id must match (`kafka-transactions.sh list` asks every
broker). Unknown state names are echoed in unknown_state_filters; a pattern that is not a
regular expression answers INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

from kbroker.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.txn_support import txn_coordinator
from kbroker.server.request_context import RequestContext

R = ListTransactionsResponse


def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    code, unknown, listings = txn_coordinator(ctx).list_transactions(
        request.state_filters, request.producer_id_filters, duration, pattern)
    return R(error_code=code, unknown_state_filters=unknown, transaction_states=[
        R.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                           transaction_state=t.state) for t in listings
        if authz.authorize_transactional_id(ctx, "DESCRIBE", t.transactional_id)])


def error_response(request: ListTransactionsRequest, version: int, code: int) -> ListTransactionsResponse:
    return R(error_code=code)
