"""The perf tool: `kbroker perf produce|consume|e2e`, in the spirit of Kafka's perf tests.

librdkafka (confluent-kafka) clients in one or more spawned processes drive any
Kafka-compatible broker; `cli.py` holds the command line, `produce.py`,
`consume.py` and `e2e.py` the three modes, `stats.py` the percentile math.
"""
