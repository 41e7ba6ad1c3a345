"""The one table of configuration keys: every broker key (server.properties) and every
topic key, as Kafka defines them (type, default, validator, documentation, a broker
key's update mode, a topic key's broker synonyms).

BrokerConfig (kbroker.config) and LogConfig (kbroker.storage.log_config) are built
from it; DescribeConfigs, AlterConfigs validation and `kbroker serve --help-config`
read it. Defaults are Kafka 3.9's except where a comment says why kbroker differs.

A topic key that takes its default from one broker key is defined once, with that
key (`_log_config`): type, default and validator are the same for both. A topic key
without a broker synonym is topic-only (as Kafka's replication throttles and tiered
storage keys).

Keys Kafka has that only tune what kbroker does not have (thread pools, socket
buffers) are in ACCEPTED_WITHOUT_EFFECT with the reason: accepted
from server.properties, logged at DEBUG, otherwise ignored. Any other key is unknown.
"""

from __future__ import annotations

from typing import Any

from kbroker.common.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    HostPort,
    Only,
    Range,
    ThrottledReplicas,
    Type,
    UpdateMode,
    Validator,
    all_in,
    at_least,
    between,
    one_of,
)

# Kafka's /tmp/kafka-logs: where quick-starts put data, independent of the current
# directory and never inside a source tree.
DEFAULT_LOG_DIR = "/tmp/kbroker-logs"

DEFAULT_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

RO, PER_BROKER, CLUSTER_WIDE = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = (
    Type.BOOLEAN, Type.STRING, Type.INT, Type.SHORT, Type.LONG, Type.DOUBLE, Type.LIST,
)


def _key(name: str, type_: Type, default: Any, validator: Validator | None, doc: str,
         update_mode: UpdateMode = RO) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, doc, update_mode)


def _log_config(broker: str, topic: str, type_: Type, default: Any, validator: Validator | None,
                doc: str, update_mode: UpdateMode = CLUSTER_WIDE) -> tuple[ConfigKey, ConfigKey]:
    """A topic key and the broker key that supplies its default, defined together."""
    return (
        ConfigKey(broker, type_, default, validator, f"{doc} The default of the topic config "
                  f"{topic}.", update_mode),
        ConfigKey(topic, type_, default, validator, doc, synonyms=(broker,)),
    )


_SERVER = (
    _key("node.id", INT, None, at_least(0),
         "This node's id (KRaft's name for broker.id). 0 when neither is set."),
    _key("broker.id", INT, None, at_least(0), "This broker's id; must agree with node.id."),
    _key("cluster.id", STRING, None, None,
         "kbroker's own: the cluster id to expect in meta.properties (Kafka keeps it only "
         "there). Unset: generated on first start, then read back."),
    _key("broker.rack", STRING, None, None,
         "The rack of this broker, reported in Metadata and DescribeCluster; rack-aware "
         "replica assignment uses it in cluster mode."),
    _key("listeners", LIST, ("PLAINTEXT://127.0.0.1:9092",), None,
         "NAME://host:port to listen on, comma-separated. Each listener's security "
         "protocol is listener.security.protocol.map's; KRaft controller listeners "
         "(controller.listener.names) are dropped. Port 0 picks a free port.", PER_BROKER),
    _key("advertised.listeners", LIST, None, None,
         "The NAME://host:port clients are told to connect to, per listener name; unset: "
         "the listeners themselves.", PER_BROKER),
    _key("listener.security.protocol.map", STRING, DEFAULT_SECURITY_PROTOCOL_MAP, None,
         "NAME:PROTOCOL pairs mapping listener names to security protocols (PLAINTEXT, "
         "SSL, SASL_PLAINTEXT, SASL_SSL).", PER_BROKER),
    _key("controller.listener.names", STRING, None, None,
         "The KRaft controller listeners: kbroker joins no controller quorum and does "
         "not listen on them."),
    _key("inter.broker.listener.name", STRING, None, None,
         "The listener brokers use to talk to each other (cluster mode); unset: the one "
         "security.inter.broker.protocol names."),
    _key("security.inter.broker.protocol", STRING, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS),
         "The security protocol between brokers (cluster mode); not to be set together "
         "with inter.broker.listener.name."),
    _key("socket.request.max.bytes", INT, 104857600, at_least(1),
         "The largest request the broker reads; a larger one closes the connection."),
    _key("connections.max.idle.ms", LONG, 600000, at_least(-1),
         "Close connections idle this long (-1: never)."),
    _key("max.connections", INT, INT_MAX, at_least(0),
         "The most connections the broker keeps open; further ones are closed on accept.",
         CLUSTER_WIDE),
    _key("max.connections.per.ip", INT, INT_MAX, at_least(0),
         "The most connections the broker keeps open from one IP address; further ones "
         "are closed on accept.", CLUSTER_WIDE),
    _key("max.connections.per.ip.overrides", STRING, "", None,
         "Limits overriding max.connections.per.ip for some addresses: a comma-separated "
         "list of <IP address or host name>:<count>, e.g. hostName:100,127.0.0.1:200.",
         CLUSTER_WIDE),
    _key("queued.max.requests", INT, 500, at_least(1),
         "The most requests held unanswered over all connections before the broker "
         "stops reading from sockets."),
    _key("queued.max.request.bytes", LONG, -1, at_least(-1),
         "The most bytes of requests held unanswered (-1: no bound); otherwise at least "
         "socket.request.max.bytes."),
    _key("telemetry.max.bytes", INT, 1048576, at_least(1),
         "The most bytes of metrics a client pushes in one PushTelemetry (KIP-714); larger "
         "pushes get TELEMETRY_TOO_LARGE."),
    _key("request.timeout.ms", INT, 30000, None,
         "How long the broker waits for another broker to answer (cluster mode)."),
    _key("fetch.max.bytes", INT, 57671680, at_least(1024),
         "The most bytes one consumer Fetch response carries, all partitions together "
         "(a larger first batch still comes), whatever the client asks (KIP-541)."),
    _key("fetch.partition.response.max.records", INT, 50000, at_least(0),
         "kbroker's own: about how many records one partition contributes to a consumer's "
         "Fetch response when the client allows more bytes (cut at a batch boundary from "
         "the offset index; the first batch always comes); 0: as Kafka, up to the client's "
         "max.partition.fetch.bytes. librdkafka stops fetching a partition for "
         "fetch.queue.backoff.ms (1 s) whenever a response leaves more than "
         "queued.min.messages (100000) records in its queue: 16 MiB of 100-byte records "
         "did that at every response."),
    _key("fetch.response.max.records", INT, 0, at_least(0),
         "kbroker's own: about how many records one consumer Fetch response carries, all "
         "partitions together, when the client allows more bytes (each partition cut at a "
         "batch boundary from the offset index; the first batch always comes, a partition "
         "left without budget answers no records this time); 0: no bound. librdkafka "
         "backs a consumer's partitions off for fetch.queue.backoff.ms (1 s) whenever its "
         "queue holds queued.min.messages (100000) records or queued.max.messages.kbytes "
         "after a response; the larger each response, the sooner a consumer slower than "
         "the broker gets there (bench/fetch_anatomy.py counts it). Off by default: 20000 "
         "cut those stalls at 100 B (5-7 a million records to 1-4) for twice the broker's "
         "CPU per GB, with no consumer throughput gain measurable on a shared 2-core "
         "machine (bench/RESULTS.md)."),
)

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer",
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer")

