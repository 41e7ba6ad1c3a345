"""ForwardingManager: a broker's channel to the controller for the admin requests it
forwards (KIP-590; Kafka's ForwardingManager over its BrokerToControllerChannelManager).

`forward(envelope)` sends an EnvelopeRequest (key 58, v0: the client's request bytes,
its principal and address) to the controller ZooKeeper names (/controller, watched by
the KafkaController; the metadata's controller before that), over a connection of its
own (BrokerChannel: the inter-broker listener, with the inter-broker SASL login), and
returns the envelope's response_data (the controller's answer, header and body). As
Kafka's channel manager does, a request whose connection fails or whose envelope answers
NOT_CONTROLLER (the controller moved) is sent again, to the controller known then, every
100 ms (Kafka's retry.backoff.ms), until request.timeout.ms has passed since it was
first sent: then KafkaError REQUEST_TIMED_OUT (the forwarding broker answers the client
with it, as Kafka's ForwardingManager answers a timeout). Any other envelope error is a
broker misconfiguration: KafkaError UNKNOWN_SERVER_ERROR (what Kafka answers the
client).

Owns: its channel to the controller. Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.messages.envelope import EnvelopeRequest
from kbroker.security.settings import InterBrokerLogin

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0
RETRY_BACKOFF_S = 0.1


class ForwardingManager:
    """See the module docstring."""

    def __init__(self, broker_id: int, controller_id: Callable[[], int],
                 endpoint_of: Callable[[int], Callable[[], tuple[str, int] | None]],
                 login: InterBrokerLogin | None, timeout_ms: int) -> None:
        self.broker_id = broker_id
        self._controller_id = controller_id
        self._endpoint_of = endpoint_of
        self._login = login
        self.timeout_s = timeout_ms / 1000
        self._channel: BrokerChannel | None = None

    def _channel_to(self, controller: int) -> BrokerChannel:
        channel = self._channel
        if channel is None or channel.target_id != controller:
            if channel is not None:
                channel.close()
            channel = BrokerChannel(controller, self._endpoint_of(controller),
                                    f"broker-{self.broker_id}-forwarding", self._login)
            self._channel = channel
        return channel

    async def forward(self, envelope: EnvelopeRequest) -> bytes:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaError("the controller did not answer the forwarded request in "
                                 f"{self.timeout_s:g} s", ErrorCode.REQUEST_TIMED_OUT)
            controller = self._controller_id()
            if controller >= 0:
                channel = self._channel_to(controller)
                try:
                    response = await channel.request(envelope, ENVELOPE_VERSION, remaining)
                except KafkaClientError as e:
                    log.info("forwarding to controller %d failed (%s); retrying", controller, e)
                    channel.reset()
                else:
                    if response.error_code == ErrorCode.NONE and response.response_data is not None:
                        return bytes(response.response_data)
                    if response.error_code != ErrorCode.NOT_CONTROLLER:
                        log.error("controller %d answered a forwarded request with error %d",
                                  controller, response.error_code)
                        raise KafkaError("the controller refused the envelope",
                                         ErrorCode.UNKNOWN_SERVER_ERROR)
                    channel.reset()  # it moved: ask ZooKeeper's next answer
            await asyncio.sleep(min(RETRY_BACKOFF_S, max(deadline - loop.time(), 0)))

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
