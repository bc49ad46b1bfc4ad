"""RFC conformance of the TLS 1.2 core: EMS and resumption, ChangeCipherSpec, handshake sizes.

Each rule is checked on the wire: the test feeds real or hand-crafted records
to one side, requires the typed error, compares the alert record it queues
byte for byte, and where a peer exists hands that alert to the peer and checks
what the peer makes of it.

* RFC 7627 §5.3 -- resumption and the extended master secret, server and
  client side (our pairs; pyOpenSSL as the real client in memory);
* RFC 5246 §7.1 -- a ChangeCipherSpec record that is not the single byte 1
  is ``unexpected_message`` (both sides; OpenSSL as the peer in memory);
* RFC 5246 §7.2.2 (handshake message sizes) is in ``test_rfc_size_limits.py``.
"""

from __future__ import annotations

import pytest
from OpenSSL import SSL

from tls12 import (
    ClientConfig,
    ClientConnection,
    HandshakeComplete,
    InMemorySessionStore,
    ServerConfig,
    ServerConnection,
)
from tls12.buffer import Buffer
from tls12.errors import (
    AlertDescription,
    AlertLevel,
    HandshakeFailure,
    UnexpectedMessage,
)
from tls12.events import AlertReceived, ConnectionClosed, Event
from tls12.messages import (
    TLS12,
    ClientHello,
    ExtensionType,
    HandshakeType,
    ServerHello,
    frame_handshake,
    pull_client_hello,
    pull_server_hello,
    push_client_hello,
    push_server_hello,
)
from tls12.record import ContentType, record_header
from tls12.session import Session
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe, seeded_rng

RSA_SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
ECDHE_SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256
OP_NO_EXTENDED_MASTER_SECRET = 0x1
"""``SSL_OP_NO_EXTENDED_MASTER_SECRET`` of OpenSSL >= 3.0 (not exported by pyOpenSSL)."""


def fatal_alert(description: AlertDescription) -> bytes:
    """The plaintext fatal alert record a connection sends before its keys are active."""
    return record_header(ContentType.ALERT, TLS12, 2) + bytes((AlertLevel.FATAL, description))


def peer_saw(events: list[Event], description: AlertDescription) -> bool:
    """Whether ``events`` (of the peer that received our alert) report exactly that fatal alert."""
    return events == [
        AlertReceived(AlertLevel.FATAL, description),
        ConnectionClosed(clean=False, description=description),
    ]


def split_records(wire: bytes) -> list[tuple[int, bytes]]:
    """(content type, fragment) of every record in ``wire``."""
    out = []
    while wire:
        length = int.from_bytes(wire[3:5], "big")
        assert len(wire) >= 5 + length, "truncated record"
        out.append((wire[0], wire[5 : 5 + length]))
        wire = wire[5 + length :]
    return out


def join_records(records: list[tuple[int, bytes]]) -> bytes:
    return b"".join(record_header(t, TLS12, len(f)) + f for t, f in records)


def handshake_messages(stream: bytes) -> list[bytes]:
    """Split a plaintext handshake byte stream into framed messages."""
    out = []
    while stream:
        length = int.from_bytes(stream[1:4], "big")
        out.append(stream[: 4 + length])
        stream = stream[4 + length :]
    return out


def server(store: InMemorySessionStore | None = None, suite: CipherSuite = RSA_SUITE, seed: int = 1) -> ServerConnection:
    return ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), session_store=store, rng=seeded_rng(seed))
    )


def client(
    suite: CipherSuite = RSA_SUITE, ems: bool = True, session: Session | None = None, seed: int = 1
) -> ClientConnection:
    return ClientConnection(
        ClientConfig(
            server_name="localhost", cipher_suites=(suite,), offer_extended_master_secret=ems, session=session,
            rng=seeded_rng(seed + 1000),
        )
    )


