"""A listener's OAUTHBEARER settings, read as Kafka reads them (KIP-255, KIP-768).

The validator is chosen by `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`:

    unset, or Kafka's OAuthBearerUnsecuredValidatorCallbackHandler
        the unsecured validator (development: `alg: none` tokens), configured by the
        options of the listener's OAuthBearerLoginModule JAAS config:
        unsecuredValidatorPrincipalClaimName (sub), unsecuredValidatorScopeClaimName
        (scope), unsecuredValidatorRequiredScope (space-separated),
        unsecuredValidatorAllowableClockSkewMs (0)
    Kafka's OAuthBearerValidatorCallbackHandler (and its 3.1-3.3 name under .secured)
        the OIDC validator: JWTs signed by a key of `sasl.oauthbearer.jwks.endpoint.url`
        (https, http or file), with the sasl.oauthbearer.* keys of OIDC_KEYS

Anything else is refused at startup naming the key, as is a key or JAAS option the
chosen validator does not read: an OIDC key on a listener whose validator is the
unsecured one, the unsecuredLogin* / clientId options of the broker's own login (which
Kafka uses for inter-broker OAUTHBEARER only, which kbroker does not implement).
Pure data; built once at config time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from kbroker.common.config_def import ConfigError
from kbroker.security.jaas import JaasModule

OAUTHBEARER = "OAUTHBEARER"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CALLBACK_HANDLER_KEY = "oauthbearer.sasl.server.callback.handler.class"
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")
OIDC_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                 "org.apache.kafka.common.security.oauthbearer.secured."
                 "OAuthBearerValidatorCallbackHandler")
OIDC_KEYS = ("sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
             "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
             "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
             "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience",
             "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.scope.claim.name",
             "sasl.oauthbearer.sub.claim.name")
_UNSECURED_OPTIONS = ("unsecuredValidatorPrincipalClaimName", "unsecuredValidatorScopeClaimName",
                      "unsecuredValidatorRequiredScope", "unsecuredValidatorAllowableClockSkewMs")


@dataclass(frozen=True)
class UnsecuredSettings:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0


@dataclass(frozen=True)
class OidcSettings:
    jwks_url: str
    refresh_ms: int = 3600000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10000
    clock_skew_s: int = 30
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    key: str = "sasl.oauthbearer.jwks.endpoint.url"  # how messages name the URL's key


@dataclass(frozen=True)
class OAuthSettings:
    listener: str
    unsecured: UnsecuredSettings | None = None
    oidc: OidcSettings | None = None


def oauth_settings(listener: str, prefix: str, props: Mapping[str, str], jaas: JaasModule | None,
                   get: Callable[[str], Any], named: Callable[[str], str]) -> OAuthSettings:
    handler_key = prefix + CALLBACK_HANDLER_KEY
    handler = props.get(handler_key, UNSECURED_HANDLER).strip()
    options = dict(jaas.options) if jaas is not None else {}
    jaas_key = f"{prefix}oauthbearer.sasl.jaas.config"
    for option in options:
        if option.startswith("unsecuredLogin") or option in ("clientId", "clientSecret", "scope"):
            raise ConfigError(f"{jaas_key}: option {option} configures the broker's own "
                              "OAUTHBEARER login, which Kafka uses for inter-broker OAUTHBEARER; "
                              "kbroker's brokers do not log in with OAUTHBEARER (remove it)")
        if option not in _UNSECURED_OPTIONS:
            raise ConfigError(f"{jaas_key}: {option} is not an option of OAuthBearerLoginModule "
                              "that a broker reads")
    if handler == UNSECURED_HANDLER:
        for key in OIDC_KEYS:
            if prefix + key in props:
                raise ConfigError(f"{prefix + key}: listener {listener} validates OAUTHBEARER "
                                  f"tokens with the unsecured validator, which does not read it "
                                  f"(set {handler_key} to {OIDC_HANDLERS[0]})")
        return OAuthSettings(listener, unsecured=_unsecured(jaas_key, options))
    if handler not in OIDC_HANDLERS:
        raise ConfigError(f"Invalid value {handler} for configuration {handler_key}: kbroker "
                          f"validates OAUTHBEARER tokens with {UNSECURED_HANDLER} or "
                          f"{OIDC_HANDLERS[0]}")
    if options:
        raise ConfigError(f"{jaas_key}: {next(iter(options))} is read by the unsecured validator "
                          f"only; listener {listener} uses {handler}")
    return OAuthSettings(listener, oidc=_oidc(get, named))


def _unsecured(jaas_key: str, options: Mapping[str, str]) -> UnsecuredSettings:
    skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip()
    try:
        skew = int(skew_text)
    except ValueError:
        skew = -1
    if skew < 0:
        raise ConfigError(f"{jaas_key}: unsecuredValidatorAllowableClockSkewMs must be a "
                          f"non-negative integer: {skew_text}")
    principal = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub"
    scope = options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope"
    required = tuple(options.get("unsecuredValidatorRequiredScope", "").split())
    return UnsecuredSettings(principal, scope, required, skew)


def _oidc(get: Callable[[str], Any], named: Callable[[str], str]) -> OidcSettings:
    url_key = named("sasl.oauthbearer.jwks.endpoint.url")
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError(f"{url_key}: the OIDC validator needs the JWKS endpoint URL "
                          "(https, http or file) the keys that sign tokens are read from")
    scheme = urlparse(url).scheme.lower()
    if scheme not in ("https", "http", "file"):
        raise ConfigError(f"Invalid value {url} for configuration {url_key}: the URL must be "
                          "https, http or file")
    if scheme == "file" and not urlparse(url).path:
        raise ConfigError(f"Invalid value {url} for configuration {url_key}: no file path")
    backoff, backoff_max = (get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
                            get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"))
    if backoff > backoff_max:
        raise ConfigError(f"{named('sasl.oauthbearer.jwks.endpoint.retry.backoff.ms')} "
                          f"({backoff}) must not exceed "
                          f"{named('sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms')} "
                          f"({backoff_max})")
    issuer = get("sasl.oauthbearer.expected.issuer")
    return OidcSettings(
        jwks_url=url, refresh_ms=get("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
        retry_backoff_ms=backoff, retry_backoff_max_ms=backoff_max,
        clock_skew_s=get("sasl.oauthbearer.clock.skew.seconds"),
        expected_audience=tuple(get("sasl.oauthbearer.expected.audience") or ()),
        expected_issuer=issuer or None, scope_claim=get("sasl.oauthbearer.scope.claim.name"),
        sub_claim=get("sasl.oauthbearer.sub.claim.name"), key=url_key)


def check_unprefixed_oidc_keys(props: Mapping[str, str],
                               settings: Mapping[str, OAuthSettings | None]) -> None:
    """An unprefixed OIDC key is read by every listener whose validator is the OIDC one:
    refused when there is none."""
    if any(s is not None and s.oidc is not None for s in settings.values()):
        return
    for key in OIDC_KEYS:
        if key in props:
            raise ConfigError(f"{key}: no listener validates OAUTHBEARER tokens with the OIDC "
                              f"validator ({OIDC_HANDLERS[0]}), the one that reads it")