# TLS and SASL settings of listeners; each may also be given for one listener as
# listener.name.<name lower case>.<key> (and the JAAS config per mechanism as
# listener.name.<name>.<mechanism lower case>.sasl.jaas.config), as Kafka reads them.
_SECURITY = (
    _key("ssl.protocol", STRING, "TLSv1.3", one_of("TLS", "TLSv1.2", "TLSv1.3"),
         "The TLS protocol of SSL and SASL_SSL listeners; with TLSv1.3 clients may still "
         "negotiate any of ssl.enabled.protocols.", PER_BROKER),
    _key("ssl.enabled.protocols", LIST, ("TLSv1.2", "TLSv1.3"), all_in("TLSv1.2", "TLSv1.3"),
         "The TLS versions a client may negotiate.", PER_BROKER),
    _key("ssl.cipher.suites", LIST, (), None,
         "TLS 1.2 cipher suites, by their IANA (Java) or OpenSSL names; empty: Python's "
         "defaults. TLS 1.3 suites cannot be restricted through Python's ssl, so a TLS 1.3 "
         "name here is refused.", PER_BROKER),
    _key("ssl.keystore.type", STRING, "JKS", one_of("JKS", "PKCS12", "PEM"),
         "The key store format: SSL listeners need PEM (Kafka's default JKS, and PKCS12, "
         "are refused at startup).",
         PER_BROKER),
    _key("ssl.keystore.location", STRING, None, None,
         "A PEM file with the private key (PKCS#8, encrypted when ssl.key.password is set) "
         "and the certificate chain.", PER_BROKER),
    _key("ssl.keystore.password", Type.PASSWORD, None, Only(None, "a PEM key store has no "
         "password (ssl.key.password decrypts the key)"),
         "Refused with PEM key stores, as Kafka refuses it.", PER_BROKER),
    _key("ssl.key.password", Type.PASSWORD, None, None,
         "The password of the private key in ssl.keystore.location or ssl.keystore.key.",
         PER_BROKER),
    _key("ssl.keystore.key", Type.PASSWORD, None, None,
         "The private key in PEM, inline (instead of ssl.keystore.location).", PER_BROKER),
    _key("ssl.keystore.certificate.chain", Type.PASSWORD, None, None,
         "The certificate chain in PEM, inline (with ssl.keystore.key).", PER_BROKER),
    _key("ssl.truststore.type", STRING, "JKS", one_of("JKS", "PKCS12", "PEM"),
         "The trust store format: SSL listeners need PEM.", PER_BROKER),
    _key("ssl.truststore.location", STRING, None, None,
         "A PEM file of the CA certificates client certificates are checked against.",
         PER_BROKER),
    _key("ssl.truststore.password", Type.PASSWORD, None, Only(None, "a PEM trust store has "
         "no password"), "Refused with PEM trust stores, as Kafka refuses it.", PER_BROKER),
    _key("ssl.truststore.certificates", Type.PASSWORD, None, None,
         "CA certificates in PEM, inline (instead of ssl.truststore.location).", PER_BROKER),
    _key("ssl.client.auth", STRING, "none", one_of("required", "requested", "none"),
         "Whether SSL listeners ask clients for a certificate: required (mutual TLS), "
         "requested (checked when given), none.", PER_BROKER),
    _key("ssl.principal.mapping.rules", STRING, "DEFAULT", None,
         "Rules mapping a client certificate's distinguished name (RFC 2253) to a user name, "
         "Kafka's RULE:pattern/replacement/[LU] list ending in DEFAULT (the whole name).",
         PER_BROKER),
    _key("ssl.endpoint.identification.algorithm", STRING, "https", None,
         "Host name verification of the broker's own TLS connections to other brokers; "
         "kbroker's inter-broker listener is PLAINTEXT, so it checks none (Kafka's "
         "server side ignores it too).", PER_BROKER),
    _key("ssl.keymanager.algorithm", STRING, "SunX509", None,
         "Java's key manager: no counterpart in OpenSSL, any value is accepted as in "
         "Kafka configs written for the JVM.", RO),
    _key("ssl.trustmanager.algorithm", STRING, "PKIX", None,
         "Java's trust manager: no counterpart in OpenSSL (chains are checked by OpenSSL's "
         "X.509 verification).", RO),
    _key("ssl.engine.factory.class", Type.CLASS, None, Only(None, "TLS is Python's ssl"),
         "Refused: a Java SslEngineFactory cannot be loaded.", RO),
    _key("sasl.enabled.mechanisms", LIST, ("GSSAPI",), None,
         "The SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
         "OAUTHBEARER (docs/oauthbearer.md) (Kafka's default GSSAPI, Kerberos, is refused when a SASL listener uses it).",
         PER_BROKER),
    _key("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None,
         "The mechanism brokers use with each other when the inter-broker listener is "
         "SASL: it must be enabled there (cluster mode's inter-broker listener is "
         "PLAINTEXT).", PER_BROKER),
    # the OIDC validator of OAUTHBEARER (KIP-768, kbroker.security.oauth_settings)
    _key("sasl.oauthbearer.jwks.endpoint.url", STRING, None, None,
         "OAUTHBEARER's OIDC validator: the https, http or file URL of the JWKS whose keys "
         "sign the tokens (read at startup, then every sasl.oauthbearer.jwks.endpoint."
         "refresh.ms, and sooner for a token signed by a key id it does not hold)."),
    _key("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, 3600000, at_least(1),
         "How often the OIDC validator reads the JWKS again."),
    _key("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, 100, at_least(0),
         "The first wait before a failed JWKS read is retried (doubling each time)."),
    _key("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, 10000, at_least(0),
         "The longest wait between JWKS read retries; past it the read gives up (at "
         "startup: the broker does not start)."),
    _key("sasl.oauthbearer.clock.skew.seconds", INT, 30, at_least(0),
         "The clock difference the OIDC validator allows on exp and nbf."),
    _key("sasl.oauthbearer.expected.audience", LIST, (), None,
         "Audiences a token's aud must name one of; empty: a token with aud is refused "
         "(as Kafka's jose4j refuses it)."),
    _key("sasl.oauthbearer.expected.issuer", STRING, None, None,
         "The iss a token must carry; unset: not checked."),
    _key("sasl.oauthbearer.scope.claim.name", STRING, "scope", None,
         "The claim holding a token's scope."),
    _key("sasl.oauthbearer.sub.claim.name", STRING, "sub", None,
         "The claim naming a token's principal (User:<it> for ACLs)."),
    _key("sasl.server.max.receive.size", INT, 524288, at_least(1),
         "The largest SASL token the broker reads before authentication; larger closes "
         "the connection."),
    _key("connections.max.reauth.ms", LONG, 0, at_least(0),
         "How long a SASL session lasts before the client must re-authenticate (KIP-368); "
         "0: forever.", PER_BROKER),
    _key("authorizer.class.name", STRING, "", one_of("", *AUTHORIZERS),
         "Kafka's AclAuthorizer or StandardAuthorizer turns ACLs on; empty: every "
         "principal may do everything."),
    _key("super.users", STRING, None, None,
         "Principals (User:name) allowed everything, semicolon-separated."),
    _key("allow.everyone.if.no.acl.found", BOOLEAN, False, None,
         "When no ACL matches a resource: allow (true) or deny (false)."),
    _key("quota.window.num", INT, 11, at_least(1),
         "The number of samples client quota rates are measured over."),
    _key("quota.window.size.seconds", INT, 1, at_least(1),
         "The time span of each sample of client quota rates."),
)

