"""An SSLContext for an SSL or SASL_SSL listener, from its PEM stores (Python's ssl, OpenSSL);
and one for a client of such a listener (`client_context`, the Spark source and sink).

    ssl.keystore.location          PEM: private key (encrypted with ssl.key.password or not)
                                   and the certificate chain, the server's first
    ssl.keystore.key / .certificate.chain   the same, inline
    ssl.truststore.location / .certificates  CA certificates (client certificates)
    ssl.client.auth                required: CERT_REQUIRED, requested: CERT_OPTIONAL, none
    ssl.enabled.protocols          the lowest and highest of them bound the version
    ssl.cipher.suites              TLS 1.2 suites, IANA (Java) or OpenSSL names

A store that cannot be read, a key that does not decrypt or a suite OpenSSL does not
know raises ConfigError naming the key (and the listener's prefix when it came from one).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile

from kbroker.common.config_def import ConfigError
from kbroker.security.settings import SslSettings

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                "none": ssl.CERT_NONE}


def server_context(s: SslSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, s)
    _configure(ctx, s)
    ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
    return ctx


def client_context(s: SslSettings, check_hostname: bool) -> ssl.SSLContext:
    """A client's context: the broker's certificate checked against the trust store (the
    system's CAs when none is given) and, with `check_hostname` (Kafka's
    ssl.endpoint.identification.algorithm=https), its name; the key store, when given,
    is the client's certificate for mutual TLS. `s.client_auth` is not used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if s.keystore_location is not None or s.keystore_key is not None:
        _load_keystore(ctx, s)
    if s.truststore_location is None and s.truststore_certificates is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _configure(ctx, s)
    return ctx


def _configure(ctx: ssl.SSLContext, s: SslSettings) -> None:
    """Both sides: the TLS versions, the trust store, the cipher suites."""
    versions = sorted(_VERSIONS[v] for v in s.enabled_protocols)
    if not versions:
        raise ConfigError(f"{s.prefix}ssl.enabled.protocols: no TLS version enabled")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    try:
        if s.truststore_location is not None:
            ctx.load_verify_locations(cafile=s.truststore_location)
        elif s.truststore_certificates is not None:
            ctx.load_verify_locations(cadata=s.truststore_certificates)
    except (OSError, ssl.SSLError) as e:
        key = "ssl.truststore.location" if s.truststore_location else "ssl.truststore.certificates"
        raise ConfigError(f"{s.prefix}{key}: cannot load the trust store: {_reason(e)}") from None
    if s.cipher_suites:
        ctx.set_ciphers(":".join(_openssl_cipher(ctx, s.prefix, name) for name in s.cipher_suites))
    ctx.options |= ssl.OP_NO_COMPRESSION


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> None:
    password = s.key_password
    try:
        if s.keystore_location is not None:
            ctx.load_cert_chain(s.keystore_location, s.keystore_location, password=password)
            return
        assert s.keystore_key is not None and s.keystore_certificate_chain is not None
        # load_cert_chain reads files: a private directory, removed at once
        with tempfile.TemporaryDirectory(prefix="kbroker-tls-") as d:
            path = os.path.join(d, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(s.keystore_key.strip() + "\n" + s.keystore_certificate_chain.strip() + "\n")
            ctx.load_cert_chain(path, path, password=password)
    except (OSError, ssl.SSLError, ValueError) as e:
        key = "ssl.keystore.location" if s.keystore_location else "ssl.keystore.key"
        hint = " (or ssl.key.password does not decrypt the key)" if isinstance(e, ssl.SSLError) else ""
        raise ConfigError(f"{s.prefix}{key}: cannot load the key store{hint}: {_reason(e)}") from None


_AES = re.compile(r"AES_(\d+)_(GCM|CBC|CCM)_?(\w*)")


def _openssl_cipher(ctx: ssl.SSLContext, prefix: str, name: str) -> str:
    known = {c["name"]: c for c in ctx.get_ciphers()}
    if name in known and known[name]["protocol"] != "TLSv1.3":
        return name
    if name.startswith("TLS_") and "_WITH_" in name:
        kx, bulk = name[4:].split("_WITH_", 1)
        kx_part = "" if kx == "RSA" else kx.replace("_", "-")
        if bulk.startswith("CHACHA20_POLY1305"):
            bulk_part = "CHACHA20-POLY1305"
        else:
            m = _AES.fullmatch(bulk)
            if m is None:
                bulk_part = ""
            elif m.group(2) == "GCM":
                bulk_part = f"AES{m.group(1)}-GCM-{m.group(3)}"
            else:
                bulk_part = f"AES{m.group(1)}-{m.group(3)}" if m.group(2) == "CBC" else ""
        candidate = "-".join(p for p in (kx_part, bulk_part) if p)
        if bulk_part and candidate in known:
            return candidate
    if name in known or name.startswith(("TLS_AES_", "TLS_CHACHA20_")):
        raise ConfigError(f"Invalid value {name} for configuration {prefix}ssl.cipher.suites: "
                          "TLS 1.3 suites cannot be restricted through Python's ssl (list "
                          "TLS 1.2 suites only)")
    raise ConfigError(f"Invalid value {name} for configuration {prefix}ssl.cipher.suites: not "
                      "a cipher suite this OpenSSL offers")
