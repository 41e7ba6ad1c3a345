"""DescribeTransactions (key 65), v0: the state of transactional ids this broker coordinates
(`kafka-transactions.sh describe`): state, producer id and epoch, timeout, start time and
partitions. NOT_COORDINATOR for an id coordinated elsewhere, TRANSACTIONAL_ID_NOT_FOUND
for an unknown one.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.txn_support import txn_coordinator
from kbroker.server.request_context import RequestContext

R = DescribeTransactionsResponse


def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = txn_coordinator(ctx)
    states = []
    for transactional_id in request.transactional_ids:
        if not authz.authorize_transactional_id(ctx, "DESCRIBE", transactional_id):
            states.append(R.TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                transactional_id=transactional_id, transaction_state="", transaction_timeout_ms=0,
                transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        d = coordinator.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        for tp in d.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(R.TransactionState(
            error_code=d.error_code, transactional_id=transactional_id, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()
                    if authz.authorize_topic(ctx, "DESCRIBE", t)]))
    return R(transaction_states=states)


def error_response(request: DescribeTransactionsRequest, version: int, code: int) -> DescribeTransactionsResponse:
    return R(transaction_states=[R.TransactionState(error_code=code, transactional_id=t, transaction_state="",
                                                    producer_id=-1, producer_epoch=-1)
                                 for t in request.transactional_ids])
