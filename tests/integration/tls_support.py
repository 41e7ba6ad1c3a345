"""Certificates for TLS tests, made with the `openssl` command line in a temporary directory.

`make_pki(dir)` writes a CA, a server certificate for 127.0.0.1/localhost signed by it,
client certificates (CN=alice, CN=bob), an expired client certificate and one from
another CA nobody trusts; each as a PEM key (unencrypted, plus one encrypted with
`key-secret`), a certificate, and a keystore (key + chain in one file, as
ssl.keystore.location takes it).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY_PASSWORD = "key-secret"


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass
class Pki:
    dir: Path
    ca: Path  # the CA certificate (truststore)

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def keystore(self, name: str) -> Path:
        return self.dir / f"{name}.keystore.pem"

    def encrypted_keystore(self, name: str) -> Path:
        return self.dir / f"{name}.enc.keystore.pem"


def _ca(d: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.crt", "-days", "30", "-subj", f"/O=kbroker tests/CN={name}", cwd=d)


def _signed(d: Path, name: str, subject: str, ca: str, days: str = "30",
            san: str | None = None, expired: bool = False) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
         "-subj", subject, cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-extfile", ext.name]
    args += ["-days", "-1" if expired else days]  # -1: it ended a day before it began
    _run(*args, cwd=d)
    key, cert = (d / f"{name}.key").read_text(), (d / f"{name}.crt").read_text()
    (d / f"{name}.keystore.pem").write_text(key + cert)
    _run("pkcs8", "-topk8", "-in", f"{name}.key", "-out", f"{name}.enc.key", "-passout",
         f"pass:{KEY_PASSWORD}", "-v2", "aes-256-cbc", cwd=d)
    (d / f"{name}.enc.keystore.pem").write_text((d / f"{name}.enc.key").read_text() + cert)


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "rogue-ca")
    _signed(d, "server", "/O=kbroker tests/CN=localhost", "ca",
            san="DNS:localhost,IP:127.0.0.1")
    _signed(d, "alice", "/C=US/O=kbroker tests/OU=eng/CN=alice", "ca")
    _signed(d, "bob", "/O=kbroker tests/CN=bob", "ca")
    _signed(d, "expired", "/O=kbroker tests/CN=expired", "ca", expired=True)
    _signed(d, "rogue", "/O=kbroker tests/CN=rogue", "rogue-ca")
    return Pki(d, d / "ca.crt")
