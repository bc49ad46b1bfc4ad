"""In-memory server/client pairs: every suite, resumption, EMS, renegotiation, alerts, limits."""

from __future__ import annotations

import pytest

from tls12 import (
    ApplicationData,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    HandshakeComplete,
    InMemorySessionStore,
    ServerConfig,
    ServerConnection,
)
from tls12.errors import (
    AlertDescription,
    BadRecordMAC,
    DecryptError,
    HandshakeFailure,
    LocalProtocolError,
    ProtocolVersionError,
    RecordOverflow,
    UnexpectedMessage,
)
from tls12.events import AlertReceived
from tls12.messages import TLS12, ClientHello, HandshakeType, frame_handshake, push_client_hello
from tls12.record import ContentType, record_header
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe, seeded_rng

ALL_SUITES = list(SUITES)


def make_pair(
    suite: CipherSuite, store: InMemorySessionStore | None = None, session=None, ems: bool = True, seed: int = 1
) -> tuple[ServerConnection, ClientConnection]:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), session_store=store, rng=seeded_rng(seed))
    )
    client = ClientConnection(
        ClientConfig(
            server_name="localhost", cipher_suites=(suite,), session=session, offer_extended_master_secret=ems,
            rng=seeded_rng(seed + 1000),
        )
    )
    return server, client


def alert_of(data: bytes) -> tuple[int, int]:
    """(level, description) of a plaintext alert record."""
    assert data[0] == ContentType.ALERT, data[:5]
    return data[5], data[6]


@pytest.mark.parametrize("suite", ALL_SUITES, ids=lambda s: s.name)
def test_handshake_and_data_every_suite(suite: CipherSuite) -> None:
    server, client = make_pair(suite)
    c_events, s_events = pipe(client, server)
    assert isinstance(s_events[0], HandshakeComplete) and isinstance(c_events[0], HandshakeComplete)
    assert s_events[0].cipher_suite == suite and s_events[0].extended_master_secret
    assert server.master_secret == client.master_secret and len(server.master_secret) == 48
    payload = bytes(range(256)) * 300  # 76,800 B: five records
    client.send_data(payload)
    got = server.receive_data(client.data_to_send())
    assert b"".join(e.data for e in got if isinstance(e, ApplicationData)) == payload
    assert max(len(e.data) for e in got) == 1 << 14
    server.send_data(b"pong")
    assert client.receive_data(server.data_to_send()) == [ApplicationData(b"pong")]


def test_transcript_is_deterministic_with_seeded_rngs() -> None:
    suite = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
    runs = []
    for _ in range(2):
        server, client = make_pair(suite, seed=7)
        pipe(client, server)
        client.send_data(b"hello")
        runs.append(client.data_to_send())
    assert runs[0] == runs[1]


@pytest.mark.parametrize("ems", [True, False])
def test_resumption_by_session_id(ems: bool) -> None:
    store = InMemorySessionStore()
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256
    server, client = make_pair(suite, store, ems=ems)
    pipe(client, server)
    assert client.session is not None and len(store) == 1
    server2, client2 = make_pair(suite, store, session=client.session, ems=ems, seed=2)
    c_events, s_events = pipe(client2, server2)
    assert s_events[0].resumed and c_events[0].resumed  # type: ignore[attr-defined]
    assert server2.master_secret == server.master_secret
    client2.send_data(b"resumed")
    assert server2.receive_data(client2.data_to_send()) == [ApplicationData(b"resumed")]


def test_no_resumption_across_ems_mismatch() -> None:
    # a legacy session offered with EMS: full handshake (the other way round aborts, see test_rfc_conformance)
    store = InMemorySessionStore()
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    server, client = make_pair(suite, store, ems=False)
    pipe(client, server)
    server2, client2 = make_pair(suite, store, session=client.session, ems=True, seed=3)
    _, s_events = pipe(client2, server2)
    assert not s_events[0].resumed  # type: ignore[attr-defined]
    assert server2.master_secret != server.master_secret


def test_unknown_session_falls_back_to_full_handshake() -> None:
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    server, client = make_pair(suite, InMemorySessionStore())
    pipe(client, server)
    server2, client2 = make_pair(suite, InMemorySessionStore(), session=client.session, seed=4)
    c_events, s_events = pipe(client2, server2)
    assert not c_events[0].resumed and client2.handshake_complete  # type: ignore[attr-defined]


