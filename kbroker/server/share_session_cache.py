"""ShareSessionCache: the share sessions of KIP-932, as Kafka's ShareSessionCache and
ShareSession (read, not copied).

A member's ShareFetch and ShareAcknowledge requests run in its share session, keyed by
(group id, member id). The share session epoch of a request says which:

    0    open a session (a new one replaces the member's old one, whose acquired
         records are released); the request may not acknowledge anything
    -1   the final request: acknowledge what it carries, then close the session
    n>0  the session's next epoch (else INVALID_SHARE_SESSION_EPOCH); no session of
         that key: SHARE_SESSION_NOT_FOUND

The session holds the partitions its ShareFetches named, so later ones name only what
changes (new partitions, ForgottenTopicsData), as fetch sessions do (KIP-227). At most
`group.share.max.share.sessions` sessions are open; a new one past that answers
SHARE_SESSION_LIMIT_REACHED.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kbroker.common.error_code import ErrorCode

E = ErrorCode
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARE_SESSION_LIMIT_REACHED = 133  # Kafka 4.1's Errors; not in the 3.9 table

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the next epoch expected
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # in the order named

    def update(self, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]) -> None:
        """The partitions a request names join the session, then those it forgets leave (as
        Kafka's FetchSession.update)."""
        for tp in added:
            self.partitions.setdefault(tp, None)
        for tp in forgotten:
            self.partitions.pop(tp, None)


class ShareSessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new session for the member, and the one it replaces (or None)."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            if old is not None:
                self.sessions[key] = old
            raise ShareSessionError(SHARE_SESSION_LIMIT_REACHED, "The share session cache is full.")
        session = self.sessions[key] = ShareSession(group_id, member_id)
        return session, old

    def get(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session of a request with epoch n > 0 or -1; n > 0 moves it to n + 1."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(E.SHARE_SESSION_NOT_FOUND,
                                    f"No share session for member {member_id} of group {group_id}.")
        if epoch != FINAL_EPOCH:
            if epoch != session.epoch:
                raise ShareSessionError(E.INVALID_SHARE_SESSION_EPOCH, f"The share session epoch is "
                                        f"{session.epoch}, the request has {epoch}.")
            session.epoch += 1
        return session

    def has_group(self, group_id: str) -> bool:
        return any(g == group_id for g, _m in self.sessions)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def __len__(self) -> int:
        return len(self.sessions)