def first_session(store: InMemorySessionStore, ems: bool, suite: CipherSuite = RSA_SUITE) -> Session:
    """A session from a full handshake with our server, stored in ``store``."""
    srv, cli = server(store, suite), client(suite, ems=ems)
    _, s_events = pipe(cli, srv)
    assert isinstance(s_events[0], HandshakeComplete) and s_events[0].extended_master_secret is ems
    assert cli.session is not None and store.get(cli.session.session_id) is not None
    return cli.session


def _ems_in_client_hello(wire: bytes) -> bool:
    (ctype, fragment), *_ = split_records(wire)
    hello = pull_client_hello(Buffer(fragment[4:]))
    return hello.extension(ExtensionType.EXTENDED_MASTER_SECRET) is not None


# --- RFC 7627 §5.3, server side ------------------------------------------------------------------


def test_server_aborts_resuming_ems_session_without_ems() -> None:
    """Session with EMS, ClientHello without: the server MUST abort (handshake_failure), no ServerHello."""
    store = InMemorySessionStore()
    session = first_session(store, ems=True)
    srv, cli = server(store, seed=2), client(ems=False, session=session, seed=2)
    hello = cli.data_to_send()
    assert not _ems_in_client_hello(hello)
    with pytest.raises(HandshakeFailure, match="7627"):
        srv.receive_data(hello)
    wire = srv.data_to_send()
    assert wire == fatal_alert(AlertDescription.HANDSHAKE_FAILURE)
    assert srv.closed and not srv.resumed
    assert peer_saw(cli.receive_data(wire), AlertDescription.HANDSHAKE_FAILURE) and cli.closed


@pytest.mark.parametrize(
    "extensions",
    [None, (), ((ExtensionType.RENEGOTIATION_INFO, b"\x00"),)],
    ids=["no-extensions-block", "empty-block", "renegotiation-info-only"],
)
def test_server_aborts_crafted_legacy_hello_for_ems_session(extensions: tuple[tuple[int, bytes], ...] | None) -> None:
    """The same rule for hand-made ClientHellos of legacy clients, with and without an extensions block."""
    store = InMemorySessionStore()
    session = first_session(store, ems=True)
    body = push_client_hello(ClientHello(bytes(32), session.session_id, (RSA_SUITE,), b"\x00", extensions))
    framed = frame_handshake(HandshakeType.CLIENT_HELLO, body)
    srv = server(store, seed=3)
    with pytest.raises(HandshakeFailure):
        srv.receive_data(record_header(ContentType.HANDSHAKE, 0x0301, len(framed)) + framed)
    assert srv.data_to_send() == fatal_alert(AlertDescription.HANDSHAKE_FAILURE)


def test_server_runs_full_handshake_for_legacy_session_offered_with_ems() -> None:
    """Session without EMS, ClientHello with: MUST NOT resume; the full handshake negotiates EMS."""
    store = InMemorySessionStore()
    session = first_session(store, ems=False)
    srv, cli = server(store, seed=4), client(ems=True, session=session, seed=4)
    hello = cli.data_to_send()
    assert _ems_in_client_hello(hello)
    assert srv.receive_data(hello) == []
    c_events, s_events = pipe(cli, srv)
    for done in (s_events[0], c_events[0]):
        assert isinstance(done, HandshakeComplete)
        assert not done.resumed and done.extended_master_secret
        assert done.session_id != session.session_id
    assert srv.master_secret == cli.master_secret != session.master_secret


def test_server_resumes_legacy_session_without_ems() -> None:
    """Neither uses EMS: this server resumes (the documented legacy policy), without EMS in the ServerHello."""
    store = InMemorySessionStore()
    session = first_session(store, ems=False)
    srv, cli = server(store, seed=5), client(ems=False, session=session, seed=5)
    srv.receive_data(cli.data_to_send())
    flight = srv.data_to_send()
    (ctype, fragment), *_ = split_records(flight)
    server_hello = pull_server_hello(Buffer(handshake_messages(fragment)[0][4:]))
    assert server_hello.session_id == session.session_id
    assert server_hello.extension(ExtensionType.EXTENDED_MASTER_SECRET) is None
    c_events = cli.receive_data(flight)
    s_events = srv.receive_data(cli.data_to_send())
    for done in (s_events[0], c_events[0]):
        assert isinstance(done, HandshakeComplete) and done.resumed and not done.extended_master_secret
    assert srv.master_secret == cli.master_secret == session.master_secret


