"""What a request handler sees besides the request: who asked, how, and the broker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kbroker.broker import BrokerState


class _CloseConnection:
    def __repr__(self) -> str:
        return "CLOSE_CONNECTION"


# A handler's answer meaning: no response; close the connection once the
# responses of earlier requests are sent.
CLOSE_CONNECTION = _CloseConnection()


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: BrokerState
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener_name: str
    peer: str
    principal: KafkaPrincipal = ANONYMOUS  # who the connection authenticated as

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0]