def test_renegotiation_refused_with_warning() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    pipe(client, server)
    # the client asks to renegotiate: a second ClientHello inside the encrypted session
    hello = ClientHello(b"r" * 32, b"", (0x2F,), b"\x00", ())
    client._write_records(ContentType.HANDSHAKE, [frame_handshake(HandshakeType.CLIENT_HELLO, push_client_hello(hello))])
    assert server.receive_data(client.data_to_send()) == []
    events = client.receive_data(server.data_to_send())
    assert events == [AlertReceived(1, AlertDescription.NO_RENEGOTIATION)]  # type: ignore[arg-type]
    client.send_data(b"still up")
    assert server.receive_data(client.data_to_send()) == [ApplicationData(b"still up")]
    # and the server's HelloRequest is answered the same way by the client
    server._write_records(ContentType.HANDSHAKE, [frame_handshake(HandshakeType.HELLO_REQUEST, b"")])
    assert client.receive_data(server.data_to_send()) == []
    assert server.receive_data(client.data_to_send()) == [AlertReceived(1, AlertDescription.NO_RENEGOTIATION)]  # type: ignore[arg-type]


def test_close_notify_both_ways() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_NULL_SHA256)
    pipe(client, server)
    client.close()
    events = server.receive_data(client.data_to_send())
    assert events == [ConnectionClosed(clean=True, description=AlertDescription.CLOSE_NOTIFY)]
    assert server.closed
    assert client.receive_data(server.data_to_send())[-1] == ConnectionClosed(True, AlertDescription.CLOSE_NOTIFY)
    with pytest.raises(LocalProtocolError):
        server.send_data(b"late")


def test_eof_without_close_notify_is_unclean() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    pipe(client, server)
    assert client.receive_data(b"") == [ConnectionClosed(clean=False)]


def test_send_before_handshake_is_local_error() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    with pytest.raises(LocalProtocolError):
        client.send_data(b"x")


@pytest.mark.parametrize("suite", [CipherSuite.TLS_RSA_WITH_NULL_SHA, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA])
def test_tampered_record_gives_bad_record_mac(suite: CipherSuite) -> None:
    server, client = make_pair(suite)
    pipe(client, server)
    server.send_data(b"A" * 1000)
    wire = bytearray(server.data_to_send())
    wire[200] ^= 1
    with pytest.raises(BadRecordMAC):
        client.receive_data(bytes(wire))
    out = client.data_to_send()  # the fatal alert, encrypted under the client's keys
    assert out[0] == ContentType.ALERT and client.closed
    assert server.receive_data(out)[-1].description == AlertDescription.BAD_RECORD_MAC  # type: ignore[union-attr]


def test_truncated_stream_releases_only_authenticated_records() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    pipe(client, server)
    server.send_data(b"x" * 40_000)
    wire = server.data_to_send()
    events = client.receive_data(wire[: len(wire) - 10])
    got = b"".join(e.data for e in events if isinstance(e, ApplicationData))
    assert got == b"x" * (2 * 16384)  # the last record is incomplete: nothing of it is released
    assert client.receive_data(b"") == [ConnectionClosed(clean=False)]


def test_wrong_finished_is_decrypt_error() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    server.receive_data(client.data_to_send())
    client._finished_body = lambda from_client: bytes(12)  # type: ignore[method-assign]
    client.receive_data(server.data_to_send())
    with pytest.raises(DecryptError):
        server.receive_data(client.data_to_send())
    out = server.data_to_send()  # the alert is encrypted: only its header is visible
    assert out[0] == ContentType.ALERT and server.closed


def _finish_with_forged_key_exchange(encrypted: bytes) -> tuple[type[Exception], bytes]:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    client._premaster_and_client_key_exchange = lambda: (  # type: ignore[method-assign]
        b"\x03\x03" + bytes(46),
        len(encrypted).to_bytes(2, "big") + encrypted,
    )
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    with pytest.raises(BadRecordMAC) as info:
        server.receive_data(client.data_to_send())
    return type(info.value), server.data_to_send()


