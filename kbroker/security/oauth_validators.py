"""OAUTHBEARER token validators, as Kafka's callback handlers validate tokens.

UnsecuredValidator (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, development
only): an unsecured JWS (`header.claims.`, header `alg: none`, no signature) whose
claims carry the principal claim (a non-empty string), `exp` (required) and `iat`
(optional) as NumericDates, checked against the clock with the allowed skew (exp after
now - skew, iat before now + skew, exp after iat), and the required scope (all of it in
the token's scope claim, a string or a list: else insufficient_scope).

JwtValidator (Kafka's OAuthBearerValidatorCallbackHandler / BrokerJwtValidator, KIP-768):
a JWS signed with an asymmetric algorithm (RS*, PS*, ES*, EdDSA; never none or HMAC) by
a key of the JWKS (kbroker.security.jwks), chosen by the token's `kid`; signature and
aud / iss through PyJWT; `exp` and `iat` required, exp and nbf checked against the clock
with sasl.oauthbearer.clock.skew.seconds; the sub claim (sasl.oauthbearer.sub.claim.name)
a non-empty string. An unknown kid asks the JWKS for an early refresh (off the loop).

Both raise TokenInvalid (the reason is logged, never sent: the client gets RFC 7628's
JSON status). They hold no state of their own but the clock; called on the loop thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from kbroker.security.oauth_settings import OidcSettings, UnsecuredSettings
from kbroker.security.oauthbearer import OAuthToken, TokenInvalid

log = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                         "ES256", "ES384", "ES512", "EdDSA")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _b64_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError) as e:  # RecursionError: deep nesting
        raise TokenInvalid(f"the token's {what} is not Base64URL-encoded JSON: {e}") from None
    if not isinstance(value, dict):
        raise TokenInvalid(f"the token's {what} is not a JSON object")
    return value


def _numeric_date_ms(claims: Mapping[str, Any], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenInvalid(f"the required claim {name} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TokenInvalid(f"the claim {name} is not a number: {str(value)[:32]}")
    return int(value * 1000)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise TokenInvalid(f"the scope claim {name} is neither a string nor a list of strings")


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenInvalid(f"the principal claim {name} is missing or not a non-empty string")
    return value.strip()


class UnsecuredValidator:
    def __init__(self, settings: UnsecuredSettings,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.settings = settings
        self.now_ms = clock

    def validate(self, token: str) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise TokenInvalid("an unsecured JWS has 3 dot-separated Base64URL parts, the "
                               "last one empty")
        header = _b64_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenInvalid("an unsecured JWS must have 'none' for 'alg'")
        claims = _b64_json(parts[1], "claims")
        s = self.settings
        principal = _principal(claims, s.principal_claim)
        exp = _numeric_date_ms(claims, "exp", True)
        assert exp is not None
        iat = _numeric_date_ms(claims, "iat", False)
        scope = _scope(claims, s.scope_claim)
        now = self.now_ms()
        if iat is not None and iat > now + s.clock_skew_ms:
            raise TokenInvalid(f"the Issued At value ({iat} ms) was after the indicated time "
                               f"({now} ms) plus allowable clock skew ({s.clock_skew_ms} ms)")
        if now > exp + s.clock_skew_ms:
            raise TokenInvalid(f"the indicated time ({now} ms) minus allowable clock skew "
                               f"({s.clock_skew_ms} ms) was after the Expiration Time ({exp} ms)")
        if iat is not None and exp <= iat:
            raise TokenInvalid(f"the Expiration Time ({exp} ms) was not after the Issued At "
                               f"time ({iat} ms)")
        for required in s.required_scope:
            if required not in scope:
                raise TokenInvalid(f"the provided scope ({sorted(scope)}) was missing a required "
                                   f"scope ({required})", status="insufficient_scope",
                                   scope=str(list(s.required_scope)))
        return OAuthToken(token, principal, exp, iat, scope)


class JwtValidator:
    """`keys` gives the JWKS' current keys by kid (kbroker.security.jwks.JwksSource)."""

    def __init__(self, settings: OidcSettings, keys: Any,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.settings = settings
        self._keys = keys
        self.now_ms = clock

    def validate(self, token: str) -> OAuthToken:
        import jwt

        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError) as e:
            raise TokenInvalid(f"not a JWS: {e}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise TokenInvalid(f"the token's alg {str(alg)[:16]!r} is not an asymmetric "
                               "signature algorithm")
        key = self._keys.key_for(kid if isinstance(kid, str) else None, alg)
        if key is None:
            raise TokenInvalid(f"no key of the JWKS verifies kid {str(kid)[:64]!r} alg {alg}")
        try:
            claims = jwt.decode(
                token, key=key, algorithms=[alg],
                audience=list(s.expected_audience) or None, issuer=s.expected_issuer,
                options={"require": ["exp", "iat"], "verify_exp": False, "verify_nbf": False,
                         "verify_iat": False})
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError) as e:
            raise TokenInvalid(f"the JWT does not validate: {e}") from None
        exp = _numeric_date_ms(claims, "exp", True)
        assert exp is not None
        iat = _numeric_date_ms(claims, "iat", True)
        nbf = _numeric_date_ms(claims, "nbf", False)
        now, skew = self.now_ms(), s.clock_skew_s * 1000
        if now >= exp + skew:
            raise TokenInvalid(f"the JWT expired at {exp} ms (now {now} ms, skew {skew} ms)")
        if nbf is not None and now + skew < nbf:
            raise TokenInvalid(f"the JWT is not valid before {nbf} ms (now {now} ms)")
        return OAuthToken(token, _principal(claims, s.sub_claim), exp, iat,
                          _scope(claims, s.scope_claim))


class OAuthValidators:
    """Every OAUTHBEARER listener's validator, by listener name. `start()` reads the OIDC
    listeners' JWKS (blocking: run it off the loop, before serving); `close()` stops
    their refreshers. Built and closed by the broker; `get` from the loop thread."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        from kbroker.security.jwks import JwksSource

        self._validators: dict[str, UnsecuredValidator | JwtValidator] = {}
        self._sources: list[JwksSource] = []
        for name, oauth in settings.items():
            if oauth is None:
                continue
            if oauth.oidc is not None:
                source = JwksSource(oauth.oidc)
                self._sources.append(source)
                self._validators[name] = JwtValidator(oauth.oidc, source)
            else:
                self._validators[name] = UnsecuredValidator(oauth.unsecured)

    def start(self) -> None:
        for source in self._sources:
            source.start()

    def get(self, listener: str) -> UnsecuredValidator | JwtValidator | None:
        return self._validators.get(listener)

    def close(self) -> None:
        for source in self._sources:
            source.close()
