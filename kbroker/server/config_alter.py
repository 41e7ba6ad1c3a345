"""What AlterConfigs and IncrementalAlterConfigs share: per resource, work out the
topic's new set of overrides, check it, and (unless validate_only) persist it in
the topic registry and apply it to the live logs (Log.update_config); in a cluster,
write it to ZooKeeper, from where every broker applies it (the answer follows the write).

Per resource, as Kafka 3.9's ConfigAdminManager.preprocess and
ZkAdminManager.alterConfigs: a resource listed twice -> INVALID_REQUEST; a
TOPIC (2) that does not exist -> UNKNOWN_TOPIC_OR_PARTITION; an unknown or
ill-typed config -> INVALID_CONFIG; a BROKER (4) resource must name this
broker (INVALID_REQUEST otherwise). The keys kbroker applies live
(kbroker.cluster.dynamic_config.LIVE_KEYS) are Kafka's dynamic broker configs (name "":
the cluster-wide default), stored by the support object (a cluster: in ZooKeeper; a
single broker: in files beside its logs, kbroker.metadata.dynamic_broker_store); others
-> INVALID_CONFIG, the message saying why (a feature kbroker lacks, such as Kerberos, or
a key it reads only at start); BROKER_LOGGER (8) levels change live through
IncrementalAlterConfigs (kbroker.server.broker_loggers); CLIENT_METRICS (16), one
subscription of client metrics (KIP-714) each, are checked as Kafka's
ClientMetricsConfigs (kbroker.telemetry.client_metrics_configs: an unknown key or a bad
value -> INVALID_CONFIG, an empty name -> INVALID_REQUEST) and stored by
kbroker.telemetry.client_metrics_store; a GROUP (32)'s share group keys are checked
by kbroker.server.group_config and stored by kbroker.metadata.group_configs (beside the
logs; a cluster: in ZooKeeper); other resource types -> INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kbroker.cluster.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from kbroker.common.config_def import ConfigDef, ConfigError
from kbroker.common.configs import BROKER_CONFIGS, GROUP_CONFIGS, TOPIC_CONFIGS
from kbroker.common.error_code import ErrorCode
from kbroker.config import BrokerConfig
from kbroker.server import authorization as authz
from kbroker.server import broker_loggers, group_config
from kbroker.server.config_describe import ResourceType
from kbroker.server.metadata_support import MetadataSupport
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError
from kbroker.storage.log_config import LogConfig
from kbroker.telemetry import client_metrics_configs as cmc
from kbroker.telemetry.client_metrics_configs import ClientMetricsConfigError
from kbroker.telemetry.client_metrics_store import ClientMetricsConfigStore

log = logging.getLogger(__name__)

class Inherited(NamedTuple):
    """What a resource's overrides sit on: its table of keys and, per key, the value it
    has where this resource does not override it (rendered; a topic's: the broker
    default; a dynamic broker layer's: the layers below it, else the key's default)."""

    keys: ConfigDef
    value: Callable[[str], str | None]


# (resource, its current overrides, what they sit on) -> new overrides
Planner = Callable[[Any, dict[str, str], Inherited], dict[str, str]]


class Outcome(NamedTuple):
    resource_type: int
    resource_name: str
    error_code: int
    error_message: str | None


async def alter_resources(
    ctx: RequestContext, resources: Sequence[Any], plan: Planner, validate_only: bool,
    incremental: bool,
) -> list[Outcome]:
    """Alter each resource (having resource_type, resource_name and configs)."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    out = []
    for res in resources:
        try:
            if counts[(res.resource_type, res.resource_name)] > 1:
                raise AdminError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            refused = authz.config_refusal(ctx, res.resource_type, res.resource_name, "ALTER_CONFIGS")
            if refused is not None:
                raise AdminError(refused, None)
            await _alter(ctx, res, plan, validate_only, incremental)
            out.append(Outcome(res.resource_type, res.resource_name, ErrorCode.NONE, None))
        except AdminError as e:
            out.append(Outcome(res.resource_type, res.resource_name, e.error_code, e.message))
        except Exception as e:
            log.exception("altering configs of %s failed", res.resource_name)
            out.append(Outcome(res.resource_type, res.resource_name,
                               ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None))
    return out


async def _alter(ctx: RequestContext, res: Any, plan: Planner, validate_only: bool,
                 incremental: bool) -> None:
    services = ctx.services
    if res.resource_type == ResourceType.BROKER_LOGGER:
        services.topic_admin.check_broker_name(res.resource_name)
        broker_loggers.alter(res.configs, incremental, validate_only)
        return
    if res.resource_type == ResourceType.BROKER:
        if res.resource_name != "":
            services.topic_admin.check_broker_name(res.resource_name)
        await _alter_dynamic_broker(services.support, res, plan, validate_only)
        return
    if res.resource_type == ResourceType.CLIENT_METRICS:
        await _alter_client_metrics(services.client_metrics_configs, res, plan, validate_only)
        return
    if res.resource_type == ResourceType.GROUP:
        await _alter_group(ctx, res, plan, validate_only)
        return
    if res.resource_type != ResourceType.TOPIC:
        raise AdminError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}.")
    admin = services.topic_admin
    info = admin.find_topic(res.resource_name)
    overrides = plan(res, dict(info.configs), _topic_inherited(services.dynamic_config.log_config_for(info)))
    admin.topic_config(overrides)
    if validate_only:
        return
    await admin.set_topic_configs(info, overrides)
    log.info("topic %s configs now %s", info.name, overrides)