def test_rsa_premaster_countermeasure_hides_decryption_failure() -> None:
    """RFC 5246 §7.4.7.1: bad padding, a bad version and a merely wrong premaster look the same.

    In every case the server carries on with some premaster, and the handshake
    fails only when the client's Finished record does not authenticate.
    """
    from cryptography.hazmat.primitives.asymmetric import padding

    public = credentials().private_key.public_key()
    outcomes = [
        _finish_with_forged_key_exchange(bytes(256)),  # not PKCS#1 at all
        _finish_with_forged_key_exchange(public.encrypt(b"\x02\x00" + bytes(46), padding.PKCS1v15())),  # bad version
        _finish_with_forged_key_exchange(public.encrypt(b"\x03\x03" + bytes(45), padding.PKCS1v15())),  # bad length
        _finish_with_forged_key_exchange(public.encrypt(b"\x03\x03" + b"\x01" * 46, padding.PKCS1v15())),  # wrong secret
    ]
    assert {kind for kind, _ in outcomes} == {BadRecordMAC}
    assert {(len(alert), alert[:5]) for _, alert in outcomes} == {(outcomes[0][1].__len__(), outcomes[0][1][:5])}


def test_no_common_suite_is_handshake_failure() -> None:
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(CipherSuite.TLS_RSA_WITH_NULL_SHA,)))
    client = ClientConnection(ClientConfig(cipher_suites=(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)))
    with pytest.raises(HandshakeFailure):
        server.receive_data(client.data_to_send())
    assert alert_of(server.data_to_send()) == (2, AlertDescription.HANDSHAKE_FAILURE)


def test_old_client_version_is_protocol_version() -> None:
    server = ServerConnection(ServerConfig(credentials=credentials()))
    hello = ClientHello(b"r" * 32, b"", (0x2F,), b"\x00", (), client_version=0x0301)
    record = frame_handshake(HandshakeType.CLIENT_HELLO, push_client_hello(hello))
    with pytest.raises(ProtocolVersionError):
        server.receive_data(record_header(22, 0x0301, len(record)) + record)
    assert alert_of(server.data_to_send()) == (2, AlertDescription.PROTOCOL_VERSION)


def test_record_limits() -> None:
    server = ServerConnection(ServerConfig(credentials=credentials()))
    with pytest.raises(RecordOverflow):
        server.receive_data(record_header(22, TLS12, (1 << 14) + 2049))
    assert alert_of(server.data_to_send()) == (2, AlertDescription.RECORD_OVERFLOW)
    server = ServerConnection(ServerConfig(credentials=credentials()))
    with pytest.raises(RecordOverflow):  # plaintext records above 2^14 are refused too
        server.receive_data(record_header(22, TLS12, (1 << 14) + 1) + bytes((1 << 14) + 1))
    server = ServerConnection(ServerConfig(credentials=credentials()))
    with pytest.raises(UnexpectedMessage):
        server.receive_data(b"\x63\x03\x03\x00\x01\x00")
    server = ServerConnection(ServerConfig(credentials=credentials()))
    with pytest.raises(UnexpectedMessage):  # application data before the handshake
        server.receive_data(record_header(23, TLS12, 1) + b"x")


def test_handshake_fragmented_over_many_records_and_bytes() -> None:
    """The server reassembles a ClientHello cut into 1-byte records, fed one byte at a time."""
    server, client = make_pair(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256)
    wire = client.data_to_send()
    body = wire[5:]
    fragmented = b"".join(record_header(22, 0x0303, 1) + body[i : i + 1] for i in range(len(body)))
    for i in range(len(fragmented)):
        assert server.receive_data(fragmented[i : i + 1]) == []
    assert server.data_to_send()[0] == ContentType.HANDSHAKE


def test_unexpected_handshake_message_order() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    fin = frame_handshake(HandshakeType.FINISHED, bytes(12))
    with pytest.raises(UnexpectedMessage):
        server.receive_data(record_header(22, TLS12, len(fin)) + fin)
    assert alert_of(server.data_to_send()) == (2, AlertDescription.UNEXPECTED_MESSAGE)


def test_fatal_alert_from_peer_closes() -> None:
    server, client = make_pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    events = server.receive_data(record_header(21, TLS12, 2) + bytes((2, 40)))
    assert events == [AlertReceived(2, AlertDescription.HANDSHAKE_FAILURE), ConnectionClosed(False, AlertDescription.HANDSHAKE_FAILURE)]  # type: ignore[arg-type]
    assert server.closed and server.data_to_send() == b""