_TOPICS = (
    _key("num.partitions", INT, 1, at_least(1),
         "The partition count of a topic created without one (auto-created or -1)."),
    _key("default.replication.factor", INT, 1, at_least(1),
         "The replication factor of a topic created without one."),
    _key("auto.create.topics.enable", BOOLEAN, True, None,
         "Create a topic when a client asks Metadata for one that does not exist."),
    _key("delete.topic.enable", BOOLEAN, True, None,
         "Whether DeleteTopics may delete topics (false: TOPIC_DELETION_DISABLED)."),
    _key("max.broker.partitions", INT, INT_MAX, at_least(0),
         "The most partitions this broker holds; creations beyond it fail with "
         "POLICY_VIOLATION (KIP-578)."),
)

_LOG = (
    _key("log.dirs", STRING, None, None,
         "The data directories, comma-separated; unset: log.dir."),
    _key("log.dir", STRING, DEFAULT_LOG_DIR, None,
         "The data directory when log.dirs is unset (Kafka's default is /tmp/kafka-logs)."),
    _key("log.retention.ms", LONG, None, at_least(-1),
         "How long to keep a segment (-1: forever); wins over log.retention.minutes and "
         "log.retention.hours. The default of the topic config retention.ms.", CLUSTER_WIDE),
    _key("log.retention.minutes", INT, None, at_least(-1),
         "log.retention.ms in minutes; wins over log.retention.hours.", CLUSTER_WIDE),
    _key("log.retention.hours", INT, 168, at_least(-1),
         "log.retention.ms in hours, when neither it nor log.retention.minutes is set.",
         CLUSTER_WIDE),
    _key("log.roll.ms", LONG, None, at_least(1),
         "Roll a new segment after this long; wins over log.roll.hours. The default of the "
         "topic config segment.ms.", CLUSTER_WIDE),
    _key("log.roll.hours", INT, 168, at_least(1),
         "log.roll.ms in hours, when it is not set.", CLUSTER_WIDE),
    _key("log.retention.check.interval.ms", LONG, 300000, at_least(1),
         "How often the broker deletes segments past retention."),
    # Kafka's minimum is 0, which would write the checkpoints without pause.
    _key("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(1),
         "How often the recovery points and log start offsets are checkpointed."),
    _key("num.recovery.threads.per.data.dir", INT, 1, at_least(1),
         "Threads per data directory that load logs at startup and recover them after an "
         "unclean shutdown.", CLUSTER_WIDE),
    _key("log.cleaner.enable", BOOLEAN, True, None,
         "Run the log cleaner, which compacts topics with cleanup.policy=compact "
         "(__consumer_offsets and __transaction_state among them)."),
    _key("log.cleaner.threads", INT, 1, at_least(0),
         "Cleaner threads: logs cleaned at the same time.", CLUSTER_WIDE),
    _key("log.cleaner.dedupe.buffer.size", LONG, 134217728, at_least(0),
         "Memory for the cleaners' offset maps, shared between the threads (24 bytes a "
         "key; only the pages a cleaning touches are used).", CLUSTER_WIDE),
    _key("log.cleaner.io.buffer.size", INT, 524288, at_least(0),
         "I/O buffer memory of the cleaner threads: each filters half its share at a time.",
         CLUSTER_WIDE),
    _key("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, between(0.01, 1),
         "How full a cleaner's offset map may get.", CLUSTER_WIDE),
    _key("log.cleaner.io.max.bytes.per.second", DOUBLE, 1.7976931348623157e308, None,
         "What the cleaners may read and write per second, together.", CLUSTER_WIDE),
    _key("log.cleaner.backoff.ms", LONG, 15000, at_least(0),
         "How long a cleaner thread sleeps when no log needs cleaning.", CLUSTER_WIDE),
    _key("log.open.segment.files.max", INT, -1, at_least(-1),
         "kbroker's own (Kafka keeps every segment open): segments holding an open .log "
         "and mapped indexes at once, least recently used closed first; -1: half the "
         "open-file limit."),
)

