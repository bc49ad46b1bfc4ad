"""The event-driven delegate seam (tls12.delegation): questions as events, answers by supply().

A connection that asks by event never calls out of ``receive_data``: the tests here hold
answers back, give them in another order, give failures, and check that the connection waits
(buffering what arrives), goes on exactly where it stopped, keeps its output in sequence, and
fails closed with the right alert.  Byte equality with the server that holds its own secrets is
in ``test_delegate.py`` (``events`` mode).
"""

from __future__ import annotations

import random

import pytest

from tls12.certs import Credentials
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.delegate import (
    DelegateRequest,
    EventDelegate,
    LocalDelegate,
)
from tls12.errors import (
    AlertDescription,
    BadRecordMAC,
    InternalError,
    LocalProtocolError,
    RemoteProtocolError,
    UnexpectedMessage,
)
from tls12.events import ApplicationData, ConnectionClosed, DelegateNeeded, HandshakeComplete
from tls12.server_connection import ServerConnection
from tls12.session import InMemorySessionStore
from tls12.suites import SUITES, CipherSuite, KeyExchange
from tls12.testing import AnsweringServer, credentials, pipe, seeded_rng

RSA = next(s for s, p in SUITES.items() if p.block_size and p.key_exchange is KeyExchange.RSA)
ECDHE = next(s for s, p in SUITES.items() if p.block_size and p.key_exchange is KeyExchange.ECDHE_RSA)


def _config(suite: CipherSuite, seed: int = 1, store: InMemorySessionStore | None = None) -> ServerConfig:
    creds = credentials()
    return ServerConfig(credentials=Credentials.chain_only(creds.chain), cipher_suites=(suite,),
                        session_store=store, rng=seeded_rng(seed))


def _delegate(seed: int = 7) -> LocalDelegate:
    return LocalDelegate(credentials().private_key, rng=seeded_rng(seed))


def _event_server(suite: CipherSuite, delegate: LocalDelegate, **kw: object) -> AnsweringServer:
    conn = ServerConnection(_config(suite, **kw), delegate=EventDelegate())  # type: ignore[arg-type]
    return AnsweringServer(conn, delegate)


def _client(suite: CipherSuite, seed: int = 2, **kw: object) -> ClientConnection:
    return ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(seed), **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("suite", [RSA, ECDHE], ids=["rsa", "ecdhe"])
def test_the_connection_waits_for_its_keys_and_buffers_meanwhile(suite: CipherSuite) -> None:
    delegate = _delegate()
    server = _event_server(suite, delegate, seed=1)
    server.hold = lambda r: r.op in ("derive", "derive_finish")
    client = _client(suite)
    pipe(client, server)
    (held,) = server.held
    assert server.waiting_for == held and not server.handshake_complete
    # the client's ChangeCipherSpec and Finished stay buffered, nothing goes out, and more
    # bytes (a split record: its first half) are only buffered too
    assert server.conn._reader.buffered > 0 and server.data_to_send() == b""
    assert server.receive_data(b"\x17\x03") == []
    events = server.answer(held)
    assert any(isinstance(e, HandshakeComplete) for e in server._answered(events))
    assert server.conn._reader.buffered == 2
    c_events, s_events = client.receive_data(server.data_to_send()), []
    assert any(isinstance(e, HandshakeComplete) for e in c_events)
    server.conn._reader._buffer.clear()  # forget the test's half record
    client.send_data(b"after")
    _, s_events = pipe(client, server)
    assert s_events == [ApplicationData(b"after")]


def test_many_connections_answered_in_a_random_order() -> None:
    """Sixteen connections, every question held, then answered in a seeded shuffled order
    across connections, again and again until all are done: every byte arrives intact."""
    delegate = _delegate()
    servers = [_event_server(RSA if i % 2 else ECDHE, delegate, seed=10 + i) for i in range(16)]
    for s in servers:
        s.hold = lambda r: True
    clients = [_client(RSA if i % 2 else ECDHE, seed=100 + i) for i in range(16)]
    rng = random.Random(5)
    done: set[int] = set()
    received: list[list[object]] = [[] for _ in clients]
    for _ in range(40):
        for i, (c, s) in enumerate(zip(clients, servers, strict=True)):
            received[i] += pipe(c, s)[0]
            if c.handshake_complete and i not in done:
                c.send_data(b"request %d" % i)
                done.add(i)
        pending = [(s, r) for s in servers for r in s.held]
        if not pending and len(done) == len(clients) and all(received):
            break
        rng.shuffle(pending)
        for s, r in pending:
            for e in s._answered(s.answer(r)):
                if isinstance(e, ApplicationData):
                    s.send_data(e.data.upper())
    for i, events in enumerate(received):
        assert ApplicationData(b"REQUEST %d" % i) in events, i
    assert all(not s.held for s in servers)


