"""SASL/OAUTHBEARER on its own: RFC 7628's client initial response (Kafka's grammar; hostile
inputs fail with SaslFailure, never anything else), the error challenge and its \\x01
acknowledgement, the unsecured and OIDC validators against a fake clock (keys made with
cryptography, signed with PyJWT), and the OAUTHBEARER settings refused at startup."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.config import BrokerConfig, ConfigError
from kbroker.security.jwks import JwksSource, parse_jwks
from kbroker.security.oauth_settings import OidcSettings, UnsecuredSettings
from kbroker.security.oauth_validators import JwtValidator, UnsecuredValidator
from kbroker.security.oauthbearer import (
    GENERIC_FAILURE,
    InitialResponseError,
    TokenInvalid,
    parse_initial_response,
)
from kbroker.security.sasl import OAuthBearerSaslServer, SaslFailure
from kbroker.server.authenticator import _session_lifetime_ms

NOW_MS = 1_800_000_000_000


class Clock:
    def __init__(self, ms: int = NOW_MS) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


def initial(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


# -- the initial response


def test_initial_response_as_kafka_and_librdkafka_send_it() -> None:
    r = parse_initial_response(b"n,,\x01auth=Bearer abc.def.\x01\x01")
    assert (r.token, r.authorization_id, r.extensions) == ("abc.def.", "", {})
    r = parse_initial_response(b"n,a=alice,\x01auth=bearer t0k-_.~+/==\x01traceId=x y=z\x01\x01")
    assert (r.token, r.authorization_id, r.extensions) == ("t0k-_.~+/==", "alice",
                                                           {"traceId": "x y=z"})


@pytest.mark.parametrize("data, reason", [
    (b"", "client first message"),
    (b"n,,\x01\x01", "'auth' not specified"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme"),
    (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
    (b"n,,\x01auth=Bearer a b\x01\x01", "invalid 'auth' format"),
    (b"n,,\x01auth=Bearer abc\x01", "client first message"),  # no final \x01
    (b"y,,\x01auth=Bearer abc\x01\x01", "client first message"),
    (b"n,,\x01auth=Bearer abc\x01k1=v\x01\x01", "client first message"),  # key: letters
    (b"n,,\x01auth=Bearer abc\x01k=\xc3\xa9\x01\x01", "client first message"),  # ASCII only
    (b"n,a=a,b,\x01auth=Bearer abc\x01\x01", "client first message"),
])
def test_malformed_initial_responses_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(InitialResponseError, match=reason):
        parse_initial_response(data)
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock()))
    with pytest.raises(SaslFailure, match=GENERIC_FAILURE):
        server.evaluate(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_oauthbearer_fails_cleanly_on_any_response(data: bytes) -> None:
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock()))
    try:
        challenge = server.evaluate(data)
        assert not server.complete and json.loads(challenge)["status"] == "invalid_token"
        server.evaluate(b"\x01")
    except SaslFailure:
        assert not server.complete


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="n,a=\x01authBearer .xyz=", max_size=80))
def test_oauthbearer_fails_cleanly_on_near_valid_responses(text: str) -> None:
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock()))
    try:
        server.evaluate(text.encode())
        server.evaluate(b"\x01")
    except SaslFailure:
        assert not server.complete


# -- the exchange


def test_exchange_completes_as_the_token_principal_with_its_lifetime() -> None:
    clock = Clock()
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), clock))
    token = unsecured({"sub": "alice", "iat": NOW_MS // 1000, "exp": NOW_MS // 1000 + 60})
    assert server.evaluate(initial(token, "alice", tenant="t1")) == b""
    assert server.complete and server.username == "alice"
    assert server.credential_lifetime_ms == 60_000
    with pytest.raises(SaslFailure, match="already complete"):
        server.evaluate(initial(token))


def test_invalid_token_gets_the_json_challenge_then_fails_on_the_ack() -> None:
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock()))
    token = unsecured({"sub": "alice", "exp": NOW_MS // 1000 - 1})
    challenge = server.evaluate(initial(token))
    assert challenge == b'{"status":"invalid_token"}' and not server.complete
    with pytest.raises(SaslFailure, match='^{"status":"invalid_token"}$'):
        server.evaluate(b"\x01")


def test_authzid_must_be_the_principal() -> None:
    server = OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock()))
    token = unsecured({"sub": "alice", "exp": NOW_MS // 1000 + 60})
    with pytest.raises(SaslFailure, match=r"authorization id \(bob\) that is different"):
        server.evaluate(initial(token, "bob"))
    with pytest.raises(SaslFailure, match=GENERIC_FAILURE):  # an ack with no error pending
        OAuthBearerSaslServer(UnsecuredValidator(UnsecuredSettings(), Clock())).evaluate(b"\x01")


def test_session_lifetime_is_the_shorter_of_reauth_and_the_token() -> None:
    assert _session_lifetime_ms(0, None) is None
    assert _session_lifetime_ms(5000, None) == 5000
    assert _session_lifetime_ms(0, 60_000) == 60_000
    assert _session_lifetime_ms(5000, 60_000) == 5000
    assert _session_lifetime_ms(90_000, 60_000) == 60_000
    assert _session_lifetime_ms(5000, -10) == 0


# -- the unsecured validator


def test_unsecured_validator_rules() -> None:
    clock = Clock()
    v = UnsecuredValidator(UnsecuredSettings(clock_skew_ms=1000), clock)
    exp = NOW_MS // 1000 + 10
    t = v.validate(unsecured({"sub": "alice", "exp": exp, "iat": NOW_MS / 1000,
                              "scope": "read write"}))
    assert (t.principal, t.lifetime_ms, t.start_ms, t.scope) == (
        "alice", exp * 1000, NOW_MS, frozenset({"read", "write"}))
    clock.ms = exp * 1000 + 1000  # within the skew
    assert v.validate(unsecured({"sub": "alice", "exp": exp})).principal == "alice"
    clock.ms += 1
    bad = {
        "expired": unsecured({"sub": "alice", "exp": exp}),
        "no exp": unsecured({"sub": "alice"}),
        "exp not a number": unsecured({"sub": "alice", "exp": "soon"}),
        "no sub": unsecured({"exp": exp + 100}),
        "empty sub": unsecured({"sub": " ", "exp": exp + 100}),
        "iat in the future": unsecured({"sub": "a", "iat": exp + 50, "exp": exp + 100}),
        "exp before iat": unsecured({"sub": "a", "iat": exp - 10, "exp": exp - 20 + 100 - 100}),
        "alg not none": unsecured({"sub": "a", "exp": exp + 100}, {"alg": "HS256"}),
        "signed": unsecured({"sub": "a", "exp": exp + 100}) + "c2ln",
        "two parts": _b64({"alg": "none"}) + "." + _b64({"sub": "a"}),
        "not JSON": "bm90.anNvbg.",
        "not base64": "!!!.???.",
        "claims a list": f"{_b64({'alg': 'none'})}.{base64.urlsafe_b64encode(b'[1]').decode()}.",
    }
    for what, token in bad.items():
        with pytest.raises(TokenInvalid) as e:
            v.validate(token)
        assert e.value.status == "invalid_token", what


def test_hostile_claims_are_invalid_tokens_never_crashes() -> None:
    v = UnsecuredValidator(UnsecuredSettings(), Clock())
    deep = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode().rstrip("=")
    raw = (b'{"sub":"a","exp":Infinity}', b'{"sub":"a","exp":NaN}', b'{"sub":"a","exp":1e400}')
    for claims in [f"{_b64({'alg': 'none'})}.{deep}."] + [
            f"{_b64({'alg': 'none'})}.{base64.urlsafe_b64encode(r).decode()}." for r in raw]:
        with pytest.raises(TokenInvalid):
            v.validate(claims)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["aud", "iss", "exp", "iat", "nbf", "sub", "scope"]), JSON_VALUES)
def test_oidc_validator_any_claim_value_is_valid_or_invalid_never_a_crash(
        keys: dict, name: str, value: object) -> None:
    v = _oidc(keys, Clock())
    claims = {"sub": "alice", "aud": "kafka", "iss": "https://issuer.test",
              "iat": NOW_MS // 1000, "exp": NOW_MS // 1000 + 300, name: value}
    try:
        token = jwt.encode(claims, keys["rsa"], algorithm="RS256", headers={"kid": "r1"})
    except (TypeError, ValueError):
        return  # not encodable as JSON
    try:
        v.validate(token)
    except TokenInvalid:
        pass


def test_unsecured_validator_required_scope_and_claim_names() -> None:
    clock = Clock()
    v = UnsecuredValidator(UnsecuredSettings("user", "roles", ("read", "admin"), 0), clock)
    exp = NOW_MS // 1000 + 60
    assert v.validate(unsecured({"user": "carol", "exp": exp,
                                 "roles": ["admin", "read"]})).principal == "carol"
    with pytest.raises(TokenInvalid) as e:
        v.validate(unsecured({"user": "carol", "exp": exp, "roles": "read"}))
    assert e.value.status == "insufficient_scope"
    assert e.value.json() == '{"status":"insufficient_scope", "scope":"[\'read\', \'admin\']"}'
    with pytest.raises(TokenInvalid):
        v.validate(unsecured({"sub": "carol", "exp": exp, "roles": ["read", "admin"]}))


# -- the OIDC validator


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = {"keys": [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())), "kid": "r1",
         "use": "sig"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())), "kid": "e1",
         "alg": "ES256"},
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},  # symmetric: never used
    ]}
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(jwks))
    return {"rsa": rsa_key, "ec": ec_key, "other": other, "path": path}


def _oidc(keys: dict, clock: Clock, **overrides: object) -> JwtValidator:
    s = OidcSettings(jwks_url=keys["path"].as_uri(), expected_audience=("kafka",),
                     expected_issuer="https://issuer.test", **overrides)  # type: ignore[arg-type]
    source = JwksSource(s)
    source.start()
    source.close()
    return JwtValidator(s, source, clock)


def _signed(key: object, kid: str | None, alg: str = "RS256", **claims: object) -> str:
    base = {"sub": "alice", "aud": "kafka", "iss": "https://issuer.test",
            "iat": NOW_MS // 1000, "exp": NOW_MS // 1000 + 300}
    base.update(claims)
    payload = {k: v for k, v in base.items() if v is not None}
    return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid} if kid else None)


def test_oidc_validator_accepts_signed_tokens(keys: dict) -> None:
    clock = Clock()
    v = _oidc(keys, clock)
    t = v.validate(_signed(keys["rsa"], "r1", scope="a b"))
    assert (t.principal, t.lifetime_ms, t.scope) == ("alice", NOW_MS + 300_000,
                                                     frozenset({"a", "b"}))
    assert v.validate(_signed(keys["rsa"], "r1", "PS256")).principal == "alice"
    assert v.validate(_signed(keys["ec"], "e1", "ES256")).principal == "alice"
    assert v.validate(_signed(keys["rsa"], None, aud=["x", "kafka"])).principal == "alice"
    clock.ms = NOW_MS + 300_000 + 29_999  # within the 30 s skew
    assert v.validate(_signed(keys["rsa"], "r1")).principal == "alice"
    v = _oidc(keys, Clock(), sub_claim="email", scope_claim="scp")
    t = v.validate(_signed(keys["rsa"], "r1", email="a@x", scp=["s"]))
    assert (t.principal, t.scope) == ("a@x", frozenset({"s"}))


def test_oidc_validator_refuses(keys: dict) -> None:
    clock = Clock()
    v = _oidc(keys, clock)
    good = _signed(keys["rsa"], "r1")
    head, body, sig = good.split(".")
    tampered = _b64({"sub": "mallory", "aud": "kafka", "iss": "https://issuer.test",
                     "iat": 1, "exp": NOW_MS // 1000 + 300})
    bad = {
        "wrong audience": _signed(keys["rsa"], "r1", aud="other"),
        "no audience": _signed(keys["rsa"], "r1", aud=None),
        "wrong issuer": _signed(keys["rsa"], "r1", iss="https://evil.test"),
        "bad signature": _signed(keys["other"], "r1"),
        "tampered claims": f"{head}.{tampered}.{sig}",
        "unknown kid": _signed(keys["rsa"], "r9"),
        "EC key for RSA alg": _signed(keys["rsa"], "e1"),
        "expired": _signed(keys["rsa"], "r1", exp=NOW_MS // 1000 - 30),
        "no iat": _signed(keys["rsa"], "r1", iat=None),
        "no exp": _signed(keys["rsa"], "r1", exp=None),
        "not yet valid": _signed(keys["rsa"], "r1", nbf=NOW_MS // 1000 + 31),
        "no sub": _signed(keys["rsa"], "r1", sub=None),
        "HMAC": jwt.encode({"sub": "a", "exp": 2 ** 40, "iat": 1, "aud": "kafka"},
                           "secret-secret-secret-secret-secret", algorithm="HS256",
                           headers={"kid": "hmac"}),
        "alg none": unsecured({"sub": "a", "exp": 2 ** 40, "iat": 1, "aud": "kafka"}),
        "garbage": "a.b.c",
    }
    for what, token in bad.items():
        with pytest.raises(TokenInvalid) as e:
            v.validate(token)
        assert e.value.json() == '{"status":"invalid_token"}', what


def test_jwks_documents(keys: dict) -> None:
    parsed = parse_jwks(keys["path"].read_bytes())
    assert set(parsed) == {"r1", "e1"}
    for doc in (b"[]", b'{"keys": 1}', b'{"keys": [{"kty": "oct", "k": "eA"}]}', b"nope"):
        with pytest.raises(ValueError):
            parse_jwks(doc)


def test_an_unreadable_jwks_stops_the_start(tmp_path) -> None:
    s = OidcSettings(jwks_url=(tmp_path / "missing.json").as_uri(), retry_backoff_ms=1,
                     retry_backoff_max_ms=4)
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url: cannot read"):
        JwksSource(s).start()


# -- settings


BASE = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER"}
JAAS_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
HANDLER_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
OIDC = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_settings_choose_the_validator(tmp_path) -> None:
    oauth = BrokerConfig.from_props(BASE).listener_security["SASL_PLAINTEXT"].oauth
    assert oauth is not None and oauth.unsecured == UnsecuredSettings()
    oauth = BrokerConfig.from_props({**BASE, JAAS_KEY: (
        f'{MODULE} required unsecuredValidatorRequiredScope="a b" '
        'unsecuredValidatorAllowableClockSkewMs="500";')}).listener_security["SASL_PLAINTEXT"].oauth
    assert oauth is not None and oauth.unsecured == UnsecuredSettings("sub", "scope", ("a", "b"), 500)
    oauth = BrokerConfig.from_props({
        **BASE, HANDLER_KEY: OIDC, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
        "sasl.oauthbearer.expected.audience": "kafka,other",
        "listener.name.sasl_plaintext.sasl.oauthbearer.clock.skew.seconds": "5",
    }).listener_security["SASL_PLAINTEXT"].oauth
    assert oauth is not None and oauth.oidc is not None
    assert (oauth.oidc.jwks_url, oauth.oidc.expected_audience, oauth.oidc.clock_skew_s) == (
        "https://idp/jwks", ("kafka", "other"), 5)


@pytest.mark.parametrize("extra, key", [
    ({HANDLER_KEY: "com.example.MyHandler"}, HANDLER_KEY),
    ({HANDLER_KEY: OIDC}, "sasl.oauthbearer.jwks.endpoint.url"),
    ({HANDLER_KEY: OIDC, "sasl.oauthbearer.jwks.endpoint.url": "ftp://x/j"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({"sasl.oauthbearer.expected.issuer": "x"}, "sasl.oauthbearer.expected.issuer"),
    ({"listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer": "x"},
     "listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer"),
    ({JAAS_KEY: f'{MODULE} required unsecuredLoginStringClaim_sub="admin";'}, JAAS_KEY),
    ({JAAS_KEY: f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="-1";'}, JAAS_KEY),
    ({JAAS_KEY: f'{MODULE} required someOption="x";'}, JAAS_KEY),
    ({JAAS_KEY: 'org.apache.kafka.common.security.plain.PlainLoginModule required;'}, JAAS_KEY),
    ({HANDLER_KEY: OIDC, "sasl.oauthbearer.jwks.endpoint.url": "https://x/j",
      JAAS_KEY: f'{MODULE} required unsecuredValidatorRequiredScope="a";'}, JAAS_KEY),
    ({"sasl.oauthbearer.token.endpoint.url": "https://x/t"}, "sasl.oauthbearer.token.endpoint.url"),
    ({"sasl.server.callback.handler.class": OIDC}, "sasl.server.callback.handler.class"),
    ({"sasl.enabled.mechanisms": "PLAIN", HANDLER_KEY: OIDC,
      "listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
     HANDLER_KEY),
])
def test_settings_refused_naming_the_key(extra: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.from_props({**BASE, **extra})


def test_inter_broker_oauthbearer_is_refused_in_cluster_mode() -> None:
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        BrokerConfig.from_props({**BASE, "zookeeper.connect": "127.0.0.1:2181",
                                 "inter.broker.listener.name": "SASL_PLAINTEXT",
                                 "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
