"""InitProducerId (key 22), v0-5: producer ids for idempotent and transactional producers.

Without a transactional id (an idempotent producer): a fresh producer id with epoch 0,
whatever producer id and epoch the request carries (Kafka's TransactionCoordinator
"always blindly accept[s] the request and return[s] a new producerId"; a KIP-360 client
that sends its current id gets a new one, which resets its sequences as a bump would).
In a cluster, where any broker may get the request, the ids come from blocks claimed in
ZooKeeper.

With a transactional id: the transaction coordinator of that id answers (this broker
must lead its __transaction_state partition, else NOT_COORDINATOR): the id's producer id
with its epoch bumped, fencing the previous producer of the id and aborting its
transaction in progress (CONCURRENT_TRANSACTIONS until that is done: the client
retries); INVALID_TRANSACTION_TIMEOUT for a transaction.timeout.ms above
transaction.max.timeout.ms. A producer id given without an epoch (or the reverse) is
INVALID_REQUEST (with or without a transactional id, as KafkaApis checks); PRODUCER_FENCED reads INVALID_PRODUCER_EPOCH before v4, as Kafka
answers older clients.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from kbroker.cluster.zk_producer_ids import ZkProducerIdManager
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: InitProducerIdRequest
           ) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    version = ctx.api_version
    if version >= 3 and (request.producer_id < 0) != (request.producer_epoch < 0):
        return error_response(request, version, ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        return _transactional(ctx, request)
    ids = ctx.services.producer_id_manager
    if isinstance(ids, ZkProducerIdManager):
        # Any broker may get the request in a cluster: ids come in blocks from ZooKeeper.
        return _generate_in_cluster(ids, request, ctx.api_version)
    try:
        new_pid = ids.generate()
    except OSError:
        log.exception("persisting the producer id block failed")
        return error_response(request, ctx.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=new_pid, producer_epoch=0)


async def _transactional(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    version = ctx.api_version
    pid, epoch = (request.producer_id, request.producer_epoch) if version >= 3 else (-1, -1)
    result = await ctx.services.txn_coordinator.init_producer_id(
        request.transactional_id or "", request.transaction_timeout_ms, None if pid < 0 else (pid, epoch))
    code = result.error_code
    if code == ErrorCode.PRODUCER_FENCED and version < 4:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=code, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)


async def _generate_in_cluster(ids: ZkProducerIdManager, request: InitProducerIdRequest,
                               version: int) -> InitProducerIdResponse:
    """A cluster's ids come in blocks claimed in ZooKeeper (a round trip per 1000 ids)."""
    try:
        new_pid = await ids.generate()
    except Exception as e:
        log.warning("claiming a producer id block in ZooKeeper failed: %s", e)
        return error_response(request, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=new_pid, producer_epoch=0)


def error_response(request: InitProducerIdRequest, version: int, code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