_LOG_CONFIGS = (
    _log_config("log.cleanup.policy", "cleanup.policy", LIST, ("delete",),
                all_in(*CLEANUP_POLICIES),
                "delete: drop old segments by time or size; compact: keep the latest record "
                "per key. A list: both may be given. kbroker does not compact yet: a compact "
                "topic keeps every record (compact,delete still applies retention)."),
    _log_config("compression.type", "compression.type", STRING, "producer",
                one_of(*COMPRESSION_TYPES),
                "The codec batches are stored with; producer keeps the producer's codec."),
    _log_config("compression.gzip.level", "compression.gzip.level", INT, -1,
                Range(1, 9, also=(-1,)),
                "The gzip level used when compression.type is gzip (-1: the codec's default)."),
    _log_config("compression.lz4.level", "compression.lz4.level", INT, 9, between(1, 17),
                "The lz4 level used when compression.type is lz4."),
    _log_config("compression.zstd.level", "compression.zstd.level", INT, 3,
                between(-131072, 22),
                "The zstd level used when compression.type is zstd."),
    _log_config("log.cleaner.delete.retention.ms", "delete.retention.ms", LONG, 86400000,
                at_least(0),
                "How long delete tombstones (and markers of emptied transactions) stay "
                "readable on a compacted topic after the cleaning that first kept them."),
    _log_config("log.segment.delete.delay.ms", "file.delete.delay.ms", LONG, 60000, at_least(0),
                "How long a deleted segment's files stay on disk before removal."),
    _log_config("log.flush.interval.messages", "flush.messages", LONG, LONG_MAX, at_least(1),
                "fsync the log after this many records (default: leave it to the OS)."),
    # Kafka's default is null (then log.flush.scheduler.interval.ms, itself Long.MAX_VALUE).
    _log_config("log.flush.interval.ms", "flush.ms", LONG, LONG_MAX, at_least(0),
                "fsync the log when this much time has passed since the last flush."),
    _log_config("log.index.interval.bytes", "index.interval.bytes", INT, 4096, at_least(0),
                "Bytes of records between two entries of the offset index."),
    _log_config("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", LONG, LONG_MAX,
                at_least(1),
                "The longest a record may stay uncompacted (the active segment rolls by then)."),
    _log_config("message.max.bytes", "max.message.bytes", INT, 1048588, at_least(0),
                "The largest record batch the broker accepts for a topic."),
    _log_config("log.message.downconversion.enable", "message.downconversion.enable", BOOLEAN,
                True, None,
                "Whether old fetch versions get converted batches: no effect, kbroker serves "
                "Fetch v4+ only, which read batches as stored (Kafka 4.0 removed this key)."),
    _log_config("log.message.format.version", "message.format.version", STRING, "3.0-IV1", None,
                "Ignored since Kafka 3.0: batches are always format v2.", RO),
    _log_config("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms", LONG,
                LONG_MAX, at_least(0),
                "How far a record's timestamp may lie in the future (CreateTime)."),
    _log_config("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms", LONG,
                LONG_MAX, at_least(0),
                "How far a record's timestamp may lie in the past (CreateTime)."),
    _log_config("log.message.timestamp.difference.max.ms", "message.timestamp.difference.max.ms",
                LONG, LONG_MAX, at_least(0),
                "Deprecated: the largest allowed timestamp skew; applies in either direction "
                "that message.timestamp.before.max.ms / after.max.ms leave at their default."),
    _log_config("log.message.timestamp.type", "message.timestamp.type", STRING, "CreateTime",
                one_of(*TIMESTAMP_TYPES),
                "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with "
                "the broker's time."),
    _log_config("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", DOUBLE, 0.5,
                between(0, 1),
                "The dirty share of a log that triggers compaction."),
    _log_config("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", LONG, 0,
                at_least(0),
                "The shortest a record stays uncompacted."),
    _log_config("min.insync.replicas", "min.insync.replicas", INT, 1, at_least(1),
                "In-sync replicas an acks=all produce needs (a single broker has one: above 1, "
                "acks=all gets NOT_ENOUGH_REPLICAS, as Kafka answers)."),
    _log_config("log.preallocate", "preallocate", BOOLEAN, False,
                Only(False, "preallocation is not implemented by kbroker"),
                "Preallocate segment files on disk when rolling (not implemented by kbroker: "
                "only false is accepted)."),
    # Kafka has no validator: any negative size means no limit.
    _log_config("log.retention.bytes", "retention.bytes", LONG, -1, None,
                "Delete old segments while the partition is larger than this (-1: no limit)."),
    _log_config("log.segment.bytes", "segment.bytes", INT, 1073741824, at_least(14),
                "Roll a new segment file when the active one reaches this size."),
    # Kafka's minimum is 4; kbroker's time index needs room for one 12-byte entry.
    _log_config("log.index.size.max.bytes", "segment.index.bytes", INT, 10485760, at_least(12),
                "The size of each segment's offset and time index files."),
    _log_config("log.roll.jitter.ms", "segment.jitter.ms", LONG, 0, at_least(0),
                "The maximum random jitter subtracted from segment.ms when a segment is "
                "created, drawn per segment."),
    _log_config("unclean.leader.election.enable", "unclean.leader.election.enable", BOOLEAN,
                False, None, "Whether an out-of-sync replica may become leader (cluster mode)."),
)

