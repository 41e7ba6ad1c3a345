"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka stores and checks them.

A credential is what the server keeps of a password: a random salt, the iteration
count, StoredKey = H(ClientKey) and ServerKey, where

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Kafka's stored form (ScramCredentialUtils), also the value under ZooKeeper's
/config/users/<user> for each mechanism:

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

The exchange (the server's side is ScramServer):

    client-first  n,[a=<authzid>],n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 gs2 header>,r=<nonce>,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>        (or e=<error>)

ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage); the server recovers
ClientKey and compares H(ClientKey) with StoredKey in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

# mechanism -> (hashlib name, Kafka's ScramMechanism type id for the ScramCredential APIs)
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_TYPE = {t: name for name, (_h, t) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations (AlterUserScramCredentials)


class ScramError(Exception):
    """The exchange failed; the message is what the client may be told."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"

    def to_string(self) -> str:
        b64 = _b64
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def credential_from_salted_password(mechanism: str, salted_password: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials carries (the client salts and hashes)."""
    h = MECHANISMS[mechanism][0]
    client_key = _hmac(h, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           _hmac(h, salted_password, b"Server Key"), iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)


def new_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = secrets.token_bytes(32)
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ScramError("Invalid SCRAM message")
        out[item[0]] = item[2:]
    return out


def _username(escaped: str) -> str:
    if "=" in escaped.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username")
    return escaped.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange, server side: `evaluate` each client message in turn;
    `lookup(user)` gives the user's credential for this mechanism, or None."""

    def __init__(self, mechanism: str, lookup: object) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._lookup = lookup
        self._step = 0
        self.username: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message") from None
        if self._step == 0:
            self._step = 1
            return self._first(text)
        if self._step == 1:
            self._step = 2
            return self._final(text)
        raise ScramError("SCRAM exchange already complete")

    def _first(self, text: str) -> bytes:
        gs2, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or gs2 not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise ScramError("Invalid SCRAM client first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not bare.startswith("n="):
            raise ScramError("Invalid SCRAM client first message")
        username = _username(attrs["n"])
        if authzid and _username(authzid[2:]) != username:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        if attrs.get("t") is not None or "tokenauth" in bare:
            raise ScramError("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(username)  # type: ignore[operator]
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.username, self._credential = username, credential
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        self._gs2 = f"{gs2},{authzid},"
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message")
        attrs = _attributes(without_proof)
        # Kafka's check is endsWith: librdkafka before 2.1 sends its own nonce again in
        # front of the combined one, and Kafka accepts that
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message") from None
        if channel != self._gs2.encode():
            raise ScramError("Invalid channel binding in the final client message.")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred: ScramCredential = self._credential
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise ScramError("Invalid client credentials")
        self.complete = True
        return f"v={_b64(_hmac(self._hash, cred.server_key, auth_message))}".encode()


class ScramClient:
    """One SCRAM exchange, client side (a broker logging in to another on a SASL
    inter-broker listener): first(), then final(server-first), then verify(server-final)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={secrets.token_urlsafe(24)}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = _attributes(text)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self._client_first_bare.partition(",r=")[2]) or not salt \
                or not iterations.isdigit():
            raise ScramError("Invalid SCRAM server first message")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramError(f"Invalid SCRAM iteration count {iterations}")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM server first message") from None
        salted = salted_password(self.mechanism, self._password, salt_bytes, int(iterations))
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        signature = _hmac(self._hash, hashlib.new(self._hash, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"),
                                       auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise ScramError(f"SCRAM authentication failed: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM server final message") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("Invalid SCRAM server signature")
