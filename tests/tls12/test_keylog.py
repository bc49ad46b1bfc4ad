"""The key log (:mod:`tls12.keylog`): the line OpenSSL writes, byte for byte, and off by default.

OpenSSL is the real peer: Python's ``ssl`` over memory BIOs, with ``keylog_filename`` set, on
the other side of a :mod:`tls12` server, client or delegated server.  For a full handshake with
an RSA suite and an ECDHE suite, and a session-ID resumption after each, the file our side
writes (:func:`tls12.keylog.open_keylog`) must hold exactly the ``CLIENT_RANDOM`` lines of
OpenSSL's file.  Then the helpers: nothing without ``SSLKEYLOGFILE``, the warning with it, a
path that cannot be written refused at once, a full disk that does not break a handshake.
"""

from __future__ import annotations

import os
import ssl
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tls12 import (
    ClientConfig,
    ClientConnection,
    InMemorySessionStore,
    ServerConfig,
    ServerConnection,
)
from tls12.certs import write_credentials
from tls12.delegate import LocalDelegate
from tls12.keylog import (
    KeyLogError,
    KeyLogFile,
    keylog_from_env,
    keylog_line,
    open_keylog,
    program_keylog,
)
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe

RSA = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256
ECDHE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
ECDHE_CBC = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
WARNING = "anyone who reads it can decrypt these connections"


