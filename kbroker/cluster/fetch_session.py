"""Incremental fetch sessions (KIP-227) for followers: Kafka's FetchSession / FetchSessionCache.

A follower's fetcher asks for every partition it copies from this leader (the
`__consumer_offsets` partitions included) in each Fetch; without a session the leader
decodes, reads, and encodes them all for every produce that wakes the fetch, although
usually one partition has news. With a session the follower sends only the partitions
whose fetch position changed (and those it forgets), and the leader answers only the
partitions with news: records, a moved high watermark or log start offset, or an error.

Request metadata, as Kafka's FetchMetadata (session_id, session_epoch):

  (0, -1)    sessionless: a full fetch and a full answer (session_id 0)
  (0, 0)     a full fetch that opens a session: the answer carries its id
  (id, n>0)  an incremental fetch in session `id`, n the epoch the leader expects
             (1 after the opening fetch, then 2, ...; after 2^31-1 it goes back to 1)
  (id, 0)    close session `id` and open a new one with this full fetch
  (id, -1)   close session `id`; a sessionless full fetch

An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH (the follower then opens a new session). The leader reads
every partition of the session in each fetch (the omitted ones at the position last
sent), so a follower's progress and caught-up time move as without a session. A
partition read caught up with nothing to tell keeps what the leader looked up for it
(CachedPartition.quiet): while its state, its log's offsets and the follower's position
stay as they were, the next read only moves the follower's fetch time.

Only followers' fetches (replica_id >= 0, cluster mode) get sessions; a consumer that
asks for one gets session_id 0 and goes on with full fetches, which the protocol
allows (Kafka does so when its cache is full). The cache holds at most
`MAX_SESSIONS` (Kafka's max.incremental.fetch.session.cache.slots default); a new
session then evicts the least recently used one.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

from kbroker.cluster.fetch_params import records_size
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition

MAX_SESSIONS = 1000
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
# A topic id no topic has stays in the session under a name no topic has: this prefix and
# the id. Such a partition is not read: it answers UNKNOWN_TOPIC_ID.
UNKNOWN_TOPIC_PREFIX = "\0"


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: 1, 2, ..., 2^31-1, then 1 again (Kafka's nextEpoch)."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class CachedPartition:
    """What the session knows of one partition: the follower's last request for it, and
    what the last answer told it (-1: nothing yet, so the next answer includes it). A
    FetchInfo itself (cluster/fetch_params.py): the ReplicaManager reads it as it is."""

    __slots__ = ("topic", "topic_id", "partition", "topic_partition", "current_leader_epoch",
                 "fetch_offset", "log_start_offset", "partition_max_bytes", "high_watermark",
                 "sent_log_start_offset", "quiet")

    error_code = ErrorCode.UNKNOWN_TOPIC_ID  # what it answers without a topic_partition

    def __init__(self, topic: str, topic_id: Any, fp: Any) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = fp.partition
        self.topic_partition = (None if topic.startswith(UNKNOWN_TOPIC_PREFIX)
                                else TopicPartition(topic, fp.partition))
        self.high_watermark = -1
        self.sent_log_start_offset = -1
        self.update(fp)

    def update(self, fp: Any) -> None:
        # What the leader looked up when this partition was last read caught up, with
        # nothing new to tell (see ReplicaManager._read_for_follower); a request naming it
        # starts over.
        self.quiet: Any = None
        self.current_leader_epoch = fp.current_leader_epoch
        self.fetch_offset = fp.fetch_offset
        self.log_start_offset = fp.log_start_offset
        self.partition_max_bytes = fp.partition_max_bytes

    def must_respond(self, pd: Any) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData, without the update."""
        return bool(pd.error_code or records_size(pd.records) or pd.high_watermark != self.high_watermark
                    or pd.log_start_offset != self.sent_log_start_offset)

    def unchanged(self, high_watermark: int, log_start_offset: int) -> bool:
        """Whether the last answer already told these (no answer needed without records)."""
        return high_watermark == self.high_watermark and log_start_offset == self.sent_log_start_offset

    def answered(self, pd: Any) -> None:
        """`pd` went out: an error makes the next answer include the partition again."""
        self.high_watermark = -1 if pd.error_code else pd.high_watermark
        self.sent_log_start_offset = pd.log_start_offset


class FetchSession:
    __slots__ = ("session_id", "replica_id", "epoch", "partitions")

    def __init__(self, session_id: int, replica_id: int) -> None:
        self.session_id = session_id
        self.replica_id = replica_id
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next (incremental) fetch must carry
        # (topic, partition) -> CachedPartition, in the order the follower added them
        self.partitions: dict[tuple[str, int], CachedPartition] = {}

    def update(self, topics: list[tuple[str, Any, list[Any]]],
               forgotten: list[tuple[str, list[int]]]) -> None:
        """Add or update the partitions a request names; drop those it forgets."""
        parts = self.partitions
        for topic, topic_id, fps in topics:
            for fp in fps:
                cached = parts.get((topic, fp.partition))
                if cached is None:
                    parts[(topic, fp.partition)] = CachedPartition(topic, topic_id, fp)
                else:
                    cached.update(fp)
        for topic, partitions in forgotten:
            for p in partitions:
                parts.pop((topic, p), None)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def create(self, replica_id: int) -> FetchSession | None:
        """A new session (evicting the least recently used one when full); None when the
        cache holds no sessions at all (max_sessions 0)."""
        if self.max_sessions <= 0:
            return None
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
            self.evictions += 1
        session_id = random.randint(1, 0x7FFFFFFF)
        while session_id in self._sessions:
            session_id = random.randint(1, 0x7FFFFFFF)
        session = self._sessions[session_id] = FetchSession(session_id, replica_id)
        return session