# --- RFC 7627 §5.3, client side ------------------------------------------------------------------


def crafted_resumption_hello(session: Session, with_ems: bool) -> bytes:
    """A plaintext record with a ServerHello that accepts ``session``, with or without EMS."""
    exts: list[tuple[int, bytes]] = [(ExtensionType.RENEGOTIATION_INFO, b"\x00")]
    if with_ems:
        exts.append((ExtensionType.EXTENDED_MASTER_SECRET, b""))
    body = push_server_hello(ServerHello(bytes(range(32)), session.session_id, session.cipher_suite, 0, tuple(exts)))
    framed = frame_handshake(HandshakeType.SERVER_HELLO, body)
    return record_header(ContentType.HANDSHAKE, TLS12, len(framed)) + framed


@pytest.mark.parametrize("session_ems", [True, False], ids=["ems-session", "legacy-session"])
def test_client_aborts_resumption_that_flips_ems(session_ems: bool) -> None:
    """The abbreviated ServerHello disagrees with the session on EMS: the client MUST abort."""
    session = first_session(InMemorySessionStore(), ems=session_ems)
    cli = client(ems=True, session=session, seed=6)
    assert _ems_in_client_hello(cli.data_to_send())
    with pytest.raises(HandshakeFailure, match="7627"):
        cli.receive_data(crafted_resumption_hello(session, with_ems=not session_ems))
    assert cli.data_to_send() == fatal_alert(AlertDescription.HANDSHAKE_FAILURE)
    assert cli.closed and not cli.resumed


@pytest.mark.parametrize("session_ems", [True, False], ids=["ems-session", "legacy-session"])
def test_client_accepts_resumption_that_keeps_ems(session_ems: bool) -> None:
    """Control for the test above: the same crafted ServerHello, EMS matching, is accepted."""
    session = first_session(InMemorySessionStore(), ems=session_ems)
    cli = client(ems=True, session=session, seed=6)
    cli.data_to_send()
    assert cli.receive_data(crafted_resumption_hello(session, with_ems=session_ems)) == []
    assert cli.data_to_send() == b"" and not cli.closed and cli.resumed


def test_client_aborts_when_attacker_strips_ems_from_real_resumption() -> None:
    """A man in the middle removes EMS from our server's abbreviated ServerHello; the server learns why."""
    store = InMemorySessionStore()
    session = first_session(store, ems=True)
    srv, cli = server(store, seed=7), client(ems=True, session=session, seed=7)
    srv.receive_data(cli.data_to_send())
    records = split_records(srv.data_to_send())
    ctype, fragment = records[0]
    server_hello, *rest = handshake_messages(fragment)
    parsed = pull_server_hello(Buffer(server_hello[4:]))
    assert parsed.session_id == session.session_id
    stripped = ServerHello(
        parsed.random, parsed.session_id, parsed.cipher_suite, parsed.compression_method,
        tuple(e for e in parsed.extensions or () if e[0] != ExtensionType.EXTENDED_MASTER_SECRET),
    )
    assert stripped != parsed
    tampered = frame_handshake(HandshakeType.SERVER_HELLO, push_server_hello(stripped)) + b"".join(rest)
    with pytest.raises(HandshakeFailure):
        cli.receive_data(join_records([(ctype, tampered), *records[1:]]))
    wire = cli.data_to_send()
    assert wire == fatal_alert(AlertDescription.HANDSHAKE_FAILURE)
    assert peer_saw(srv.receive_data(wire), AlertDescription.HANDSHAKE_FAILURE)


# --- RFC 7627 §5.3 against OpenSSL (pyOpenSSL in memory, no sockets) ------------------------------


def _openssl_client_context() -> SSL.Context:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_cipher_list(SUITES[RSA_SUITE].openssl_name.encode())
    return ctx