_REPLICATION = (  # cluster mode (zookeeper.connect) reads these
    _key("zookeeper.connect", STRING, None, None,
         "host:port[,host:port...][/chroot] of the ZooKeeper ensemble; setting it turns on "
         "cluster mode."),
    _key("zookeeper.session.timeout.ms", INT, 18000, None, "The ZooKeeper session timeout."),
    _key("zookeeper.connection.timeout.ms", INT, None, None,
         "How long to wait for a ZooKeeper connection; unset: zookeeper.session.timeout.ms."),
    _key("replica.lag.time.max.ms", LONG, 30000, None,
         "A follower that has not caught up with the leader's log end for this long leaves "
         "the ISR."),
    _key("replica.socket.timeout.ms", INT, 30000, None,
         "The socket timeout of a follower's fetch requests; at least replica.fetch.wait.max.ms."),
    _key("replica.fetch.max.bytes", INT, 1048576, at_least(0),
         "Bytes a follower asks per partition in one fetch (a larger first batch still comes)."),
    _key("replica.fetch.wait.max.ms", INT, 500, None,
         "How long a follower's fetch may wait at the leader for replica.fetch.min.bytes."),
    _key("replica.fetch.min.bytes", INT, 1, None,
         "Bytes a follower's fetch waits for at the leader."),
    _key("replica.fetch.backoff.ms", INT, 1000, at_least(0),
         "How long a follower sleeps after a fetch error."),
    _key("replica.fetch.response.max.bytes", INT, 10485760, at_least(0),
         "Bytes a follower asks for in one fetch response, all partitions together (a "
         "larger first batch still comes)."),
    _key("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, at_least(1),
         "How often high watermarks are written to replication-offset-checkpoint."),
    _key("num.replica.fetchers", INT, 1, None,
         "Fetcher threads per source broker replicating its partitions.", CLUSTER_WIDE),
    _key("auto.leader.rebalance.enable", BOOLEAN, True, None,
         "The controller moves leadership back to preferred replicas in the background."),
    _key("leader.imbalance.check.interval.seconds", LONG, 300, at_least(1),
         "How often the controller checks leader balance."),
    _key("leader.imbalance.per.broker.percentage", INT, 10, None,
         "The share of non-preferred leaders per broker that triggers a rebalance."),
    _key("controlled.shutdown.enable", BOOLEAN, True, None,
         "Hand leadership over to other brokers before shutting down."),
    _key("controlled.shutdown.max.retries", INT, 3, None,
         "Attempts at a controlled shutdown before an unclean one."),
    _key("controlled.shutdown.retry.backoff.ms", LONG, 5000, None,
         "The pause between controlled shutdown attempts."),
)

