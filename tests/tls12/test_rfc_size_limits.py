"""RFC 5246 §7.2.2 in the TLS 1.2 core: a handshake message longer than the receiver accepts is
``decode_error``, judged from its 4-byte header before the body is buffered (per-type bounds in
:data:`tls12.messages.MAX_HANDSHAKE_BODY`), on both sides and at every stage.

The other RFC rules (RFC 7627 §5.3, RFC 5246 §7.1) are in ``test_rfc_conformance.py``, whose
helpers these tests share.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tls12.test_rfc_conformance import (
    ECDHE_SUITE,
    RSA_SUITE,
    client,
    fatal_alert,
    first_session,
    handshake_messages,
    join_records,
    server,
    split_records,
)
from tls12 import (
    ClientConnection,
    InMemorySessionStore,
    ServerConnection,
)
from tls12.buffer import Buffer
from tls12.errors import (
    AlertDescription,
    DecodeError,
    RemoteProtocolError,
    UnexpectedMessage,
)
from tls12.messages import (
    MAX_HANDSHAKE_MESSAGE,
    TLS12,
    ClientHello,
    HandshakeType,
    frame_handshake,
    max_handshake_body,
    pull_client_hello,
    pull_handshake_header,
    push_client_hello,
)
from tls12.record import ContentType, OutgoingRecord, WriteProtection, record_header
from tls12.testing import seeded_rng

# --- RFC 5246 §7.2.2: messages larger than accepted are decode_error --------------------------------


def big_client_hello(body_length: int) -> bytes:
    """A well-formed ClientHello of exactly ``body_length`` bytes: 32,767 suites and a padding extension."""
    suites = (int(RSA_SUITE), *range(0x0100, 0x0100 + 32766))
    fixed = len(push_client_hello(ClientHello(bytes(32), b"", suites, b"\x00", ())))
    padding = body_length - fixed - 4
    assert 0 <= padding <= 0xFFFF - 4, body_length
    hello = ClientHello(bytes(32), b"", suites, b"\x00", ((21, bytes(padding)),))  # padding, RFC 7685
    body = push_client_hello(hello)
    assert len(body) == body_length and pull_client_hello(Buffer(body)) == hello
    return frame_handshake(HandshakeType.CLIENT_HELLO, body)


def as_records(stream: bytes, size: int = 1 << 14) -> list[bytes]:
    return [record_header(ContentType.HANDSHAKE, TLS12, len(c)) + c for c in (stream[i : i + size] for i in range(0, len(stream), size))]


def test_client_hello_at_the_limit_is_accepted() -> None:
    """A 2^17-byte ClientHello over nine records is reassembled and answered (the bound is not too tight)."""
    srv = server(seed=15)
    records = as_records(big_client_hello(MAX_HANDSHAKE_MESSAGE))
    assert len(records) == 9
    for record in records[:-1]:
        assert srv.receive_data(record) == [] and srv.data_to_send() == b""
    srv.receive_data(records[-1])
    assert split_records(srv.data_to_send())[0][1][0] == HandshakeType.SERVER_HELLO


def test_oversized_client_hello_is_decode_error_at_its_first_record() -> None:
    """One byte more: decode_error as soon as the header is in; the other eight records are never buffered."""
    srv = server(seed=16)
    first, *rest = as_records(big_client_hello(MAX_HANDSHAKE_MESSAGE + 1))
    with pytest.raises(DecodeError):
        srv.receive_data(first)
    assert srv.data_to_send() == fatal_alert(AlertDescription.DECODE_ERROR)
    assert srv.closed
    for record in rest:
        assert srv.receive_data(record) == [] and srv.data_to_send() == b""


Wrap = Callable[[bytes], bytes]
"""Puts handshake bytes into one record as the peer would send it at that point."""
Stage = Callable[[], tuple[ServerConnection | ClientConnection, Wrap]]
"""Builds a connection in a given handshake state and the record wrapper its peer uses there."""


def plaintext(fragment: bytes) -> bytes:
    return record_header(ContentType.HANDSHAKE, TLS12, len(fragment)) + fragment


def _server_fresh() -> tuple[ServerConnection, Wrap]:
    return server(seed=17), plaintext


def _server_after_hello() -> tuple[ServerConnection, Wrap]:
    srv = server(seed=17)
    srv.receive_data(client(seed=17).data_to_send())
    srv.data_to_send()
    return srv, plaintext


def _client_fresh() -> tuple[ClientConnection, Wrap]:
    cli = client(ECDHE_SUITE, seed=18)
    cli.data_to_send()
    return cli, plaintext


def _client_after(count: int) -> Stage:
    """A client (ECDHE suite) fed the first ``count`` messages of our server's first flight."""

    def make() -> tuple[ClientConnection, Wrap]:
        cli = client(ECDHE_SUITE, seed=18)
        srv = server(suite=ECDHE_SUITE, seed=18)
        srv.receive_data(cli.data_to_send())
        stream = b"".join(f for _, f in split_records(srv.data_to_send()))
        cli.receive_data(b"".join(as_records(b"".join(handshake_messages(stream)[:count]))))
        assert cli.data_to_send() == b""
        return cli, plaintext

    return make


def _client_expecting_finished() -> tuple[ClientConnection, Wrap]:
    """A resuming client after ServerHello and CCS; the server's next record is sealed under its new keys."""
    store = InMemorySessionStore()
    session = first_session(store, ems=True)
    srv, cli = server(store, seed=19), client(session=session, seed=19)
    srv.receive_data(cli.data_to_send())
    hello, ccs, _finished = split_records(srv.data_to_send())
    cli.receive_data(join_records([hello, ccs]))
    sealer = WriteProtection(srv.write_protection.keys, seeded_rng(0))  # the server's epoch, from seq 0

    def sealed(fragment: bytes) -> bytes:
        return sealer.seal(OutgoingRecord(ContentType.HANDSHAKE, TLS12, sealer.next_seq(), fragment))

    return cli, sealed


