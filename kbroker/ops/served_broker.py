"""ServedBroker: what the operations listener reads of the broker it serves (the Broker
of kbroker.broker satisfies it), so that kbroker.ops never imports the wiring.

Owns: nothing (a typing Protocol). Read from the broker's event-loop thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kbroker.config import BrokerConfig
    from kbroker.security.credentials import ScramCredentialStore
    from kbroker.server.broker_phase import BrokerPhase
    from kbroker.server.request_metrics import RequestMetrics
    from kbroker.server.request_services import RequestServices


class StartingBroker(Protocol):
    """What the console reads before the broker serves (its logs still loading)."""

    @property
    def scram_credentials(self) -> ScramCredentialStore: ...


class ServedBroker(Protocol):
    """See the module docstring."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def phase(self) -> BrokerPhase: ...

    @property
    def running(self) -> bool: ...

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def state(self) -> StartingBroker | None:
        """Set from the start on, before `services`."""

    @property
    def services(self) -> RequestServices | None:
        """What the handlers see; set once the broker serves."""

    @property
    def server(self) -> Any:
        """The SocketServer once bound (None before): typed as the Broker types it."""

    @property
    def request_metrics(self) -> RequestMetrics | None: ...
