"""EndTxn (key 26), v0-4: commit or abort the producer's transaction.

The transaction coordinator writes PrepareCommit / PrepareAbort and answers; the markers
and the final CompleteCommit / CompleteAbort follow (TransactionCoordinator). A retry of
an EndTxn already done answers NONE; CONCURRENT_TRANSACTIONS while the previous one is
still completing; INVALID_TXN_STATE for a commit of an aborted transaction (or the
reverse) or with no transaction; PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2) for a
fenced producer.
"""

from __future__ import annotations

from kbroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kbroker.server.apis.txn_support import for_version, txn_coordinator
from kbroker.server.request_context import RequestContext


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    code, _pid, _epoch = await txn_coordinator(ctx).end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    return EndTxnResponse(error_code=for_version(code, ctx.api_version, 2))


def error_response(request: EndTxnRequest, version: int, code: int) -> EndTxnResponse:
    return EndTxnResponse(error_code=code)