def test_seals_answered_out_of_order_keep_the_output_in_sequence() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    pipe(client, server)
    server.hold = lambda r: r.op == "seal"
    server.send_data(b"first")
    server.data_to_send()
    server.conn.send_data(b"second")  # a second seal question, taken separately
    server.data_to_send()
    first, second = server.held
    assert (first.op, second.op) == ("seal", "seal") and server.unsealed_slots == 2
    server.answer(second)
    assert server.conn.data_to_send() == b""  # the second waits behind the first
    server.answer(first)
    wire = server.conn.data_to_send()
    events = client.receive_data(wire)
    assert events == [ApplicationData(b"first"), ApplicationData(b"second")]


def test_a_skipped_finished_gets_unexpected_message_and_no_open_question() -> None:
    """Application data in place of the client's Finished: ``unexpected_message`` in the
    clear, and the delegate is never asked to open the record (defect 2 of issue 21)."""
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    flight = client.data_to_send()  # ClientKeyExchange, ChangeCipherSpec, Finished
    from tls12.record import split_records

    ends = split_records(flight)
    assert ends is not None and len(ends) == 3
    # replace the Finished record by an application-data record of the same size
    finished = bytearray(flight[ends[1]:])
    finished[0] = 23
    with pytest.raises(UnexpectedMessage) as err:
        server.receive_data(flight[: ends[1]] + bytes(finished))
    assert err.value.description is AlertDescription.UNEXPECTED_MESSAGE
    assert [r.op for r in server.asked] == ["derive"]  # no "open"
    alert = server.conn.data_to_send()
    assert alert[:1] == b"\x15" and alert[-2:] == bytes((2, AlertDescription.UNEXPECTED_MESSAGE))


def test_a_failed_question_ends_the_connection_with_internal_error() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    server.hold = lambda r: r.op in ("derive", "derive_finish")
    client = _client(RSA)
    pipe(client, server)
    (held,) = server.held
    with pytest.raises(InternalError):
        server.conn.supply(held.id, TimeoutError("the guardian did not answer in 2 s"))
    alert = server.conn.data_to_send()
    assert alert == b"\x15\x03\x03\x00\x02\x02" + bytes((AlertDescription.INTERNAL_ERROR,))
    assert server.closed
    assert server.conn.supply(held.id, None) == []  # a late answer is ignored


def test_a_record_the_delegate_cannot_open_is_bad_record_mac() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    pipe(client, server)
    client.send_data(b"one")
    client.send_data(b"two")
    wire = bytearray(client.data_to_send())
    wire[-1] ^= 1  # the second record is bad
    with pytest.raises(BadRecordMAC) as err:
        server.receive_data(bytes(wire))
    assert err.value.events == [ApplicationData(b"one")]  # the good one first
    opens = [len(r.args[2]) for r in server.asked if r.op == "open"]
    assert opens == [2, 1, 1]  # the batch; the first record alone (good); the bad one


def test_unknown_questions_are_refused() -> None:
    server = ServerConnection(_config(RSA), delegate=EventDelegate())
    with pytest.raises(LocalProtocolError):
        server.supply(99, b"")


def test_a_session_the_delegate_lost_is_a_full_handshake() -> None:
    store = InMemorySessionStore()
    delegate = _delegate()
    server = _event_server(RSA, delegate, store=store)
    client = _client(RSA)
    pipe(client, server)
    assert client.session is not None and len(store._sessions) == 1  # type: ignore[attr-defined]
    delegate.release(store.get(client.session.session_id).handle)  # type: ignore[union-attr]
    server2 = _event_server(RSA, delegate, seed=3, store=store)
    client2 = _client(RSA, seed=4, session=client.session)
    c_events, s_events = pipe(client2, server2)
    assert isinstance(s_events[0], HandshakeComplete) and not s_events[0].resumed
    assert [r.op for r in server2.asked][:2] == ["resume", "derive_finish"]
    assert isinstance(c_events[0], HandshakeComplete) and not c_events[0].resumed
    assert client2.session is not None and client2.session.session_id != client.session.session_id


