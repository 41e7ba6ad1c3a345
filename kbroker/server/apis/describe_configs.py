"""DescribeConfigs (key 32), v0-4: the configs of topics and of this broker.

A TOPIC resource (type 2) lists every topic config with its effective value,
source and (include_synonyms, v1+) synonyms, its type (v3+) and, when asked
(include_documentation, v3+), documentation: never an empty list, since
clients read-modify-write it (librdkafka's AlterConfigs examples; another
broker's empty list broke them). A BROKER resource (type 4) named by this
broker's node.id lists the broker's configs; an empty name lists the
cluster-wide dynamic defaults that are set (DYNAMIC_DEFAULT_BROKER_CONFIG, as Kafka's
ConfigHelper: their synonyms leave out the broker's own layer). A BROKER_LOGGER
resource (type 8) lists the log levels (kbroker.server.broker_loggers). A CLIENT_METRICS
resource (type 16, a subscription of client metrics, KIP-714) lists the configs it sets
(source CLIENT_METRICS_CONFIG; none when it does not exist; an empty name ->
INVALID_REQUEST, as Kafka's ConfigHelper). `configuration_keys`
narrows the list (null or empty: all); unknown keys are left out (as Kafka). See
kbroker.server.config_describe for values and sources.

Errors, per resource (Kafka 3.9 ConfigHelper.describeConfigs): unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION, illegal name -> INVALID_TOPIC_EXCEPTION, another
broker's id or a non-integer id -> INVALID_REQUEST, other resource types
(GROUP) -> INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kbroker.common.error_code import ErrorCode
from kbroker.metadata.topic_registry import InvalidTopicError, validate_topic_name
from kbroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server import broker_loggers, group_config
from kbroker.server.config_describe import (
    ConfigDescription,
    ConfigSource,
    ResourceType,
    describe_broker,
    describe_topic,
)
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError
from kbroker.telemetry.client_metrics_configs import CLIENT_METRICS_CONFIGS

log = logging.getLogger(__name__)

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym



def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    synonyms = version >= 1 and request.include_synonyms
    docs = version >= 3 and request.include_documentation
    results = []
    for res in request.resources:
        refused = authz.config_refusal(ctx, res.resource_type, res.resource_name, "DESCRIBE_CONFIGS")
        if refused is not None:
            results.append(_error(res, refused, None))
            continue
        try:
            described = _describe(ctx, res, docs)
        except AdminError as e:
            results.append(_error(res, e.error_code, e.message))
            continue
        except Exception as e:
            log.exception("describing configs of %s failed", res.resource_name)
            results.append(_error(res, ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None))
            continue
        results.append(
            Result(
                error_code=ErrorCode.NONE,
                error_message=None,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=[_entry(d, synonyms) for d in described],
            )
        )
    return DescribeConfigsResponse(results=results)


def _describe(
    ctx: RequestContext, res: DescribeConfigsRequest.DescribeConfigsResource, docs: bool
) -> list[ConfigDescription]:
    services = ctx.services
    keys = res.configuration_keys or None  # null or empty: all (Kafka's ConfigHelper)
    if res.resource_type == ResourceType.TOPIC:
        try:
            validate_topic_name(res.resource_name)
        except InvalidTopicError as e:
            raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        info = services.topics.get(res.resource_name)
        if info is None:
            raise AdminError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist."
            )
        config = services.dynamic_config.log_config_for(info)
        return describe_topic(info.configs, config, services.config, keys, docs, _layers(ctx))
    if res.resource_type == ResourceType.BROKER:
        live = services.support.live_config_keys()
        if res.resource_name == "":  # the cluster-wide default: what it sets (ConfigHelper)
            layers = [(s, v) for s, v in _layers(ctx) if s != ConfigSource.DYNAMIC_BROKER_CONFIG]
            default = services.support.dynamic.cluster_default
            names = [k for k in default if keys is None or k in keys]
            return describe_broker(services.config, names, docs, layers, live)
        services.topic_admin.check_broker_name(res.resource_name)
        return describe_broker(services.config, keys, docs, _layers(ctx), live)
    if res.resource_type == ResourceType.BROKER_LOGGER:
        services.topic_admin.check_broker_name(res.resource_name)
        return broker_loggers.describe(keys)
    if res.resource_type == ResourceType.CLIENT_METRICS:
        return _client_metrics(ctx, res.resource_name, keys, docs)
    if res.resource_type == ResourceType.GROUP:
        return group_config.describe(services.config, services.share_groups.configs.get(res.resource_name),
                                     keys, docs)
    raise AdminError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}.")


def _client_metrics(ctx: RequestContext, name: str, keys: list[str] | None, docs: bool
                    ) -> list[ConfigDescription]:
    """A client metrics subscription's configs as set (Kafka's ConfigHelper: only those,
    source CLIENT_METRICS_CONFIG; a subscription that does not exist has none)."""
    if not name:
        raise AdminError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    out = []
    for key, value in sorted(ctx.services.client_metrics_configs.configs(name).items()):
        if keys is not None and key not in keys:
            continue
        spec = CLIENT_METRICS_CONFIGS[key]
        out.append(ConfigDescription(key, value, ConfigSource.CLIENT_METRICS_CONFIG, (), spec.type,
                                     False, spec.doc if docs else None))
    return out


def _layers(ctx: RequestContext) -> list[tuple[ConfigSource, Mapping[str, str]]]:
    """This broker's dynamic configs (its own, the cluster-wide default) above
    server.properties."""
    return ctx.services.support.dynamic_config_layers()


def _entry(d: ConfigDescription, synonyms: bool) -> Entry:
    return Entry(
        name=d.name,
        value=d.value,
        read_only=d.read_only,
        is_default=d.source == ConfigSource.DEFAULT_CONFIG,
        config_source=d.source,
        is_sensitive=d.is_sensitive,
        synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in d.synonyms]
        if synonyms
        else [],
        config_type=d.config_type,
        documentation=d.documentation,
    )


def _error(res: DescribeConfigsRequest.DescribeConfigsResource, code: int, message: str | None) -> Result:
    return Result(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=[],
    )


def error_response(request: DescribeConfigsRequest, version: int, code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[_error(r, code, None) for r in request.resources])
