"""kbroker: a Kafka-compatible message broker.

`from kbroker import Broker` gives the embeddable broker, `from kbroker import Cluster`
ZooKeeper and N broker processes on this machine (kbroker.cluster.local_cluster); each
is imported on first use, so `import kbroker` alone stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Broker", "Cluster", "__version__"]

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.cluster.local_cluster import Cluster


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from kbroker.broker import Broker

        return Broker
    if name == "Cluster":
        from kbroker.cluster.local_cluster import Cluster

        return Cluster
    raise AttributeError(f"module 'kbroker' has no attribute {name!r}")