LIMIT_CASES = [
    ("server-expects-client-hello", _server_fresh, HandshakeType.CLIENT_HELLO, MAX_HANDSHAKE_MESSAGE),
    ("server-expects-client-key-exchange", _server_after_hello, HandshakeType.CLIENT_KEY_EXCHANGE, 2050),
    ("client-expects-server-hello", _client_fresh, HandshakeType.SERVER_HELLO, 65607),
    ("client-hello-request", _client_fresh, HandshakeType.HELLO_REQUEST, 0),
    ("client-expects-certificate", _client_after(1), HandshakeType.CERTIFICATE, MAX_HANDSHAKE_MESSAGE),
    ("client-expects-server-key-exchange", _client_after(2), HandshakeType.SERVER_KEY_EXCHANGE, 65798),
    ("client-expects-server-hello-done", _client_after(3), HandshakeType.SERVER_HELLO_DONE, 0),
    ("client-expects-finished", _client_expecting_finished, HandshakeType.FINISHED, 12),
]


def header(msg_type: int, length: int) -> bytes:
    return bytes([msg_type]) + length.to_bytes(3, "big")


@pytest.mark.parametrize(("name", "stage", "msg_type", "limit"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_handshake_header_at_the_limit_is_accepted(name: str, stage: Stage, msg_type: int, limit: int) -> None:
    """A header announcing the largest accepted body: no error (an empty body is the whole message)."""
    assert max_handshake_body(msg_type) == limit
    conn, wrap = stage()
    assert conn.receive_data(wrap(header(msg_type, limit))) == []
    assert not conn.closed


@pytest.mark.parametrize(("name", "stage", "msg_type", "limit"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_handshake_header_over_the_limit_is_decode_error(name: str, stage: Stage, msg_type: int, limit: int) -> None:
    """One byte more: decode_error from the header alone, in plaintext (no side has sent its CCS yet)."""
    conn, wrap = stage()
    with pytest.raises(DecodeError):
        conn.receive_data(wrap(header(msg_type, limit + 1)))
    assert conn.data_to_send() == fatal_alert(AlertDescription.DECODE_ERROR)
    assert conn.closed


@pytest.mark.parametrize(
    ("make", "msg_type"),
    [(_server_fresh, HandshakeType.FINISHED), (_client_fresh, HandshakeType.CLIENT_HELLO), (_server_after_hello, HandshakeType.CLIENT_HELLO)],
    ids=["server-finished-first", "client-gets-client-hello", "server-second-client-hello"],
)
def test_wrong_message_type_is_refused_at_its_first_byte(make: Stage, msg_type: int) -> None:
    """The type decides before the length: one byte is enough for unexpected_message, even if a huge length follows."""
    conn, wrap = make()
    with pytest.raises(UnexpectedMessage):
        conn.receive_data(wrap(bytes([msg_type])))
    assert conn.data_to_send() == fatal_alert(AlertDescription.UNEXPECTED_MESSAGE)
    conn, wrap = make()
    with pytest.raises(UnexpectedMessage):
        conn.receive_data(wrap(header(msg_type, (1 << 24) - 1)))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=0, max_size=8))
def test_pull_handshake_header_bounds_every_type(data: bytes) -> None:
    """Hypothesis: a header parses iff its length is within the type's bound; else decode_error."""
    if len(data) < 4:
        assert pull_handshake_header(data) is None
        return
    length = int.from_bytes(data[1:4], "big")
    if length > max_handshake_body(data[0]):
        with pytest.raises(DecodeError):
            pull_handshake_header(data)
    else:
        assert pull_handshake_header(data) == (data[0], length)


@settings(max_examples=200, deadline=None)
@given(msg_type=st.sampled_from(list(HandshakeType)), body=st.binary(max_size=64))
def test_frame_and_pull_handshake_header_round_trip(msg_type: HandshakeType, body: bytes) -> None:
    framed = frame_handshake(msg_type, body)
    if len(body) <= max_handshake_body(msg_type):
        assert pull_handshake_header(framed) == (msg_type, len(body)) and framed[4:] == body
    else:
        with pytest.raises(DecodeError):
            pull_handshake_header(framed)


@settings(max_examples=200, deadline=None)
@given(
    side=st.sampled_from(["server", "client"]),
    msg_type=st.integers(0, 255),
    length=st.integers(0, (1 << 24) - 1),
    fill=st.integers(0, 3000),
    chunk=st.integers(1, 700),
)
def test_streamed_handshake_fragments_stay_bounded(side: str, msg_type: int, length: int, fill: int, chunk: int) -> None:
    """Hypothesis: any header plus part of a body, in any record sizes: a typed alert, or bounded buffering."""
    conn, _ = _server_fresh() if side == "server" else _client_fresh()
    stream = header(msg_type, length) + bytes(min(fill, length))
    try:
        for record in as_records(stream, chunk):
            conn.receive_data(record)
    except RemoteProtocolError as exc:
        assert conn.data_to_send() == fatal_alert(exc.description) and conn.closed
        if length > max_handshake_body(msg_type):
            assert exc.description in (AlertDescription.DECODE_ERROR, AlertDescription.UNEXPECTED_MESSAGE)
        return
    assert len(conn._hs_buffer) <= 4 + max_handshake_body(msg_type)
