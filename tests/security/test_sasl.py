"""The SASL mechanisms on their own: RFC 7677's SCRAM-SHA-256 exchange byte for byte,
Kafka's stored credential form, PLAIN's rules, JAAS parsing, the TLS principal's
RFC 2253 name and mapping rules, and hostile tokens (hypothesis): a mechanism fails
with SaslFailure and nothing else, whatever it is sent."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.common.config_def import ConfigError
from kbroker.security import scram
from kbroker.security.jaas import parse_jaas
from kbroker.security.principal import parse_principal_rules, rfc2253
from kbroker.security.sasl import PlainServer, SaslFailure, ScramSaslServer

RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _rfc_credential() -> scram.ScramCredential:
    salted = scram.salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    return scram.credential_from_salted_password("SCRAM-SHA-256", salted, RFC_SALT, 4096)


def test_rfc7677_scram_sha_256_exchange(monkeypatch) -> None:
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: RFC_SERVER_NONCE)
    server = ScramSaslServer("SCRAM-SHA-256", lambda u, m: _rfc_credential() if u == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def test_rfc7677_scram_sha_256_exchange_client_side(monkeypatch) -> None:
    """ScramClient, what a broker logs in to another with on a SASL inter-broker listener."""
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "rOprNGfwEbeRWgbNEkqO")
    client = scram.ScramClient("SCRAM-SHA-256", "user", "pencil")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    for bad in (b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", b"e=invalid-proof", b"v=!"):
        with pytest.raises(scram.ScramError):
            client.verify(bad)
    for bad_first in (b"r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                      b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1",
                      b"r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=4096",
                      b"garbage"):
        with pytest.raises(scram.ScramError):
            scram.ScramClient("SCRAM-SHA-256", "user", "pencil").final(bad_first)


def test_scram_wrong_proof_and_unknown_user_fail(monkeypatch) -> None:
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: RFC_SERVER_NONCE)
    server = ScramSaslServer("SCRAM-SHA-256", lambda u, m: _rfc_credential())
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=AAAAZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert not server.complete and server.username is None
    with pytest.raises(SaslFailure, match="Authentication failed"):
        ScramSaslServer("SCRAM-SHA-512", lambda u, m: None).evaluate(b"n,,n=nobody,r=abc")


def test_credentials_round_trip_kafkas_string_form() -> None:
    cred = scram.new_credential("SCRAM-SHA-512", "secret", 8192)
    text = cred.to_string()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert scram.ScramCredential.from_string(text) == cred
    assert "secret" not in repr(cred) and "salt" not in repr(cred)


def test_plain_rules() -> None:
    users = {"alice": "alice-secret"}
    assert PlainServer(users).evaluate(b"\0alice\0alice-secret") == b""
    assert PlainServer(users).evaluate(b"alice\0alice\0alice-secret") == b""
    for token, reason in ((b"bob\0alice\0alice-secret", "authorization id"),
                          (b"\0alice\0wrong", "Invalid username or password"),
                          (b"\0mallory\0alice-secret", "Invalid username or password"),
                          (b"\0\0x", "username not specified"), (b"\0alice\0", "password"),
                          (b"just-one-token", "expected 3 tokens")):
        with pytest.raises(SaslFailure, match=reason):
            PlainServer(users).evaluate(token)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_plain_fails_cleanly_on_any_token(token: bytes) -> None:
    server = PlainServer({"alice": "alice-secret"})
    try:
        server.evaluate(token)
    except SaslFailure:
        assert not server.complete


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_scram_fails_cleanly_on_any_messages(first: bytes, final: bytes) -> None:
    server = ScramSaslServer("SCRAM-SHA-256", lambda u, m: _rfc_credential())
    try:
        server.evaluate(first)
        server.evaluate(final)
    except SaslFailure:
        assert not server.complete


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="nr=,acpv tokenauth-_/+=", max_size=80),
       st.text(alphabet="nr=,acpv biws0123456789/+=", max_size=120))
def test_scram_fails_cleanly_on_near_valid_messages(first: str, final: str) -> None:
    server = ScramSaslServer("SCRAM-SHA-512", lambda u, m: scram.new_credential(m, "pw", 4096))
    try:
        server.evaluate(("n,," + first).encode())
        server.evaluate(final.encode())
    except SaslFailure:
        assert not server.complete


def test_jaas_parsing() -> None:
    module = parse_jaas("k", 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="a\\"b;c" user_x=plain;')
    assert module.options == {"username": "admin", "password": 'a"b;c', "user_x": "plain"}
    assert "a\"b" not in repr(module)
    for bad in ("Module required", "Module sometimes a=b;", "M required a=b; N required;",
                'M required a="unterminated;'):
        with pytest.raises(ConfigError, match="k") as e:
            parse_jaas("k", bad)
        assert "a=b" not in str(e.value)


def test_tls_principal_name_and_rules() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
               (("organizationalUnitName", "eng"),), (("commonName", "alice"),))
    dn = rfc2253(subject)
    assert dn == "CN=alice,OU=eng,O=Acme\\, Inc,C=US"
    rules = parse_principal_rules("k", "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U, DEFAULT")
    assert rules.map(dn) == "ALICE@ENG"
    assert rules.map("CN=bob") == "CN=bob"  # DEFAULT
    assert parse_principal_rules("k", "RULE:^CN=(.*)$/$1/L").map("O=x") is None
    with pytest.raises(ConfigError, match="k"):
        parse_principal_rules("k", "RULE:bad")