class OpenSSLEndpoint:
    """Python's ``ssl`` (OpenSSL) over memory BIOs, as a :func:`tls12.testing.pipe` endpoint."""

    def __init__(self, tls: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> None:
        self.tls, self.incoming, self.outgoing = tls, incoming, outgoing
        self.done = False

    def _step(self) -> None:
        if not self.done:
            try:
                self.tls.do_handshake()
                self.done = True
            except ssl.SSLWantReadError:
                pass

    def receive_data(self, data: bytes) -> list[object]:
        self.incoming.write(data)
        self._step()
        return []

    def data_to_send(self) -> bytes:
        self._step()
        return self.outgoing.read()


def _wrap(ctx: ssl.SSLContext, *, server_side: bool = False,
          session: ssl.SSLSession | None = None) -> OpenSSLEndpoint:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    if server_side:
        tls = ctx.wrap_bio(incoming, outgoing, server_side=True)
    else:
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost", session=session)
    return OpenSSLEndpoint(tls, incoming, outgoing)


def _openssl_client(suite: CipherSuite, keylog: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_TICKET  # resumption by session ID, the kind tls12 serves
    ctx.set_ciphers(SUITES[suite].openssl_name)
    ctx.keylog_filename = str(keylog)
    return ctx


def _openssl_server(suite: CipherSuite, keylog: Path, tmp: Path) -> ssl.SSLContext:
    write_credentials(credentials(), tmp / "cert.pem", tmp / "key.pem")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    ctx.options |= ssl.OP_NO_TICKET
    ctx.set_ciphers(SUITES[suite].openssl_name)
    ctx.keylog_filename = str(keylog)
    return ctx


def _openssl_lines(path: Path) -> bytes:
    """The ``CLIENT_RANDOM`` lines of OpenSSL's key log: without Python's ``#`` header, and
    without the ``RSA <encrypted premaster prefix> <premaster>`` line an OpenSSL client adds for
    RSA key exchange (Wireshark needs only one of the two; the master secret is the one every
    suite and a resumption have)."""
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(line for line in lines if line.startswith(b"CLIENT_RANDOM "))


def _assert_same_log(ours: Path, theirs: Path, connections: int) -> None:
    got, want = ours.read_bytes(), _openssl_lines(theirs)
    assert want.count(b"\n") == connections
    assert got == want


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(our key log, OpenSSL's key log)."""
    yield tmp_path / "ours.log", tmp_path / "openssl.log"


# -- interop: the line OpenSSL writes ------------------------------------------------------


@pytest.mark.parametrize("suite", [RSA, ECDHE], ids=lambda s: SUITES[s].openssl_name)
def test_server_writes_the_line_openssl_client_writes(suite: CipherSuite, logs: tuple[Path, Path]) -> None:
    ours, theirs = logs
    ctx = _openssl_client(suite, theirs)
    with open_keylog(ours) as sink:
        config = ServerConfig(credentials=credentials(), cipher_suites=(suite,),
                              session_store=InMemorySessionStore(), keylog=sink)
        first, server = _wrap(ctx), ServerConnection(config)
        pipe(first, server)
        assert first.done and server.handshake_complete and not server.resumed
        # the first SSLObject stays alive: freed without a shutdown, OpenSSL drops its session
        second, resumed = _wrap(ctx, session=first.tls.session), ServerConnection(config)
        pipe(second, resumed)
        assert second.tls.session_reused and resumed.resumed
    _assert_same_log(ours, theirs, 2)


@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
@pytest.mark.parametrize("suite", [RSA, ECDHE], ids=lambda s: SUITES[s].openssl_name)
def test_client_writes_the_line_openssl_server_writes(suite: CipherSuite, ems: bool,
                                                      logs: tuple[Path, Path]) -> None:
    ours, theirs = logs
    ctx = _openssl_server(suite, theirs, ours.parent)
    with open_keylog(ours) as sink:
        client = ClientConnection(ClientConfig(cipher_suites=(suite,), keylog=sink,
                                               offer_extended_master_secret=ems))
        first = _wrap(ctx, server_side=True)
        pipe(client, first)
        assert first.done and client.handshake_complete and client.session is not None
        assert client.extended_master_secret is ems
        again = ClientConnection(ClientConfig(cipher_suites=(suite,), keylog=sink,
                                              offer_extended_master_secret=ems,
                                              session=client.session))
        second = _wrap(ctx, server_side=True)
        pipe(again, second)
        assert again.resumed and second.tls.session_reused
    _assert_same_log(ours, theirs, 2)


@pytest.mark.parametrize("suite", [RSA, ECDHE_CBC], ids=lambda s: SUITES[s].openssl_name)
def test_delegate_writes_the_line_openssl_client_writes(suite: CipherSuite,
                                                        logs: tuple[Path, Path]) -> None:
    """A delegated server has no master secret: its delegate writes the key log (WebALPS)."""
    ours, theirs = logs
    ctx = _openssl_client(suite, theirs)
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,),
                          session_store=InMemorySessionStore())
    with open_keylog(ours) as sink:
        delegate = LocalDelegate(credentials().private_key, rng=config.rng, keylog=sink)
        first = _wrap(ctx)
        pipe(first, ServerConnection(config, delegate=delegate))
        second = _wrap(ctx, session=first.tls.session)
        resumed = ServerConnection(config, delegate=delegate)
        pipe(second, resumed)
        assert resumed.resumed and second.tls.session_reused
    _assert_same_log(ours, theirs, 2)


# -- the sink in the core ------------------------------------------------------------------


def test_off_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert ServerConfig(credentials=credentials()).keylog is None and ClientConfig().keylog is None
    client = ClientConnection(ClientConfig())
    pipe(client, ServerConnection(ServerConfig(credentials=credentials())))
    assert client.handshake_complete
    assert keylog_from_env() is None and program_keylog(None) is None
    assert list(tmp_path.iterdir()) == []
    assert capfd.readouterr() == ("", "")


def test_one_line_per_connection_on_both_sides() -> None:
    server_lines: list[str] = []
    client_lines: list[str] = []
    client = ClientConnection(ClientConfig(keylog=client_lines.append))
    server = ServerConnection(ServerConfig(credentials=credentials(), keylog=server_lines.append))
    pipe(client, server)
    client.send_data(b"x")
    pipe(client, server)
    assert server_lines == client_lines == [keylog_line(client.client_random, client.master_secret)]


def test_config_refuses_what_is_not_a_sink(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="open_keylog"):
        ServerConfig(credentials=credentials(), keylog=str(tmp_path / "k.log"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        ClientConfig(keylog=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        LocalDelegate(credentials().private_key, rng=os.urandom, keylog="k.log")  # type: ignore[arg-type]


def test_a_delegated_server_refuses_a_config_key_log() -> None:
    """The key log belongs to whoever holds the master secret: here the delegate."""
    config = ServerConfig(credentials=credentials(), keylog=lambda line: None)
    with pytest.raises(ValueError, match="delegate"):
        ServerConnection(config, delegate=LocalDelegate(credentials().private_key, rng=os.urandom))


def test_a_failing_sink_of_the_application_propagates() -> None:
    """Documented: an application's sink is called inside ``receive_data``; its bug surfaces."""

    def broken(line: str) -> None:
        raise RuntimeError("sink is broken")

    server = ServerConnection(ServerConfig(credentials=credentials(), keylog=broken))
    with pytest.raises(RuntimeError, match="sink is broken"):
        pipe(ClientConnection(ClientConfig()), server)


def test_keylog_line_checks_lengths() -> None:
    line = keylog_line(bytes(range(32)), b"\xab" * 48)
    assert line == f"CLIENT_RANDOM {bytes(range(32)).hex()} {'ab' * 48}"
    with pytest.raises(ValueError, match="32-byte"):
        keylog_line(b"\x00" * 31, b"\x00" * 48)


# -- the file helpers ----------------------------------------------------------------------


def test_env_var_opens_the_file_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "secrets.log"
    sink = keylog_from_env({"SSLKEYLOGFILE": str(path)})
    assert isinstance(sink, KeyLogFile)
    err = capsys.readouterr().err
    assert err == (f"warning: writing TLS secrets to {path} (SSLKEYLOGFILE); {WARNING}\n")
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    sink("CLIENT_RANDOM a b")
    sink("CLIENT_RANDOM c d")
    sink.close()
    sink("CLIENT_RANDOM e f")  # closed: nothing
    assert path.read_text() == "CLIENT_RANDOM a b\nCLIENT_RANDOM c d\n"
    assert keylog_from_env({"SSLKEYLOGFILE": ""}) is None and capsys.readouterr().err == ""


def test_option_wins_over_env_var(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"SSLKEYLOGFILE": str(tmp_path / "env.log")}
    with program_keylog(tmp_path / "opt.log", env) as sink:  # type: ignore[union-attr]
        assert sink.path == tmp_path / "opt.log"
    assert capsys.readouterr().err == (
        f"warning: writing TLS secrets to {tmp_path / 'opt.log'} (--keylog); {WARNING}\n")
    assert not (tmp_path / "env.log").exists()


def test_a_path_that_cannot_be_written_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(KeyLogError, match=r"SSLKEYLOGFILE .*missing/k\.log: cannot open"):
        keylog_from_env({"SSLKEYLOGFILE": str(tmp_path / "missing" / "k.log")})
    with pytest.raises(KeyLogError, match="--keylog"):
        program_keylog(tmp_path, {})  # a directory


def test_a_full_disk_turns_the_log_off_without_breaking_the_handshake(
        capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/full is on every Linux (CI's machines): a write there fails with ENOSPC
    with open_keylog("/dev/full") as sink:
        client = ClientConnection(ClientConfig(keylog=sink))
        pipe(client, ServerConnection(ServerConfig(credentials=credentials())))
        assert client.handshake_complete and sink.closed
    assert capsys.readouterr().err.count("key logging is off") == 1


def test_lines_from_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "k.log"
    lines = [keylog_line(bytes([t]) * 32, bytes([i % 256]) * 48) for t in range(4) for i in range(200)]
    with open_keylog(path) as sink:
        threads = [threading.Thread(target=lambda t=t: [sink(x) for x in lines[t * 200:(t + 1) * 200]])
                   for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert sorted(path.read_text().splitlines()) == sorted(lines)