def _openssl_handshake(ours: ServerConnection, theirs: SSL.Connection) -> tuple[list[Event], bytes]:
    """Run the handshake in memory; (our events, the ClientHello OpenSSL sent)."""
    events: list[Event] = []
    first = b""
    for _ in range(10):
        try:
            theirs.do_handshake()
        except SSL.WantReadError:
            pass
        try:
            out = theirs.bio_read(1 << 20)
        except SSL.WantReadError:
            out = b""
        first = first or out
        if out:
            events += ours.receive_data(out)
        back = ours.data_to_send()
        if back:
            theirs.bio_write(back)
        if not out and not back:
            break
    return events, first


@pytest.mark.interop
@pytest.mark.parametrize(
    ("original_ems", "resume_ems", "outcome"),
    [
        (True, True, "resumed"),
        (True, False, "handshake_failure"),
        (False, True, "full"),
        (False, False, "resumed"),
    ],
)
def test_openssl_client_resumption_matrix(original_ems: bool, resume_ems: bool, outcome: str) -> None:
    """OpenSSL's client offers its session in all four cases; our server answers per RFC 7627 §5.3."""
    store = InMemorySessionStore()
    ctx = _openssl_client_context()
    first = SSL.Connection(ctx, None)
    first.set_connect_state()
    if not original_ems:
        first.set_options(OP_NO_EXTENDED_MASTER_SECRET)
    events, _ = _openssl_handshake(server(store, seed=8), first)
    assert [e for e in events if isinstance(e, HandshakeComplete)][0].extended_master_secret is original_ems
    first.shutdown()  # a clean end keeps the session resumable for OpenSSL
    first_master = first.master_key()
    second = SSL.Connection(ctx, None)
    second.set_connect_state()
    second.set_session(first.get_session())
    if not resume_ems:
        second.set_options(OP_NO_EXTENDED_MASTER_SECRET)
    srv = server(store, seed=9)
    if outcome == "handshake_failure":
        with pytest.raises(HandshakeFailure):
            _openssl_handshake(srv, second)
        second.bio_write(srv.data_to_send())
        with pytest.raises(SSL.Error, match="alert handshake failure"):
            second.do_handshake()
        return
    events, hello = _openssl_handshake(srv, second)
    offered = pull_client_hello(Buffer(split_records(hello)[0][1][4:]))
    assert len(offered.session_id) == 32  # OpenSSL offered its session
    assert (offered.extension(ExtensionType.EXTENDED_MASTER_SECRET) is not None) is resume_ems
    done = [e for e in events if isinstance(e, HandshakeComplete)]
    assert len(done) == 1 and done[0].resumed is (outcome == "resumed")
    assert done[0].extended_master_secret is resume_ems
    assert srv.master_secret == second.master_key()
    assert (second.master_key() == first_master) is (outcome == "resumed")


# --- RFC 5246 §7.1: ChangeCipherSpec is exactly the byte 1 -----------------------------------------

BAD_CCS = [b"\x01\x01", b"", b"\x02", b"\x00"]


def _with_ccs(wire: bytes, body: bytes) -> bytes:
    records = split_records(wire)
    assert sum(t == ContentType.CHANGE_CIPHER_SPEC for t, _ in records) == 1
    return join_records([(t, body if t == ContentType.CHANGE_CIPHER_SPEC else f) for t, f in records])


@pytest.mark.parametrize("body", BAD_CCS, ids=lambda b: b.hex() or "empty")
def test_server_rejects_malformed_change_cipher_spec(body: bytes) -> None:
    """Full handshake: the client's CCS altered; the server answers unexpected_message in plaintext."""
    srv, cli = server(seed=10), client(seed=10)
    srv.receive_data(cli.data_to_send())
    cli.receive_data(srv.data_to_send())
    with pytest.raises(UnexpectedMessage):
        srv.receive_data(_with_ccs(cli.data_to_send(), body))
    wire = srv.data_to_send()
    assert wire == fatal_alert(AlertDescription.UNEXPECTED_MESSAGE)
    assert srv.closed
    assert peer_saw(cli.receive_data(wire), AlertDescription.UNEXPECTED_MESSAGE)


