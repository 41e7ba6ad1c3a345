"""`meta.properties` in each log dir: the cluster id and node id, as Kafka writes it.

    #
    #Sun Nov 22 02:30:00 UTC 2026
    cluster.id=Yk2Dt1nBSXCqTzhr3Gmhnw
    node.id=0
    version=1

The cluster id is generated once (22 characters of URL-safe base64 of a random
UUID, like Kafka's `Uuid.randomUuid().toString()`) and then read back on every
start, so clients see a stable cluster id across restarts. A log dir whose
meta.properties names another cluster or node is refused, as Kafka refuses it.
"""

from __future__ import annotations

import os
import time
import uuid

from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.config import ConfigError, parse_properties
from kbroker.utils.atomic_file import write_atomically

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    return uuid_to_base64(uuid.uuid4())


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(log_dir, META_PROPERTIES), encoding="utf-8") as f:
            return parse_properties(f.read())
    except FileNotFoundError:
        return None


def ensure_meta_properties(log_dirs: tuple[str, ...], node_id: int, cluster_id: str | None) -> str:
    """Read or create meta.properties in every log dir; return the cluster id."""
    found: dict[str, dict[str, str]] = {}
    for d in log_dirs:
        os.makedirs(d, exist_ok=True)
        props = read_meta_properties(d)
        if props is not None:
            found[d] = props
    ids = {p["cluster.id"] for p in found.values() if "cluster.id" in p}
    if cluster_id is not None:
        ids.add(cluster_id)
    if len(ids) > 1:
        raise ConfigError(f"log dirs belong to different clusters: {sorted(ids)}")
    for d, props in found.items():
        stored = props.get("node.id", props.get("broker.id"))
        if stored is not None and stored != str(node_id):
            raise ConfigError(
                f"log dir {d} belongs to node.id {stored}, but this broker is node.id {node_id}"
            )
    cid = ids.pop() if ids else new_cluster_id()
    for d in log_dirs:
        if d not in found:
            stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
            text = f"#\n#{stamp}\ncluster.id={cid}\nnode.id={node_id}\nversion=1\n"
            write_atomically(os.path.join(d, META_PROPERTIES), text.encode())
    return cid
