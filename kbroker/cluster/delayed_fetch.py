"""DelayedFetch: a Fetch waiting for min_bytes (Kafka's DelayedFetch), and the rule that
says when a read answers (`answers_now`, shared with ReplicaManager.fetch_messages).

A read answers at once when it found at least `min_bytes`, when a partition failed, when
it read no partition, when a record bound of kbroker's left records out (waiting would
bring no more), when the broker is shutting down, or when `max_wait_ms` is over. Else the
fetch parks in the ReplicaManager's fetch purgatory on the partitions it read, and is
read again (not only checked, as Kafka's tryComplete does: kbroker's read is what counts
the bytes) whenever one of them is appended to or its high watermark moves, inside the
request that moved it; it answers when a read finds enough, or at its deadline with what
a last read finds. Each read counts in BrokerTopicStats as the first did.

Who asked answers through a FetchResponder (the Fetch handler: it builds the response
from the FetchResult); once `done` (its connection closed) the fetch reads no more.

Event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from kbroker.utils.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kbroker.cluster.fetch_params import FetchInfo, FetchParams, FetchResult
    from kbroker.cluster.replica_manager import ReplicaManager


class FetchResponder(Protocol):
    """Who answers a fetch (Kafka's responseCallback)."""

    @property
    def done(self) -> bool:
        """Answered, failed or abandoned: no more reads."""
        ...

    def shutting_down(self) -> bool: ...

    def respond(self, result: FetchResult) -> None: ...

    def fail(self, error: BaseException) -> None: ...


def answers_now(params: FetchParams, result: FetchResult, deadline_ms: float, now_ms: float,
                responder: FetchResponder) -> bool:
    """Whether `result` is the answer (see the module docstring)."""
    return (result.bytes_readable >= params.min_bytes
            or result.records_held_back
            or result.error
            or not result.topic_partitions
            or responder.shutting_down()
            or deadline_ms - now_ms <= 0)


class DelayedFetch(DelayedOperation):
    """See the module docstring. `deadline` on the purgatory's clock, in seconds."""

    __slots__ = ("params", "fetch_infos", "replica_manager", "responder", "_result")

    def __init__(self, deadline: float, params: FetchParams, fetch_infos: Iterable[FetchInfo],
                 replica_manager: ReplicaManager, responder: FetchResponder) -> None:
        super().__init__(deadline)
        self.params = params
        self.fetch_infos = fetch_infos
        self.replica_manager = replica_manager
        self.responder = responder
        self._result: FetchResult | None = None

    def try_complete(self) -> bool:
        responder = self.responder
        if responder.done:  # the connection closed: no more reads for it
            return self.force_complete()
        replica_manager = self.replica_manager
        try:
            result = replica_manager.read_from_log(self.params, self.fetch_infos)
        except Exception as e:
            responder.fail(e)
            return self.force_complete()
        if not answers_now(self.params, result, self.deadline * 1000, replica_manager.timer.time() * 1000,
                           responder):
            return False
        self._result = result
        return self.force_complete()

    def on_complete(self) -> None:
        responder = self.responder
        if responder.done:
            return
        result = self._result
        if result is None:  # the deadline: what there is now
            try:
                result = self.replica_manager.read_from_log(self.params, self.fetch_infos)
            except Exception as e:
                responder.fail(e)
                return
        try:
            responder.respond(result)
        except Exception as e:
            responder.fail(e)