_COORDINATORS = (
    _key("group.initial.rebalance.delay.ms", INT, 3000, at_least(0),
         "How long the first rebalance of an empty group waits for more members to join."),
    _key("group.min.session.timeout.ms", INT, 6000, at_least(0),
         "The shortest session timeout a member may ask for."),
    _key("group.max.session.timeout.ms", INT, 1800000, at_least(0),
         "The longest session timeout a member may ask for."),
    _key("group.max.size", INT, INT_MAX, at_least(1), "The most members one group may have."),
    _key("group.consumer.session.timeout.ms", INT, 45000, at_least(1),
         "KIP-848 consumer groups: how long a member may go without a heartbeat before it is "
         "fenced and its partitions move (set on the broker; clients send none)."),
    _key("group.consumer.min.session.timeout.ms", INT, 45000, at_least(1),
         "The lower bound of group.consumer.session.timeout.ms."),
    _key("group.consumer.max.session.timeout.ms", INT, 60000, at_least(1),
         "The upper bound of group.consumer.session.timeout.ms."),
    _key("group.consumer.heartbeat.interval.ms", INT, 5000, at_least(1),
         "KIP-848 consumer groups: how often members are told to heartbeat."),
    _key("group.consumer.min.heartbeat.interval.ms", INT, 5000, at_least(1),
         "The lower bound of group.consumer.heartbeat.interval.ms."),
    _key("group.consumer.max.heartbeat.interval.ms", INT, 15000, at_least(1),
         "The upper bound of group.consumer.heartbeat.interval.ms."),
    _key("group.consumer.max.size", INT, INT_MAX, at_least(1),
         "The most members one KIP-848 consumer group may have."),
    _key("group.consumer.assignors", LIST, ("uniform", "range"), None,
         "The server-side assignors of KIP-848 consumer groups, the first the default: "
         "uniform and range (or Kafka's class names of them)."),
    _key("group.consumer.migration.policy", STRING, "bidirectional",
         one_of("disabled", "upgrade", "downgrade", "bidirectional", ignore_case=True),
         "Online conversion of groups with members between the classic and the consumer "
         "protocol: `upgrade` (a classic group becomes a consumer group at its first "
         "ConsumerGroupHeartbeat), `downgrade` (a consumer group left with classic members "
         "only becomes a classic group), both (`bidirectional`, Kafka 4.0's default) or "
         "neither (`disabled`). Empty groups change type whatever the policy."),
    _key("group.share.session.timeout.ms", INT, 45000, at_least(1),
         "Share groups (KIP-932): how long a member may go without a heartbeat before it is "
         "fenced and the records it holds are released."),
    _key("group.share.min.session.timeout.ms", INT, 45000, at_least(1),
         "The lower bound of group.share.session.timeout.ms."),
    _key("group.share.max.session.timeout.ms", INT, 60000, at_least(1),
         "The upper bound of group.share.session.timeout.ms."),
    _key("group.share.heartbeat.interval.ms", INT, 5000, at_least(1),
         "Share groups: how often members are told to heartbeat."),
    _key("group.share.min.heartbeat.interval.ms", INT, 5000, at_least(1),
         "The lower bound of group.share.heartbeat.interval.ms."),
    _key("group.share.max.heartbeat.interval.ms", INT, 15000, at_least(1),
         "The upper bound of group.share.heartbeat.interval.ms."),
    _key("group.share.max.size", SHORT, 200, between(1, 1000), "The most members one share group may have."),
    _key("group.share.record.lock.duration.ms", INT, 30000, at_least(1000),
         "Share groups: how long a record delivered to a member stays locked to it; unacknowledged "
         "by then it is delivered again."),
    _key("group.share.min.record.lock.duration.ms", INT, 15000, at_least(1000),
         "The lower bound of group.share.record.lock.duration.ms."),
    _key("group.share.max.record.lock.duration.ms", INT, 60000, at_least(1000),
         "The upper bound of group.share.record.lock.duration.ms."),
    _key("group.share.delivery.count.limit", INT, 5, between(2, 10),
         "Share groups: how many times a record is delivered before it is archived (given up)."),
    _key("group.share.partition.max.record.locks", INT, 2000, between(100, 10000),
         "Share groups: the most records of one share partition in flight (acquired or to be "
         "delivered again) at a time."),
    _key("group.share.max.share.sessions", INT, 2000, at_least(1),
         "The most share sessions (one per share consumer) this broker keeps."),
    _key("share.coordinator.state.topic.num.partitions", INT, 50, at_least(1),
         "The partition count of __share_group_state (fixed once it exists)."),
    _key("share.coordinator.state.topic.replication.factor", SHORT, 3, at_least(1),
         "The replication factor of __share_group_state (cluster mode; a single broker keeps one)."),
    _key("share.coordinator.state.topic.segment.bytes", INT, 104857600, at_least(1),
         "The segment size of __share_group_state."),
    _key("share.coordinator.state.topic.min.isr", SHORT, 2, at_least(1),
         "The min.insync.replicas of __share_group_state (cluster mode)."),
    _key("offsets.topic.num.partitions", INT, 50, at_least(1),
         "The partition count of __consumer_offsets (fixed once it exists)."),
    _key("offsets.topic.replication.factor", SHORT, 3, at_least(1),
         "The replication factor of __consumer_offsets (cluster mode; a single broker "
         "keeps one replica)."),
    _key("offsets.topic.segment.bytes", INT, 104857600, at_least(1),
         "segment.bytes of __consumer_offsets."),
    _key("offsets.retention.minutes", INT, 10080, at_least(1),
         "How long committed offsets of an empty group are kept."),
    _key("offsets.retention.check.interval.ms", LONG, 600000, at_least(1),
         "How often expired offsets are removed."),
    _key("offsets.commit.timeout.ms", INT, 5000, at_least(1),
         "How long an offset commit waits for every in-sync replica of its __consumer_offsets "
         "partition (cluster mode) before the commit is answered with an error."),
    _key("offset.metadata.max.bytes", INT, 4096, at_least(0),
         "The longest metadata string an offset commit may carry."),
    _key("transaction.state.log.num.partitions", INT, 50, at_least(1),
         "The partition count of __transaction_state (fixed once it exists)."),
    _key("transaction.state.log.replication.factor", SHORT, 3, at_least(1),
         "The replication factor of __transaction_state (cluster mode; a single broker "
         "keeps one replica)."),
    _key("transaction.state.log.min.isr", INT, 2, at_least(1),
         "min.insync.replicas of __transaction_state (cluster mode)."),
    _key("transaction.state.log.segment.bytes", INT, 104857600, at_least(1),
         "segment.bytes of __transaction_state."),
    _key("transaction.state.log.load.buffer.size", INT, 5242880, at_least(1),
         "How many bytes of __transaction_state are read at a time when a transaction "
         "coordinator loads a partition."),
    _key("transaction.max.timeout.ms", INT, 900000, at_least(1),
         "The longest transaction.timeout.ms a producer may ask for in InitProducerId "
         "(INVALID_TRANSACTION_TIMEOUT above it): a long timeout would stall read_committed "
         "consumers behind an abandoned transaction."),
    _key("transactional.id.expiration.ms", INT, 604800000, at_least(1),
         "How long a transactional id without a transaction in progress is kept after its "
         "last state change before the coordinator forgets it (and its producer id)."),
    _key("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, at_least(1),
         "How often the transaction coordinator aborts transactions older than their "
         "transaction.timeout.ms."),
    _key("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, at_least(1),
         "How often the transaction coordinator removes transactional ids that passed "
         "transactional.id.expiration.ms."),
    _key("producer.id.expiration.ms", INT, 86400000, at_least(1),
         "How long an idempotent producer's state outlives its last write.", CLUSTER_WIDE),
)