@pytest.mark.parametrize("body", BAD_CCS, ids=lambda b: b.hex() or "empty")
def test_client_rejects_malformed_change_cipher_spec_when_resuming(body: bytes) -> None:
    """Abbreviated handshake: the server's CCS altered; the client (still in plaintext) says unexpected_message."""
    store = InMemorySessionStore()
    session = first_session(store, ems=True)
    srv, cli = server(store, seed=11), client(session=session, seed=11)
    srv.receive_data(cli.data_to_send())
    with pytest.raises(UnexpectedMessage):
        cli.receive_data(_with_ccs(srv.data_to_send(), body))
    wire = cli.data_to_send()
    assert wire == fatal_alert(AlertDescription.UNEXPECTED_MESSAGE)
    assert peer_saw(srv.receive_data(wire), AlertDescription.UNEXPECTED_MESSAGE)


@pytest.mark.parametrize("body", BAD_CCS, ids=lambda b: b.hex() or "empty")
def test_client_rejects_malformed_change_cipher_spec_full_handshake(body: bytes) -> None:
    """Full handshake: the client's alert is already encrypted; the server decrypts unexpected_message."""
    srv, cli = server(seed=12), client(seed=12)
    srv.receive_data(cli.data_to_send())
    cli.receive_data(srv.data_to_send())
    srv.receive_data(cli.data_to_send())
    with pytest.raises(UnexpectedMessage):
        cli.receive_data(_with_ccs(srv.data_to_send(), body))
    wire = cli.data_to_send()
    assert [t for t, _ in split_records(wire)] == [ContentType.ALERT]
    assert peer_saw(srv.receive_data(wire), AlertDescription.UNEXPECTED_MESSAGE)


def _openssl_server(suite: CipherSuite) -> SSL.Connection:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_cipher_list(SUITES[suite].openssl_name.encode())
    ctx.use_certificate(credentials().chain[0])
    ctx.use_privatekey(credentials().private_key)
    conn = SSL.Connection(ctx, None)
    conn.set_accept_state()
    return conn


def _openssl_step(theirs: SSL.Connection, data: bytes) -> bytes:
    theirs.bio_write(data)
    try:
        theirs.do_handshake()
    except SSL.WantReadError:
        pass
    return theirs.bio_read(1 << 20)


@pytest.mark.interop
@pytest.mark.parametrize("body", BAD_CCS, ids=lambda b: b.hex() or "empty")
def test_openssl_server_reads_our_unexpected_message_alert(body: bytes) -> None:
    """OpenSSL's server CCS altered in transit: our client's (encrypted) alert reads as unexpected_message there."""
    theirs = _openssl_server(ECDHE_SUITE)
    cli = client(ECDHE_SUITE, seed=13)
    cli.receive_data(_openssl_step(theirs, cli.data_to_send()))
    final = _openssl_step(theirs, cli.data_to_send())
    with pytest.raises(UnexpectedMessage):
        cli.receive_data(_with_ccs(final, body))
    theirs.bio_write(cli.data_to_send())
    with pytest.raises(SSL.Error, match="alert unexpected message"):
        theirs.recv(1)


@pytest.mark.interop
@pytest.mark.parametrize("body", BAD_CCS, ids=lambda b: b.hex() or "empty")
def test_openssl_client_reads_our_unexpected_message_alert(body: bytes) -> None:
    """OpenSSL's client CCS altered in transit: our server's alert reaches OpenSSL as unexpected_message."""
    theirs = SSL.Connection(_openssl_client_context(), None)
    theirs.set_connect_state()
    srv = server(seed=14)
    try:
        theirs.do_handshake()
    except SSL.WantReadError:
        pass
    srv.receive_data(theirs.bio_read(1 << 20))
    second = _openssl_step(theirs, srv.data_to_send())
    with pytest.raises(UnexpectedMessage):
        srv.receive_data(_with_ccs(second, body))
    theirs.bio_write(srv.data_to_send())
    with pytest.raises(SSL.Error, match="alert unexpected message"):
        theirs.do_handshake()
