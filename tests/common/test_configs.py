"""The one table of keys: every topic key has a broker synonym or is topic-only, a key
shared by both is defined once, defaults are valid, every key is documented."""

from __future__ import annotations

from kbroker.common.configs import (
    ACCEPTED_WITHOUT_EFFECT,
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    accepted_without_effect,
)

# Kafka's LogConfig.CONFIGS_WITH_NO_SERVER_DEFAULTS, plus the tiered storage retentions
# (kbroker has no tiered storage, so no broker default is read for them).
TOPIC_ONLY = {
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "remote.storage.enable", "local.retention.bytes", "local.retention.ms",
}


def test_every_topic_key_has_a_broker_synonym_or_is_topic_only() -> None:
    assert {k.name for k in TOPIC_CONFIGS if not k.synonyms} == TOPIC_ONLY
    for key in TOPIC_CONFIGS:
        for synonym in key.synonyms:
            assert synonym in BROKER_CONFIGS, (key.name, synonym)


def test_a_topic_key_and_its_one_broker_synonym_are_one_definition() -> None:
    for key in TOPIC_CONFIGS:
        if len(key.synonyms) == 1:
            broker = BROKER_CONFIGS[key.synonyms[0]]
            assert (broker.type, broker.default, broker.validator) == (
                key.type, key.default, key.validator), key.name
            assert broker.doc.startswith(key.doc)


def test_units_synonyms_agree_on_the_default() -> None:
    hours = BROKER_CONFIGS["log.retention.hours"].default
    assert TOPIC_CONFIGS["retention.ms"].default == hours * 3_600_000
    assert TOPIC_CONFIGS["segment.ms"].default == BROKER_CONFIGS["log.roll.hours"].default * 3_600_000


def test_every_key_is_documented_and_its_default_is_valid() -> None:
    for key in [*BROKER_CONFIGS, *TOPIC_CONFIGS]:
        assert key.doc.strip(), key.name
        if key.default is not None:
            assert key.parse(key.default_string) == key.default, key.name


def test_keys_accepted_without_effect_are_few_documented_and_not_in_the_table() -> None:
    assert len(ACCEPTED_WITHOUT_EFFECT) <= 20
    for name, reason in ACCEPTED_WITHOUT_EFFECT.items():
        assert name not in BROKER_CONFIGS and reason
    assert not accepted_without_effect("ssl.keystore.location")  # a key of the table now
    assert not accepted_without_effect("transaction.max.timeout.ms")


def test_cluster_mode_keys_are_declared_with_kafkas_types_and_defaults() -> None:
    expected = {
        "zookeeper.connect": None, "zookeeper.session.timeout.ms": 18000,
        "zookeeper.connection.timeout.ms": None, "broker.rack": None,
        "default.replication.factor": 1, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2, "unclean.leader.election.enable": False,
        "replica.lag.time.max.ms": 30000, "replica.fetch.max.bytes": 1048576,
        "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
        "replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": 30000,
        "num.replica.fetchers": 1, "controlled.shutdown.enable": True,
        "controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 5000,
        "auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 300,
        "leader.imbalance.per.broker.percentage": 10, "inter.broker.listener.name": None,
        "security.inter.broker.protocol": "PLAINTEXT", "request.timeout.ms": 30000,
    }
    assert {name: BROKER_CONFIGS[name].default for name in expected} == expected
    assert BROKER_CONFIGS["offsets.topic.replication.factor"].type.name == "SHORT"