def test_resumption_by_event() -> None:
    store = InMemorySessionStore()
    delegate = _delegate()
    server = _event_server(RSA, delegate, store=store)
    client = _client(RSA)
    pipe(client, server)
    server2 = _event_server(RSA, delegate, seed=3, store=store)
    client2 = _client(RSA, seed=4, session=client.session)
    _, s_events = pipe(client2, server2)
    assert s_events[0].resumed  # type: ignore[attr-defined]
    assert [r.op for r in server2.asked][:3] == ["resume", "verify_data", "seal"]
    client2.send_data(b"again")
    _, s_events = pipe(client2, server2)
    assert s_events == [ApplicationData(b"again")]


def test_the_ephemeral_private_key_stays_in_the_delegate() -> None:
    delegate = _delegate()
    server = _event_server(ECDHE, delegate)
    client = _client(ECDHE)
    asked: list[DelegateRequest] = []
    server.hold = lambda r: asked.append(r) or False  # type: ignore[func-returns-value]
    pipe(client, server)
    assert asked[0].op == "ephemeral"
    (ephemeral_private,) = [priv for _, priv in delegate._ephemerals.values()] or [None]
    assert ephemeral_private is None  # used once, then forgotten by the delegate
    assert server.handshake_complete and server.context.ecdhe_private in (None, b"")


def test_a_connection_closed_by_the_peer_while_waiting_ignores_the_answer() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    server.hold = lambda r: r.op in ("derive", "derive_finish")
    client = _client(RSA)
    pipe(client, server)
    events = server.receive_data(b"")
    assert events == [ConnectionClosed(clean=False)]
    (held,) = server.held
    assert server.answer(held) == []


def test_a_remote_protocol_error_answer_is_its_own_alert() -> None:
    from tls12.errors import IllegalParameter

    delegate = _delegate()
    server = _event_server(ECDHE, delegate)
    server.hold = lambda r: r.op in ("derive", "derive_finish")
    client = _client(ECDHE)
    pipe(client, server)
    (held,) = server.held
    with pytest.raises(RemoteProtocolError) as err:
        server.conn.supply(held.id, IllegalParameter("invalid ECDH public value"))
    assert err.value.description is AlertDescription.ILLEGAL_PARAMETER
    assert server.conn.data_to_send()[-1] == AlertDescription.ILLEGAL_PARAMETER


def test_delegate_needed_events_carry_every_question_once() -> None:
    delegate = _delegate()
    conn = ServerConnection(_config(RSA), delegate=EventDelegate())
    client = _client(RSA)
    events = conn.receive_data(client.data_to_send())
    assert events == []  # RSA: the first flight needs no delegate
    client.receive_data(conn.data_to_send())
    events = conn.receive_data(client.data_to_send())
    (needed,) = events
    assert isinstance(needed, DelegateNeeded) and needed.request.op == "derive_finish"
    assert conn.take_requests() == []
    events = conn.supply(needed.request.id, needed.request.call(delegate))
    # the whole flight was one question; what remains is sealing our Finished
    assert [e.request.op for e in events if isinstance(e, DelegateNeeded)] == ["seal"]
    assert any(isinstance(e, HandshakeComplete) for e in events)


# --- what the mutation run found unchecked (mutation/groups/tls12.toml) ---------------------


