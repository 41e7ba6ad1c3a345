"""kbroker: a Kafka-compatible message broker.

`from kbroker import Broker` gives the embeddable broker (imported on first use,
so `import kbroker` alone stays cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Broker", "__version__"]

if TYPE_CHECKING:
    from kbroker.broker import Broker


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from kbroker.broker import Broker

        return Broker
    raise AttributeError(f"module 'kbroker' has no attribute {name!r}")
