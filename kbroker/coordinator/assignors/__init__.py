"""The server-side assignors of KIP-848 consumer groups, by the name a member gives in
ConsumerGroupHeartbeat's `server_assignor` (`group.remote.assignor` in the clients) or
`group.consumer.assignors` lists: uniform (Kafka's default) and range.

An assignor is a function (subscriptions, partitions, previous) -> target:
subscriptions maps each member id to the topic ids it subscribes to (existing
topics only), partitions maps each topic id to its partition count, previous is the
group's current target assignment (members' stickiness); the target maps every
member id to an assignment (topic id -> frozenset of partitions), each partition of
a subscribed topic given to exactly one member subscribed to it.

Lock: none (pure functions).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kbroker.coordinator.assignors import range as range_assignor
from kbroker.coordinator.assignors import uniform
from kbroker.coordinator.consumer_group_member import Assignment

Subscriptions = dict[str, frozenset[uuid.UUID]]
Assignor = Callable[[Subscriptions, dict[uuid.UUID, int], dict[str, Assignment]], dict[str, Assignment]]

ASSIGNORS: dict[str, Assignor] = {"uniform": uniform.assign, "range": range_assignor.assign}