@pytest.mark.parametrize("mode", ["inline", "events"])
def test_a_wrong_client_finished_is_decrypt_error_with_its_message(mode: str) -> None:
    """The flight's ``None`` (a Finished the delegate found wrong), inline and by event."""
    from tls12.errors import DecryptError

    class WrongFinished(LocalDelegate):
        def derive_finish(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
            super().derive_finish(*args, **kwargs)  # type: ignore[arg-type]
            return None

    delegate = WrongFinished(credentials().private_key, rng=seeded_rng(7))
    if mode == "events":
        server: object = _event_server(RSA, delegate)
    else:
        server = ServerConnection(_config(RSA), delegate=delegate)
    with pytest.raises(DecryptError, match="^Finished verify_data mismatch$"):
        pipe(_client(RSA), server)  # type: ignore[arg-type]


def test_a_check_finished_without_finish_says_what_failed() -> None:
    """A delegate without the one-call forms: ``derive``, ``open``, ``check_finished``, then
    ``verify_data``; a client Finished it finds wrong is ``decrypt_error``."""
    from tls12.errors import DecryptError

    delegate = _delegate()
    server = AnsweringServer(ServerConnection(_config(RSA), delegate=EventDelegate(set())), delegate)
    server.hold = lambda r: r.op == "check_finished"
    pipe(_client(RSA), server)
    (check,) = server.held
    assert [r.op for r in server.asked] == ["derive", "open", "check_finished"]
    with pytest.raises(DecryptError, match="^Finished verify_data mismatch$"):
        server.conn.supply(check.id, False)


def test_failed_answers_name_their_cause() -> None:
    from tls12.delegation import unwrap

    with pytest.raises(BadRecordMAC, match="^bad record MAC$"):
        unwrap(ValueError("no"), record=True)
    # a ValueError to a question about keys is our failure, not the peer's record
    with pytest.raises(InternalError, match="^the delegate failed: ValueError"):
        unwrap(ValueError("no"))
    with pytest.raises(InternalError, match="^the delegate failed: TimeoutError"):
        unwrap(TimeoutError("2 s"))
    server = ServerConnection(_config(RSA), delegate=EventDelegate())
    with pytest.raises(LocalProtocolError, match="^no question 99 is waiting for an answer$"):
        server.supply(99, b"")


def test_a_derive_answered_with_value_error_is_internal_error() -> None:
    """Only a record question's ``ValueError`` is ``bad_record_mac`` (``derive`` has none)."""
    delegate = _delegate()
    server = AnsweringServer(ServerConnection(_config(RSA), delegate=EventDelegate(set())), delegate)
    server.hold = lambda r: r.op == "derive"
    pipe(_client(RSA), server)
    (held,) = server.held
    with pytest.raises(InternalError):
        server.conn.supply(held.id, ValueError("the delegate could not parse it"))
    assert server.conn.data_to_send()[-1] == AlertDescription.INTERNAL_ERROR


def test_a_seal_that_fails_closes_the_connection() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    pipe(_client(RSA), server)
    server.hold = lambda r: r.op == "seal"
    server.send_data(b"response")
    server.data_to_send()
    (seal,) = server.held
    with pytest.raises(InternalError, match="^the delegate could not seal: "):
        server.conn.supply(seal.id, TimeoutError("no answer"))
    assert server.conn.closed and server.conn.data_to_send() == b""


def test_bytes_queued_behind_a_seal_keep_what_went_before() -> None:
    """Records the delegate sealed by itself (``queue_sealed``) wait behind an unanswered seal
    and are appended after it, never in place of output already waiting to be taken."""
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    pipe(client, server)
    server.hold = lambda r: r.op == "seal"
    server.send_data(b"first")
    server.data_to_send()
    (seal,) = server.held
    conn = server.conn
    conn.queue_sealed(b"\x17\x03\x03\x00\x01X", 0)  # held behind the seal
    assert conn.data_to_send() == b""
    server.answer(seal)
    out = conn.data_to_send()
    assert out.endswith(b"\x17\x03\x03\x00\x01X") and len(out) > 6


def test_the_transition_of_a_message_that_waited_is_traced_with_its_type() -> None:
    from tls12.messages import HandshakeType

    delegate = _delegate()
    config = _config(RSA)
    conn = ServerConnection(config, delegate=EventDelegate())
    conn.enable_trace()
    server = AnsweringServer(conn, delegate)
    server.hold = lambda r: r.op == "derive_finish"
    pipe(_client(RSA), server)
    (held,) = server.held
    conn.take_trace()
    server.answer(held)
    inputs = [e.data["input"] for e in conn.take_trace() if e.name == "transition"]
    assert inputs[0] == HandshakeType.CLIENT_KEY_EXCHANGE


def test_a_protected_record_of_another_version_is_protocol_version() -> None:
    from tls12.errors import ProtocolVersionError

    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    pipe(client, server)
    client.send_data(b"x")
    wire = bytearray(client.data_to_send())
    wire[2] = 0x01  # TLS 1.0 in the record header
    with pytest.raises(ProtocolVersionError, match="^record version 0x0301$"):
        server.receive_data(bytes(wire))
    assert not [r for r in server.asked if r.op == "open" and r.args[2][0][3] == bytes(wire[5:])]


def test_the_skipped_finished_error_names_the_record_and_state() -> None:
    delegate = _delegate()
    server = _event_server(RSA, delegate)
    client = _client(RSA)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    flight = client.data_to_send()
    from tls12.record import split_records

    ends = split_records(flight)
    assert ends is not None
    finished = bytearray(flight[ends[1]:])
    finished[0] = 23
    with pytest.raises(UnexpectedMessage, match="^application data in state expect_finished$"):
        server.receive_data(flight[: ends[1]] + bytes(finished))
