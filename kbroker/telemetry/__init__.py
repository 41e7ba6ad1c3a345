"""Client metrics (KIP-714): clients push their own metrics to the broker, which shows them
on /metrics and in the console. Apache Kafka hands them to a ClientTelemetryReceiver
plugin; kbroker keeps the latest of each and exposes them itself.

    client_metrics_configs.py   the CLIENT_METRICS resource's keys (metrics, interval.ms,
                                match) and their checks (Kafka's ClientMetricsConfigs)
    client_metrics_store.py     the subscriptions, stored durably: a file beside the logs
                                of a single broker, ZooKeeper's /config/client-metrics
    client_metrics_manager.py   ClientMetricsManager and ClientMetricsInstance: which
                                subscription a client gets, the checks on its pushes
    otlp.py                     a push's payload: decompressed, decoded as OTLP
                                MetricsData (opentelemetry-proto), kept as points
"""