# kbroker's own: the operations HTTP listener (kbroker.ops). Off unless set; `kbroker serve`
# and `kbroker cluster up` set it (DEFAULT_OPERATIONS_LISTENER, a port per broker).
DEFAULT_OPERATIONS_LISTENER = "127.0.0.1:9404"

_OPERATIONS = (
    _key("operations.listener", STRING, None, HostPort(),
         "kbroker's own: host:port of the operations HTTP listener: /metrics (Prometheus, "
         "named as the Prometheus JMX exporter names Kafka's metrics), /healthz, /readyz and "
         "the web console at /. Port 0 picks a free port; unset or empty: off. An embedded "
         f"Broker leaves it off; `kbroker serve` listens on {DEFAULT_OPERATIONS_LISTENER} unless "
         "it is set, and on a free port of that host, logged, when that default port is taken "
         "(DescribeConfigs then reports the port bound: `kbroker top --bootstrap-server` "
         "finds it). A port set here that is taken stops the start."),
    _key("operations.write.enable", BOOLEAN, False, None,
         "kbroker's own: whether the operations listener's write actions are allowed: "
         "creating and deleting topics and resetting a consumer group's offsets from the web "
         "console (POST and DELETE under /api/). They go through the Kafka APIs, as Kafka's "
         "AdminClient sends them, as the console's signed-in user, so the broker's ACLs "
         "apply to them. false: the console is read-only and every write is a 403."),
)

