"""TlsChannel over a real TLS 1.2 and 1.3 session (a client SSLObject, certificates from
`openssl`): every byte the client writes comes out of read_into, whatever the pieces the
ciphertext arrives in (records split anywhere, several in one piece, the client's first
data in the same piece as the end of its handshake), and read_into answers 0, never
raises, when no whole record is there."""

from __future__ import annotations

import random
import ssl
from pathlib import Path

import pytest

from kbroker.server.tls_transport import TlsChannel

from .tls_support import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server_context(pki: Pki, version: ssl.TLSVersion) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.keystore("server"))
    ctx.maximum_version = version
    return ctx


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_every_byte_comes_out_whatever_the_pieces(pki: Pki, version: ssl.TLSVersion,
                                                  tmp_path: Path) -> None:
    rnd = random.Random(version.value)
    server = TlsChannel(_server_context(pki, version))
    cctx = ssl.create_default_context(cafile=str(pki.ca))
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = cctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    sent = bytearray()
    received = bytearray()
    buf = memoryview(bytearray(1 << 16))

    def to_server(pieces: bool) -> None:
        data = c_out.read()
        pos = 0
        while pos < len(data):
            step = rnd.choice([1, 7, rnd.randint(1, 70000)]) if pieces else len(data)
            chunk = memoryview(data[pos : pos + step])
            server.incoming.write(chunk)
            pos += len(chunk)
            if not server.handshaken:
                if server.handshake():
                    c_in.write(server.outgoing.read())
            while (got := server.read_into(buf)) > 0:
                received.extend(buf[:got])
            assert got == 0

    for _ in range(10):  # the handshake, both ways
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            pass
        to_server(pieces=False)
        c_in.write(server.outgoing.read())
    # the client's first data shares a receive with the end of its handshake (TLS 1.3:
    # its Finished), as a client's first request may
    first = b"first request"
    client.write(first)
    sent.extend(first)
    to_server(pieces=False)
    assert server.handshaken and received == sent
    for _ in range(60):
        data = rnd.randbytes(rnd.choice([1, 100, 16384, 16385, rnd.randint(1, 300_000)]))
        client.write(data)
        sent.extend(data)
        to_server(pieces=True)
        assert received == sent  # nothing held back once its record is whole