async def _alter_dynamic_broker(support: MetadataSupport, res: Any, plan: Planner,
                                validate_only: bool) -> None:
    """A change of the cluster-wide default ("") or this broker's dynamic configs, checked
    against the whole config it would make, stored (ZooKeeper, or the single broker's
    files) and applied."""
    dynamic = support.dynamic
    entity = DEFAULT_ENTITY if res.resource_name == "" else res.resource_name
    below = dict(dynamic.static) if entity == DEFAULT_ENTITY else {**dynamic.static,
                                                                    **dynamic.cluster_default}
    layer = plan(res, dict(dynamic.layer(entity)), _broker_inherited(below))
    refused = dynamic.refused(set(layer) - set(dynamic.layer(entity)) | {
        k for k, v in layer.items() if dynamic.layer(entity).get(k) != v})
    if refused:
        raise AdminError(ErrorCode.INVALID_CONFIG,
                         f"Cannot update these configs dynamically: {', '.join(refused)} "
                         f"({'; '.join(_why_not_live(refused))})")
    trial = DynamicBrokerConfig(dynamic.static, dynamic.broker_id)
    trial.set_layer(DEFAULT_ENTITY, dynamic.cluster_default)
    trial.set_layer(str(dynamic.broker_id), dynamic.per_broker)
    trial.set_layer(entity, layer)
    try:
        BrokerConfig.from_props(trial.props()).log_config()
    except ConfigError as e:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        await support.alter_broker_config(entity, layer)
        log.info("dynamic broker configs of %s now %s", entity, layer)


async def _alter_client_metrics(store: ClientMetricsConfigStore, res: Any, plan: Planner,
                                validate_only: bool) -> None:
    """A client metrics subscription's new configs, checked as Kafka's ClientMetricsConfigs
    checks them (an empty set removes the subscription), stored and applied."""
    name = res.resource_name
    configs = plan(res, store.configs(name), _CLIENT_METRICS_INHERITED)
    try:
        cmc.validate(name, configs)
    except ClientMetricsConfigError as e:
        raise AdminError(e.error_code, str(e)) from None
    if not validate_only:
        await store.alter(name, configs)
        log.info("client metrics subscription %s now %s", name, configs)


_CLIENT_METRICS_INHERITED = Inherited(
    cmc.CLIENT_METRICS_CONFIGS, lambda name: cmc.CLIENT_METRICS_CONFIGS[name].default_string)


# Kafka's dynamic broker keys for what kbroker does not have: the refusal says which.
_ABSENT = (
    (("sasl.kerberos.",), "kbroker has no Kerberos (SASL/GSSAPI)"),
    (("sasl.login.", "sasl.oauthbearer.", "sasl.jaas.config"),
     "kbroker has no pluggable SASL login modules"),
    (("leader.replication.throttled.rate", "follower.replication.throttled.rate",
      "replica.alter.log.dirs.io.max.bytes.per.second"), "kbroker has no replication quotas"),
    (("num.io.threads", "num.network.threads", "background.threads"),
     "kbroker has no such thread pools (one event loop serves the requests)"),
    (("metric.reporters",), "kbroker has no pluggable metric reporters"),
    (("remote.log.",), "kbroker has no tiered storage"),
)


async def _alter_group(ctx: RequestContext, res: Any, plan: Planner, validate_only: bool) -> None:
    """A GROUP resource's overrides (server/group_config.py), checked, stored (beside the
    logs, or in ZooKeeper, from where every broker of a cluster applies them) and applied."""
    store = ctx.services.share_groups.configs
    if not res.resource_name:
        raise AdminError(ErrorCode.INVALID_REQUEST, "The group name can't be empty.")
    broker = ctx.services.config
    overrides = plan(res, store.get(res.resource_name),
                     Inherited(GROUP_CONFIGS, lambda name: group_config.inherited(broker, name)))
    group_config.check(broker, overrides)
    if not validate_only:
        await store.alter(res.resource_name, overrides)
        log.info("group %s configs now %s", res.resource_name, overrides)


def _why_not_live(names: Sequence[str]) -> list[str]:
    """Per refused key, why: a feature kbroker lacks, a key it does not know, or one it
    reads only at start (set it in server.properties)."""
    reasons: dict[str, list[str]] = {}
    for name in names:
        why = next((w for prefixes, w in _ABSENT if name.startswith(prefixes)), None)
        if why is None and name not in BROKER_CONFIGS:
            why = "not a broker config kbroker knows"
        if why is None:
            why = "kbroker reads these only at start: set them in server.properties"
        reasons.setdefault(why, []).append(name)
    return [f"{', '.join(keys)}: {why}" for why, keys in reasons.items()]


def _topic_inherited(config: LogConfig) -> Inherited:
    return Inherited(TOPIC_CONFIGS, lambda name: TOPIC_CONFIGS[name].render(config.get(name)))


def _broker_inherited(below: dict[str, str]) -> Inherited:
    def value(name: str) -> str | None:
        key = BROKER_CONFIGS[name]
        if name not in below:
            return key.default_string
        try:
            return key.render(key.parse(below[name]))
        except ConfigError:
            return below[name]

    return Inherited(BROKER_CONFIGS, value)


def reject_nulls(names_values: Sequence[tuple[str, str | None]]) -> None:
    for name, value in names_values:
        if value is None:
            raise AdminError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")


def responses(outcomes: Sequence[Outcome], result_type: Any) -> list[Any]:
    """The per-resource results of either API (their result types have the same fields)."""
    return [
        result_type(
            error_code=o.error_code,
            error_message=o.error_message,
            resource_type=o.resource_type,
            resource_name=o.resource_name,
        )
        for o in outcomes
    ]


def failed(resources: Sequence[Any], code: int) -> list[Outcome]:
    """Every resource failed with `code` (a connection-level error response)."""
    return [Outcome(r.resource_type, r.resource_name, code, None) for r in resources]
