"""Operations: the broker's HTTP listener for people and monitoring (operations.listener).

    listener.py      OperationsListener: aiohttp on the broker's loop; /metrics, /healthz,
                     /readyz, the console's files and JSON
    metrics.py       /metrics: Kafka's metric names (as the Prometheus JMX exporter gives
                     them) read from their owners when scraped; the list of names (METRICS)
    health.py        alive and ready, with each readiness check
    console_api.py   the console's JSON: overview, topics, groups, lag, message browser,
                     the latest bench report
    live.py          figures once a second as server-sent events (charts, `kbroker top`)
    top.py           `kbroker top`: the live figures in a terminal
    discovery.py     where a broker's operations listener is, asked of the broker
                     (DescribeConfigs of its operations.listener), for `kbroker top`
    static/          the console: plain HTML, CSS and JS, uPlot vendored with its licence

Nothing here counts: the counters live with what they count (BrokerTopicStats,
RequestMetrics, the SocketServer, ReplicaManager, LogManager, the group coordinator).
Loaded only when operations.listener is set (and by `kbroker top`).
"""
