"""Session resumption with ``openssl s_client``, and the master secret checked against OpenSSL.

* ``s_client -sess_out`` saves the session of a first handshake with our
  server; ``-sess_in`` offers it again and s_client prints ``Reused``.
* Extended master secret (RFC 7627): our ServerConnection and ClientConnection
  run a handshake in memory with pyOpenSSL (memory BIOs, no sockets) and the
  master secrets of both sides must be identical -- with EMS offered and with
  EMS switched off on the client side.  A mismatch would make the Finished
  check fail anyway; comparing the secrets themselves tells *which* side
  derived a wrong value.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from OpenSSL import SSL

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import openssl_ciphers, require_tool, suite_id, wait_for_record
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.certs import Credentials
from tls12.events import ApplicationData, HandshakeComplete
from tls12.suites import SUITES, CipherSuite
from tls12.testing import pipe

pytestmark = pytest.mark.interop

OP_NO_EXTENDED_MASTER_SECRET = 0x1
"""``SSL_OP_NO_EXTENDED_MASTER_SECRET`` of OpenSSL >= 3.0 (not exported by pyOpenSSL)."""

RESUME_SUITES = [
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_RSA_WITH_NULL_SHA,
]
EMS_SUITES = [
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_RSA_WITH_NULL_SHA256,
]


def _s_client_handshake(port: int, suite: CipherSuite, *session_args: str) -> str:
    cmd = [require_tool("openssl"), "s_client", "-connect", f"127.0.0.1:{port}", "-cipher", openssl_ciphers(suite), *session_args]
    proc = subprocess.run(cmd, input=b"", capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return proc.stdout.decode(errors="replace")


@pytest.mark.parametrize("suite", RESUME_SUITES, ids=suite_id)
def test_s_client_resumes_session_with_our_server(https_server: BackgroundServer, tmp_path: Path, suite: CipherSuite) -> None:
    sess = tmp_path / "session.pem"
    before = https_server.wait_idle()
    first = _s_client_handshake(https_server.port, suite, "-sess_out", str(sess))
    # OpenSSL 3.0 prints the cipher's SSL/TLS generation ("SSLv3") in this line
    name = SUITES[suite].openssl_name
    assert re.search(rf"^New, \S+, Cipher is {re.escape(name)}$", first, re.M), first
    assert re.search(r"Protocol\s*: TLSv1\.2", first), first
    assert sess.stat().st_size > 0
    assert not wait_for_record(https_server, before).resumed
    second = _s_client_handshake(https_server.port, suite, "-sess_in", str(sess))
    assert re.search(rf"^Reused, \S+, Cipher is {re.escape(name)}$", second, re.M), second
    assert wait_for_record(https_server, before + 1).resumed


# -- pyOpenSSL in memory --------------------------------------------------------------


def _pyopenssl_context(suite: CipherSuite, ems: bool, credentials: Credentials | None = None) -> SSL.Context:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_cipher_list(openssl_ciphers(suite).encode())
    if not ems:
        ctx.set_options(OP_NO_EXTENDED_MASTER_SECRET)
    if credentials is not None:
        ctx.use_certificate(credentials.chain[0])
        ctx.use_privatekey(credentials.private_key)
    return ctx


class _PyOpenSSLPeer:
    """pyOpenSSL behind memory BIOs, in the sans-IO shape :func:`tls12.testing.pipe` moves bytes for.

    Each call drives OpenSSL's handshake one step: bytes from our side go into its read BIO,
    what it wrote comes out of its write BIO.  A wrapper around the *peer*, not the code under
    test.
    """

    def __init__(self, conn: SSL.Connection) -> None:
        self.conn = conn

    def _step(self) -> None:
        try:
            self.conn.do_handshake()
        except SSL.WantReadError:
            pass

    def receive_data(self, data: bytes) -> list[object]:
        self.conn.bio_write(data)
        self._step()
        return []

    def data_to_send(self) -> bytes:
        self._step()
        try:
            return self.conn.bio_read(1 << 20)
        except SSL.WantReadError:
            return b""


def _exchange_data(ours: ServerConnection | ClientConnection, theirs: SSL.Connection) -> None:
    ours.send_data(b"ping from tls12")
    theirs.bio_write(ours.data_to_send())
    assert theirs.recv(100) == b"ping from tls12"
    theirs.send(b"pong from OpenSSL")
    events = ours.receive_data(theirs.bio_read(1 << 16))
    assert [e for e in events if isinstance(e, ApplicationData)] == [ApplicationData(b"pong from OpenSSL")]


@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
@pytest.mark.parametrize("suite", EMS_SUITES, ids=suite_id)
def test_master_secret_matches_pyopenssl_client(credentials: Credentials, suite: CipherSuite, ems: bool) -> None:
    server = ServerConnection(ServerConfig(credentials=credentials, cipher_suites=(suite,)))
    client = SSL.Connection(_pyopenssl_context(suite, ems), None)
    client.set_connect_state()
    _, events = pipe(_PyOpenSSLPeer(client), server)
    assert server.handshake_complete
    done = [e for e in events if isinstance(e, HandshakeComplete)]
    assert len(done) == 1 and done[0].cipher_suite == suite
    assert done[0].extended_master_secret is ems
    assert server.master_secret == client.master_key()
    assert len(server.master_secret) == 48
    _exchange_data(server, client)


@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
@pytest.mark.parametrize("suite", EMS_SUITES, ids=suite_id)
def test_master_secret_matches_pyopenssl_server(credentials: Credentials, suite: CipherSuite, ems: bool) -> None:
    client = ClientConnection(ClientConfig(server_name="localhost", cipher_suites=(suite,), offer_extended_master_secret=ems))
    server = SSL.Connection(_pyopenssl_context(suite, True, credentials), None)
    server.set_accept_state()
    events, _ = pipe(client, _PyOpenSSLPeer(server))
    assert client.handshake_complete
    done = [e for e in events if isinstance(e, HandshakeComplete)]
    assert len(done) == 1 and done[0].cipher_suite == suite
    assert done[0].extended_master_secret is ems
    assert client.master_secret == server.master_key()
    _exchange_data(client, server)