_TOPIC_ONLY = (
    ConfigKey("follower.replication.throttled.replicas", LIST, (), ThrottledReplicas(),
              "Replicas throttled on the follower side: partitionId:brokerId pairs or * "
              "(cluster mode)."),
    ConfigKey("leader.replication.throttled.replicas", LIST, (), ThrottledReplicas(),
              "Replicas throttled on the leader side: partitionId:brokerId pairs or * "
              "(cluster mode)."),
    ConfigKey("remote.storage.enable", BOOLEAN, False,
              Only(False, "Tiered Storage functionality is disabled in the broker. Topic "
                   "cannot be configured with remote log storage."),
              "Tiered storage for this topic (not supported by kbroker: only false is "
              "accepted)."),
    ConfigKey("local.retention.bytes", LONG, -2, at_least(-2),
              "Local retention size with tiered storage (-2: retention.bytes); no effect "
              "without it."),
    ConfigKey("local.retention.ms", LONG, -2, at_least(-2),
              "Local retention time with tiered storage (-2: retention.ms); no effect "
              "without it."),
)

# Topic keys whose broker default comes from several keys, most specific first.
_TOPIC_WITH_UNITS = (
    ConfigKey("retention.ms", LONG, 7 * 24 * 3600 * 1000, at_least(-1),
              "Delete segments whose records are older than this (-1: keep forever).",
              synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    ConfigKey("segment.ms", LONG, 7 * 24 * 3600 * 1000, at_least(1),
              "Roll a new segment after this long even when it is not full.",
              synonyms=("log.roll.ms", "log.roll.hours")),
)

BROKER_CONFIGS = ConfigDef([
    *_SERVER, *_SECURITY, *_TOPICS, *_LOG, *(broker for broker, _ in _LOG_CONFIGS), *_REPLICATION,
    *_COORDINATORS, *_OPERATIONS,
])
TOPIC_CONFIGS = ConfigDef(sorted(
    [*(topic for _, topic in _LOG_CONFIGS), *_TOPIC_ONLY, *_TOPIC_WITH_UNITS],
    key=lambda k: k.name,
))

# A group's own configs (Kafka's GroupConfig; IncrementalAlterConfigs on a GROUP resource,
# `kafka-configs --entity-type groups`): the share group keys kbroker implements. Each
# falls back to its broker synonym, else its default.
GROUP_CONFIGS = ConfigDef([
    ConfigKey("share.auto.offset.reset", STRING, "latest", one_of("latest", "earliest"),
              "Where a share group starts on a partition it never consumed: the log end "
              "(latest) or the log start (earliest)."),
    ConfigKey("share.isolation.level", STRING, "read_uncommitted", one_of("read_uncommitted", "read_committed"),
              "Which records a share group gets: all appended ones up to the high watermark "
              "(read_uncommitted), or only those of committed transactions, up to the last "
              "stable offset (read_committed; an aborted transaction's records are archived)."),
    ConfigKey("share.record.lock.duration.ms", INT, 30000, at_least(1000),
              "How long a record delivered to a member of this share group stays locked to it "
              "(within group.share.min/max.record.lock.duration.ms).",
              synonyms=("group.share.record.lock.duration.ms",)),
])

# Kafka keys that tune only what kbroker does not have: accepted, with no effect.
ACCEPTED_WITHOUT_EFFECT: dict[str, str] = {
    **dict.fromkeys(
        ("num.network.threads", "num.io.threads", "background.threads",
         "num.replica.alter.log.dirs.threads"),
        "thread pool size: kbroker serves from one event loop (plus its flush, "
        "recovery and file deletion threads)"),
    **dict.fromkeys(
        ("socket.send.buffer.bytes", "socket.receive.buffer.bytes"),
        "socket buffer size: the kernel's defaults (and autotuning) apply"),
    "socket.listen.backlog.size": "accept queue length: kbroker listens with 1024",
    "transaction.partition.verification.enable":
        "partition leaders do not verify transactional Produce requests with the transaction "
        "coordinator (KIP-890 part 1); the coordinator answers such verifications",
    "log.flush.scheduler.interval.ms": "the flush.ms check runs every second",
    "log.flush.start.offset.checkpoint.interval.ms":
        "log start offsets are checkpointed with the recovery points "
        "(log.flush.offset.checkpoint.interval.ms)",
    **dict.fromkeys(
        ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
         "metadata.log.dir"),
        "KRaft quorum: a kbroker node serves clients as a whole single-node cluster and "
        "joins no controller quorum"),
}
# Key prefixes of TLS, SASL and per-listener settings: a key under them that is not in the
# table (nor a per-listener form of one) is refused at startup, never ignored.
SECURITY_PREFIXES = ("listener.name.", "ssl.", "sasl.")


def accepted_without_effect(name: str) -> bool:
    return name in ACCEPTED_WITHOUT_EFFECT
