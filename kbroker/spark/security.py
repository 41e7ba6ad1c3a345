"""Spark's Kafka security options (`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`),
read as Kafka's clients read them, for the kbroker source and sink.

    kafka.security.protocol       PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka.sasl.mechanism          PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (Kafka's default,
                                  GSSAPI, and OAUTHBEARER are refused)
    kafka.sasl.jaas.config        '<PlainLoginModule | ScramLoginModule> required
                                  username="u" password="p";' (the module's package:
                                  org.apache.kafka.common.security.plain / .scram)
    kafka.ssl.truststore.type     PEM (Kafka's default, JKS, and PKCS12 are refused)
    kafka.ssl.truststore.location | .certificates   CA certificates, a file or inline;
                                  neither: the system's CAs
    kafka.ssl.keystore.type       PEM, for mutual TLS with
    kafka.ssl.keystore.location   a file holding the key and the certificate chain, or
    kafka.ssl.keystore.key + .certificate.chain     both inline
    kafka.ssl.key.password        the key's password when it is encrypted
    kafka.ssl.endpoint.identification.algorithm     https (default: the broker's name is
                                  checked against its certificate) | empty (not checked)
    kafka.ssl.enabled.protocols   TLSv1.2,TLSv1.3 (default)
    kafka.ssl.cipher.suites       TLS 1.2 suites, IANA or OpenSSL names

SASL keys are used with SASL_* protocols, SSL keys with SSL and SASL_SSL; given with
another protocol, they are named in the unused-configs warning, as Kafka's clients do.
Keys that would load Java classes (sasl.login.class, ssl.engine.factory.class, ...)
are refused. Files are read where the client runs: on every executor, as Spark's
own Kafka source reads its stores. Secrets never appear in messages or reprs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.client import ConnectionSecurity
from kbroker.client.sasl import PROTOCOLS, SaslClientError, is_sasl, is_tls
from kbroker.common.config_def import ConfigError
from kbroker.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas
from kbroker.security.principal import parse_principal_rules
from kbroker.security.scram import ScramClient, ScramError
from kbroker.security.settings import SslSettings
from kbroker.security.tls import client_context

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
SASL_KEYS = {"kafka.sasl.mechanism", "kafka.sasl.jaas.config"}
SSL_KEYS = {"kafka.ssl.truststore.type", "kafka.ssl.truststore.location",
            "kafka.ssl.truststore.certificates", "kafka.ssl.keystore.type",
            "kafka.ssl.keystore.location", "kafka.ssl.keystore.key",
            "kafka.ssl.keystore.certificate.chain", "kafka.ssl.key.password",
            "kafka.ssl.endpoint.identification.algorithm", "kafka.ssl.enabled.protocols",
            "kafka.ssl.cipher.suites", "kafka.ssl.protocol"}
# Java classes a JVM client would load: nothing here can run them
_JAVA_CLASSES = ("kafka.sasl.login.class", "kafka.sasl.client.callback.handler.class",
                 "kafka.sasl.login.callback.handler.class", "kafka.ssl.engine.factory.class")


class SecurityOptionError(ValueError):
    """A security option is missing, malformed or asks for what kbroker does not do."""


@dataclass(frozen=True)
class SecurityOptions:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)
    truststore_location: str | None = None
    truststore_certificates: str | None = field(default=None, repr=False)
    keystore_location: str | None = None
    keystore_key: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    enabled_protocols: tuple[str, ...] = TLS_VERSIONS
    cipher_suites: tuple[str, ...] = ()

    def used_keys(self) -> set[str]:
        """The kafka.* keys these settings read (the others are reported as unused)."""
        return {"kafka.security.protocol"} | (SASL_KEYS if is_sasl(self.protocol) else set()) | \
            (SSL_KEYS if is_tls(self.protocol) else set())


def _list(text: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (text or "").split(",") if v.strip())


def security_options(options: Mapping[str, str]) -> SecurityOptions:
    """From lowercased options; SecurityOptionError names the key at fault (never a secret).
    The SSL stores are loaded once here, so a store that cannot be read fails the query
    on the driver, before any task runs."""
    for key in _JAVA_CLASSES:
        if options.get(key) is not None:
            raise SecurityOptionError(f"option {key} is not supported: it names a Java class, "
                                      "and kbroker's Spark client runs no JVM code")
    protocol = (options.get("kafka.security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityOptionError(f"kafka.security.protocol={protocol} is not one of "
                                  f"{', '.join(PROTOCOLS)}")
    kw: dict[str, object] = {"protocol": protocol}
    if is_sasl(protocol):
        kw.update(_sasl(options))
    if is_tls(protocol):
        kw.update(_ssl(options))
    opts = SecurityOptions(**kw)  # type: ignore[arg-type]
    if is_tls(protocol):
        connection_security(opts)
    return opts


def _sasl(options: Mapping[str, str]) -> dict[str, object]:
    mechanism = (options.get("kafka.sasl.mechanism") or "GSSAPI").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        default = " (Kafka's default)" if "kafka.sasl.mechanism" not in options else ""
        raise SecurityOptionError(f"kafka.sasl.mechanism={mechanism}{default} is not supported: "
                                  f"kbroker's Spark client speaks {', '.join(SASL_MECHANISMS)}")
    text = options.get("kafka.sasl.jaas.config")
    if not text:
        raise SecurityOptionError(f"kafka.sasl.jaas.config is required with "
                                  f"kafka.sasl.mechanism={mechanism}: "
                                  f'"{SCRAM_LOGIN_MODULE if mechanism != "PLAIN" else PLAIN_LOGIN_MODULE}'
                                  f' required username=\\"...\\" password=\\"...\\";"')
    try:
        module = parse_jaas("kafka.sasl.jaas.config", text)
    except ConfigError as e:
        raise SecurityOptionError(str(e)) from None
    # as Kafka's: either module hands the username and password to any of these mechanisms
    if module.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        raise SecurityOptionError(f"kafka.sasl.jaas.config: login module {module.login_module} "
                                  f"is not supported; use {PLAIN_LOGIN_MODULE} or "
                                  f"{SCRAM_LOGIN_MODULE}")
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise SecurityOptionError("kafka.sasl.jaas.config: the login module needs username=\"...\" "
                                  "and password=\"...\"")
    return {"sasl_mechanism": mechanism, "username": username, "password": password}


def _ssl(options: Mapping[str, str]) -> dict[str, object]:
    get = options.get
    for store in ("truststore", "keystore"):
        given = any(get(f"kafka.ssl.{store}.{k}") is not None
                    for k in ("location", "certificates", "key", "certificate.chain"))
        if get(f"kafka.ssl.{store}.password") is not None:
            raise SecurityOptionError(f"kafka.ssl.{store}.password is not supported: kbroker "
                                      "reads PEM stores, which take no store password (an "
                                      "encrypted key's password is kafka.ssl.key.password)")
        kind = get(f"kafka.ssl.{store}.type")
        if kind is None and given and not get(f"kafka.ssl.{store}.certificates"):
            raise SecurityOptionError(f"kafka.ssl.{store}.type defaults to JKS, as in Kafka; "
                                      "kbroker reads PEM stores only: set "
                                      f"kafka.ssl.{store}.type=PEM")
        if kind is not None and kind.strip().upper() != "PEM":
            raise SecurityOptionError(f"kafka.ssl.{store}.type={kind.strip()} is not supported: "
                                      "kbroker reads PEM stores only (convert with openssl, "
                                      "e.g. keytool -exportcert -rfc or openssl pkcs12 -nodes)")
    if get("kafka.ssl.truststore.location") is not None and \
            get("kafka.ssl.truststore.certificates") is not None:
        raise SecurityOptionError("kafka.ssl.truststore.certificates: give the trust store "
                                  "either as kafka.ssl.truststore.location or inline, not both")
    location, key, chain = (get("kafka.ssl.keystore.location"), get("kafka.ssl.keystore.key"),
                            get("kafka.ssl.keystore.certificate.chain"))
    if location is not None and (key is not None or chain is not None):
        raise SecurityOptionError("kafka.ssl.keystore.key: give the key store either as "
                                  "kafka.ssl.keystore.location or inline, not both")
    if (key is None) != (chain is None):
        missing = "kafka.ssl.keystore.certificate.chain" if chain is None else \
            "kafka.ssl.keystore.key"
        raise SecurityOptionError(f"{missing} is required with an inline key store")
    algorithm = (get("kafka.ssl.endpoint.identification.algorithm") or "https").strip()
    if algorithm.lower() not in ("https", ""):
        raise SecurityOptionError(f"kafka.ssl.endpoint.identification.algorithm={algorithm}: "
                                  "only https (the default) or empty are supported")
    protocols = _list(get("kafka.ssl.enabled.protocols")) or TLS_VERSIONS
    for name in protocols:
        if name not in TLS_VERSIONS:
            raise SecurityOptionError(f"kafka.ssl.enabled.protocols: {name} is not supported "
                                      f"(only {', '.join(TLS_VERSIONS)})")
    ssl_protocol = get("kafka.ssl.protocol")
    if ssl_protocol is not None and ssl_protocol.strip() not in ("TLS", *TLS_VERSIONS):
        raise SecurityOptionError(f"kafka.ssl.protocol={ssl_protocol.strip()} is not supported "
                                  f"(TLS, {', '.join(TLS_VERSIONS)})")
    return {"truststore_location": get("kafka.ssl.truststore.location"),
            "truststore_certificates": get("kafka.ssl.truststore.certificates"),
            "keystore_location": location, "keystore_key": key,
            "keystore_certificate_chain": chain, "key_password": get("kafka.ssl.key.password"),
            "check_hostname": algorithm.lower() == "https", "enabled_protocols": protocols,
            "cipher_suites": _list(get("kafka.ssl.cipher.suites"))}


class ScramSteps:
    """kbroker.security.scram's ScramClient as kbroker.client's connections drive a
    mechanism: step(challenge) gives the next token, None once the server is verified."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._scram = ScramClient(mechanism, username, password)
        self._step = 0

    def step(self, challenge: bytes | None) -> bytes | None:
        self._step += 1
        try:
            if self._step == 1:
                return self._scram.first()
            if self._step == 2:
                return self._scram.final(challenge or b"")
            self._scram.verify(challenge or b"")
            return None
        except ScramError as e:
            raise SaslClientError(str(e)) from None


@functools.lru_cache(maxsize=16)
def connection_security(opts: SecurityOptions) -> ConnectionSecurity | None:
    """What kbroker.client does on each connection; the SSL context is built once per
    process and settings (tasks of a query share it)."""
    if opts.protocol == "PLAINTEXT":
        return None
    context = None
    if is_tls(opts.protocol):
        settings = SslSettings(
            protocol="TLS", enabled_protocols=opts.enabled_protocols,
            cipher_suites=opts.cipher_suites, keystore_location=opts.keystore_location,
            keystore_key=opts.keystore_key, keystore_certificate_chain=opts.keystore_certificate_chain,
            key_password=opts.key_password, truststore_location=opts.truststore_location,
            truststore_certificates=opts.truststore_certificates, client_auth="none",
            principal_rules=parse_principal_rules("", "DEFAULT"), prefix="kafka.")
        try:
            context = client_context(settings, opts.check_hostname)
        except ConfigError as e:
            raise SecurityOptionError(str(e)) from None
    return ConnectionSecurity(opts.protocol, context, opts.sasl_mechanism, opts.username,
                              opts.password, ScramSteps)
