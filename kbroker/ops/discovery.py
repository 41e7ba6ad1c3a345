"""Where a broker's operations listener is, asked of the broker itself over the Kafka
protocol, as Kafka-style tooling finds a broker's settings: DescribeConfigs of the
broker's own config resource (type BROKER, name = its node id), key
`operations.listener`. The broker answers with the address it bound (a `kbroker serve`
whose default port was taken records the free port it took instead), so the URL is
the broker's that `--bootstrap-server` names, never a fixed port's.

    operations_url("127.0.0.1:9092", timeout_s) -> "http://127.0.0.1:9404"

Which node is the one connected to: Metadata's broker at that host and port, else the
only broker there is. A listener bound to a wildcard host (0.0.0.0, ::) is reached at
the host the broker was reached at. Raises KafkaClientError when the broker cannot be
reached or runs no operations listener.
"""

from __future__ import annotations

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse

KEY = "operations.listener"
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
CLIENT_ID = "kbroker-top"


def operations_url(bootstrap: str, timeout_s: float) -> str:
    """http://host:port of the operations listener of the broker at `bootstrap`
    (its first host:port)."""
    host, port = _first_address(bootstrap)
    with BrokerConnection(host, port, CLIENT_ID, timeout_s) as conn:
        node_id = _node_id(conn, host, port)
        version = conn.version_for(ApiKey.DESCRIBE_CONFIGS, 1, 4)
        response: DescribeConfigsResponse = conn.request(DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=str(node_id),
                configuration_keys=[KEY])],
            include_synonyms=False, include_documentation=False), version)
    result = response.results[0]
    if result.error_code != ErrorCode.NONE:
        raise KafkaClientError(f"DescribeConfigs of broker {node_id}: "
                               f"{result.error_message or ErrorCode(result.error_code).name}",
                               result.error_code)
    value = next((c.value for c in result.configs if c.name == KEY), None)
    if not value:
        raise KafkaClientError(f"broker {node_id} at {host}:{port} runs no operations "
                               f"listener ({KEY} is not set)", ErrorCode.NONE)
    listen_host, _, listen_port = value.rpartition(":")
    listen_host = listen_host.strip("[]")
    if listen_host in WILDCARD_HOSTS:
        listen_host = host
    shown = f"[{listen_host}]" if ":" in listen_host else listen_host
    return f"http://{shown}:{listen_port}"


def _first_address(bootstrap: str) -> tuple[str, int]:
    server = bootstrap.split(",")[0].strip()
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad bootstrap server {server!r} (want HOST:PORT)")
    return host.strip("[]"), int(port)


def _node_id(conn: BrokerConnection, host: str, port: int) -> int:
    """The node id of the broker at host:port, from its Metadata answer."""
    version = conn.version_for(ApiKey.METADATA, 1, 12)
    md: MetadataResponse = conn.request(MetadataRequest(topics=[]), version)
    at = [b.node_id for b in md.brokers if b.port == port and b.host == host]
    if len(at) == 1:
        return at[0]
    if len(md.brokers) == 1:  # advertised under another name than the one dialled
        return int(md.brokers[0].node_id)
    ids = ",".join(str(b.node_id) for b in md.brokers)
    raise KafkaClientError(f"no broker that {host}:{port} lists (ids {ids}) is advertised at "
                           f"{host}:{port}: give --url", ErrorCode.NONE)
