"""Each listener's security, read from server.properties keys as Kafka reads them.

A listener's protocol is `listener.security.protocol.map`'s. For a key K of the TLS
and SASL table (`ssl.*`, `sasl.*`, `connections.max.reauth.ms`), a listener L uses
`listener.name.<l>.K` (the name in lower case) when set, else K. PLAIN's users and a
mechanism's JAAS options come from `listener.name.<l>.<mechanism>.sasl.jaas.config`
only (Kafka's brokers take no unprefixed sasl.jaas.config). Every other key under
`ssl.`, `sasl.` or `listener.name.` is refused at startup, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kbroker.common.config_def import ConfigError
from kbroker.common.configs import BROKER_CONFIGS, SASL_MECHANISMS, SECURITY_PREFIXES
from kbroker.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasModule, parse_jaas
from kbroker.security.oauth_settings import (
    CALLBACK_HANDLER_KEY,
    OAUTHBEARER,
    OAUTHBEARER_LOGIN_MODULE,
    OIDC_KEYS,
    OAuthSettings,
    oauth_settings,
)
from kbroker.security.principal import PrincipalRules, parse_principal_rules

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# security protocol ids as Kafka's SecurityProtocol numbers them (UpdateMetadata)
PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

# keys that may be given per listener (listener.name.<l>.<key>)
LISTENER_KEYS = frozenset(
    k.name for k in BROKER_CONFIGS
    if k.name.startswith(("ssl.", "sasl.")) and k.name != "sasl.mechanism.inter.broker.protocol"
) | {"connections.max.reauth.ms"}
_JAAS_MODULES = {"PLAIN": PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
                 "SCRAM-SHA-512": SCRAM_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}


@dataclass(frozen=True)
class SslSettings:
    protocol: str
    enabled_protocols: tuple[str, ...]
    cipher_suites: tuple[str, ...]
    keystore_location: str | None
    keystore_key: str | None = field(repr=False)
    keystore_certificate_chain: str | None = field(repr=False)
    key_password: str | None = field(repr=False)
    truststore_location: str | None
    truststore_certificates: str | None = field(repr=False)
    client_auth: str
    principal_rules: PrincipalRules
    prefix: str  # "" or "listener.name.<l>.": how error messages name the keys


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: SslSettings | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    sasl_max_receive_size: int = 524288
    reauth_ms: int = 0
    oauth: OAuthSettings | None = None  # with OAUTHBEARER enabled

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def check_security_keys(props: Mapping[str, str], listener_names: set[str]) -> None:
    """Refuse any key under ssl., sasl. or listener.name. that kbroker does not read."""
    lowered = {n.lower() for n in listener_names}
    for key in props:
        if not key.startswith(SECURITY_PREFIXES):
            continue
        if key in BROKER_CONFIGS:
            continue
        if key.startswith("listener.name."):
            rest = key[len("listener.name."):]
            name, _, suffix = rest.partition(".")
            if name in lowered and (suffix in LISTENER_KEYS or _mechanism_key(suffix)):
                continue
            if name not in lowered:
                raise ConfigError(f"{key}: listener {name!r} is not in listeners")
        if key in ("sasl.jaas.config", "sasl.server.callback.handler.class"):
            raise ConfigError(f"{key}: a broker reads it per listener and mechanism: "
                              f"listener.name.<listener>.<mechanism>.{key}")
        raise ConfigError(f"{key}: not a configuration kbroker implements (its TLS and SASL "
                          "keys are listed by `kbroker serve --help-config`)")


def _mechanism_key(suffix: str) -> bool:
    mech, _, rest = suffix.partition(".")
    return ((rest == "sasl.jaas.config" and mech.upper() in SASL_MECHANISMS)
            or suffix == CALLBACK_HANDLER_KEY)


@dataclass(frozen=True)
class InterBrokerLogin:
    """What a broker logs in with on a SASL inter-broker listener (cluster mode): the
    mechanism (sasl.mechanism.inter.broker.protocol) and the `username` and `password`
    options of that listener's JAAS config for it, as Kafka's brokers take them."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    @property
    def principal(self) -> str:
        return f"User:{self.username}"


def inter_broker_login(name: str, mechanism: str, props: Mapping[str, str]) -> InterBrokerLogin:
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = _jaas(props, f"listener.name.{name.lower()}.", mechanism)
    if jaas is None or not jaas.options.get("username") or "password" not in jaas.options:
        raise ConfigError(f"{key}: the inter-broker listener {name} uses SASL {mechanism}; its "
                          "JAAS config needs username and password, what this broker logs in "
                          "to the others with")
    return InterBrokerLogin(mechanism, jaas.options["username"], jaas.options["password"])


def listener_security(name: str, protocol: str, props: Mapping[str, str],
                      typed: Mapping[str, Any]) -> ListenerSecurity:
    prefix = f"listener.name.{name.lower()}."

    def get(key: str) -> Any:
        if prefix + key in props:
            return BROKER_CONFIGS[key].parse(props[prefix + key])
        return typed[key]

    def named(key: str) -> str:
        return prefix + key if prefix + key in props else key

    ssl = None
    if protocol in TLS_PROTOCOLS:
        ssl = _ssl_settings(get, named, prefix)
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    oauth = None
    if protocol in SASL_PROTOCOLS:
        mechanisms = tuple(m.upper() for m in get("sasl.enabled.mechanisms"))
        if not mechanisms:
            raise ConfigError(f"{named('sasl.enabled.mechanisms')}: listener {name} uses "
                              f"{protocol} and enables no SASL mechanism")
        for mech in mechanisms:
            if mech not in SASL_MECHANISMS:
                raise ConfigError(
                    f"Invalid value {mech} for configuration {named('sasl.enabled.mechanisms')}: "
                    f"kbroker implements {', '.join(SASL_MECHANISMS)} (listener {name})")
            jaas = _jaas(props, prefix, mech)
            if mech == "PLAIN":
                if jaas is None:
                    raise ConfigError(f"{prefix}plain.sasl.jaas.config: listener {name} enables "
                                      "PLAIN and has no JAAS config naming its users (user_<name>)")
                plain_users = {k[5:]: v for k, v in jaas.options.items() if k.startswith("user_")}
            if mech == OAUTHBEARER:
                oauth = oauth_settings(name, prefix, props, jaas, get, named)
    for key in (CALLBACK_HANDLER_KEY, *OIDC_KEYS):
        if oauth is None and prefix + key in props:
            raise ConfigError(f"{prefix}{key}: listener {name} does not enable OAUTHBEARER")
    return ListenerSecurity(name, protocol, ssl, mechanisms, plain_users,
                            get("sasl.server.max.receive.size"), get("connections.max.reauth.ms"),
                            oauth)


def _jaas(props: Mapping[str, str], prefix: str, mechanism: str) -> JaasModule | None:
    key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
    if key not in props:
        return None
    module = parse_jaas(key, props[key])
    if module.login_module != _JAAS_MODULES[mechanism]:
        raise ConfigError(f"Invalid value for configuration {key}: {mechanism} needs the "
                          f"login module {_JAAS_MODULES[mechanism]}")
    return module


def _ssl_settings(get: Any, named: Any, prefix: str) -> SslSettings:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(key) != "PEM":
            raise ConfigError(f"Invalid value {get(key)} for configuration {named(key)}: kbroker "
                              "reads PEM key and trust stores only (set it to PEM)")
    location, key, chain = (get("ssl.keystore.location"), get("ssl.keystore.key"),
                            get("ssl.keystore.certificate.chain"))
    if location is None and (key is None or chain is None):
        raise ConfigError(f"{named('ssl.keystore.location')}: an SSL listener needs a key store "
                          "(or both ssl.keystore.key and ssl.keystore.certificate.chain)")
    if location is not None and (key is not None or chain is not None):
        raise ConfigError(f"{named('ssl.keystore.key')}: give the key store either as "
                          "ssl.keystore.location or inline, not both")
    if get("ssl.truststore.location") is not None and get("ssl.truststore.certificates") is not None:
        raise ConfigError(f"{named('ssl.truststore.certificates')}: give the trust store either "
                          "as ssl.truststore.location or inline, not both")
    if get("ssl.client.auth") != "none" and get("ssl.truststore.location") is None \
            and get("ssl.truststore.certificates") is None:
        raise ConfigError(f"{named('ssl.truststore.location')}: ssl.client.auth="
                          f"{get('ssl.client.auth')} needs a trust store to check client "
                          "certificates against")
    return SslSettings(
        protocol=get("ssl.protocol"), enabled_protocols=get("ssl.enabled.protocols"),
        cipher_suites=get("ssl.cipher.suites"), keystore_location=location, keystore_key=key,
        keystore_certificate_chain=chain, key_password=get("ssl.key.password"),
        truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        client_auth=get("ssl.client.auth"),
        principal_rules=parse_principal_rules(named("ssl.principal.mapping.rules"),
                                              get("ssl.principal.mapping.rules")),
        prefix=prefix)
