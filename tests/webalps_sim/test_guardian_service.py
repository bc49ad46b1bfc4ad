"""The guardian keeps the channel: it answers its application's requests and owns the sequence.

A sans-IO client talks to a :class:`webalps_sim.aio.host.WebALPSServerConnection` whose delegate is a
real :class:`webalps_sim.aio.remote.RemoteDelegate` to a guardian serving on a thread here:

* a request the guardian application claims is answered by the guardian -- the host gets no
  plaintext of it, the channel never carries it in clear -- and a request it does not claim
  reaches the host byte for byte; both answers decrypt at the client, in order;
* the guardian opens only the next client record and seals only the next server record, only
  in the server's direction: a replayed, skipped or client-direction request is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from tests.webalps_sim.guardian_helpers import InProcessGuardian, provision
from tls12.certs import Credentials
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.delegate import KeyHandle, SessionDelegate
from tls12.errors import BadRecordMAC, DecryptError
from tls12.events import ApplicationData, ConnectionClosed
from tls12.record import OutgoingRecord
from tls12.testing import pipe
from webalps_sim import protocol as p
from webalps_sim.aio.host import WEBALPS_SUITES
from webalps_sim.aio.remote import (
    GuardianRefused,
    RecordRejected,
    RemoteDelegate,
    WebALPSServerConnection,
)
from webalps_sim.app import Headers, Response

SECRET_BODY = b"only the guardian and the client read this\n"


class HelloApp:
    """Claims ``/hello``; remembers the bodies it saw."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        if target != "/hello":
            return None
        self.bodies.append(body)
        return 200, [(b"content-type", b"text/plain")], SECRET_BODY


@pytest.fixture()
def channel(tmp_path: Path) -> Iterator[tuple[RemoteDelegate, HelloApp, bytearray]]:
    prov = provision(tmp_path)
    app = HelloApp()
    wire = bytearray()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock", app=app):
        remote = RemoteDelegate(tmp_path / "g.sock", tap=lambda d, b: wire.extend(b))
        yield remote, app, wire
        remote.close()


def _pair(remote: RemoteDelegate) -> tuple[ClientConnection, WebALPSServerConnection]:
    chain = tuple(x509.load_der_x509_certificate(c) for c in remote.chain())
    config = ServerConfig(credentials=Credentials.chain_only(chain), cipher_suites=WEBALPS_SUITES)
    server = WebALPSServerConnection(config, delegate=remote)
    client = ClientConnection(ClientConfig(cipher_suites=(WEBALPS_SUITES[0],)))
    pipe(client, server)
    assert server.handshake_complete
    return client, server


def _data(events: list[object]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, ApplicationData))


def test_claimed_requests_stay_in_the_guardian(channel: tuple[RemoteDelegate, HelloApp, bytearray]
                                               ) -> None:
    remote, app, wire = channel
    assert isinstance(remote, SessionDelegate)
    client, server = _pair(remote)
    claimed = b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nmy password"
    client.send_data(claimed)
    c_events, s_events = pipe(client, server)
    assert _data(s_events) == b""  # the host got nothing of it
    assert app.bodies == [b"my password"]
    answer = _data(c_events)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(SECRET_BODY)
    assert b"server: webalps-guardian" in answer

    other = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
    client.send_data(other)
    _, s_events = pipe(client, server)
    assert _data(s_events) == other  # unclaimed: exactly what the client sent
    server.send_data(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c_events, _ = pipe(client, server)
    assert _data(c_events).endswith(b"\r\n\r\nok")  # the host's seal follows the guardian's

    # a request split over records and a claimed one in the same burst
    client.send_data(b"GET /hel")
    client.send_data(b"lo HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
    c_events, s_events = pipe(client, server)
    assert _data(s_events) == b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
    assert _data(c_events).endswith(SECRET_BODY)
    for plaintext in (b"my password", SECRET_BODY, b"/hello"):
        assert plaintext not in wire

    # an HTTP/1.0 request the guardian answers: the host closes the connection after the answer
    client.send_data(b"GET /hello HTTP/1.0\r\n\r\n")
    c_events, _ = pipe(client, server)
    assert _data(c_events).endswith(SECRET_BODY)
    assert any(isinstance(e, ConnectionClosed) and e.clean for e in c_events)


def test_guardian_owns_sequence_numbers_and_direction(
        channel: tuple[RemoteDelegate, HelloApp, bytearray]) -> None:
    remote, _, _ = channel
    client, server = _pair(remote)
    handle = server.key_handle
    assert isinstance(handle, KeyHandle)
    client.send_data(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    record = client.data_to_send()
    server.receive_data(record)
    # replay the same record at the same sequence number: refused by the guardian
    with pytest.raises(RecordRejected):
        remote.open(handle, True, [(1, 23, 0x0303, record[5:])])
    # and through the connection (now at the next sequence number): bad_record_mac
    with pytest.raises(BadRecordMAC):
        server.receive_data(record)
    client2, server2 = _pair(remote)
    h2 = server2.key_handle
    assert h2 is not None
    with pytest.raises(GuardianRefused, match="seals server records only") as info:
        remote.seal(h2, True, [OutgoingRecord(23, 0x0303, 1, b"forged vote")])
    assert info.value.code == p.ErrorCode.UNSUPPORTED
    with pytest.raises(GuardianRefused) as info:
        remote.seal(h2, False, [OutgoingRecord(23, 0x0303, 0, b"reuses sequence number 0")])
    assert info.value.code == p.ErrorCode.SEQUENCE
    with pytest.raises(GuardianRefused, match="client's Finished only"):
        remote.check_finished(h2, False, b"t" * 32, b"v" * 12)
    with pytest.raises(GuardianRefused, match="server's Finished only"):
        remote.verify_data(h2, True, b"t" * 32)
    # before the client's Finished is verified, no application data either way
    client3 = ClientConnection(ClientConfig(cipher_suites=(WEBALPS_SUITES[0],)))
    server3 = WebALPSServerConnection(server2.config, delegate=remote)
    server3.receive_data(client3.data_to_send())
    client3.receive_data(server3.data_to_send())
    flight = client3.data_to_send_records()  # ClientKeyExchange, CCS, Finished
    server3.receive_data(b"".join(flight[:-1]))  # the Finished is held back
    h3 = server3.key_handle
    assert h3 is not None
    with pytest.raises(GuardianRefused, match="before the client's Finished"):
        remote.seal(h3, False, [OutgoingRecord(23, 0x0303, 0, b"early")])
    with pytest.raises(GuardianRefused, match="own suite"):
        remote.resume(KeyHandle(h3.id, WEBALPS_SUITES[1]), b"c" * 32, b"s" * 32)
    server2.send_data(b"still fine")  # the refusals changed nothing
    c_events, _ = pipe(client2, server2)
    assert _data(c_events) == b"still fine"
    remote.release(h2)
    reply = remote.request(p.VerifyData(h2.id, h2.cipher_suite, False, b"t" * 32))
    assert isinstance(reply, p.Error) and reply.code == p.ErrorCode.UNKNOWN_HANDLE


class RecordingCost:
    """A cost-model hook that records what the guardian charges (the service is under test)."""

    def __init__(self) -> None:
        self.charged: list[tuple[str, int]] = []

    def charge(self, op: str, nbytes: int) -> None:
        self.charged.append((op, nbytes))


def test_every_guardian_operation_is_charged(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    cost = RecordingCost()
    frames = 0

    def count(direction: str, data: bytes) -> None:
        nonlocal frames
        frames += direction == "out"

    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock") as guardian:
        guardian.service.cost = cost
        remote = RemoteDelegate(tmp_path / "g.sock", tap=count)
        client, server = _pair(remote)
        client.send_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        pipe(client, server)
        server.send_data(b"x" * 40000)
        pipe(client, server)
        remote.close()
    ops = [op for op, _ in cost.charged]
    assert ops.count("rsa") == 1 and dict(cost.charged)["rsa"] == 256  # one 2048-bit premaster
    assert ops.count("finished") == 2  # the client's checked, the server's computed
    assert ops.count("transfer") == frames  # one per request frame, HELLO included
    assert sum(n for op, n in cost.charged if op == "seal") >= 40000 + 12
    assert sum(n for op, n in cost.charged if op == "open") > 0


def _frame_tap() -> tuple[list[p.FrameType], object]:
    sent: list[p.FrameType] = []
    decoder = p.FrameDecoder()

    def tap(direction: str, data: bytes) -> None:
        if direction == "out":
            sent.extend(p.FrameType(f.type) for f in decoder.feed(data))

    return sent, tap


def test_a_full_handshake_takes_one_exchange(tmp_path: Path) -> None:
    """The client's flight arrives whole: DERIVE_FINISH alone (it returns the server's Finished
    sealed); a request then costs one OPEN and one SEAL."""
    prov = provision(tmp_path)
    sent, tap = _frame_tap()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock"):
        remote = RemoteDelegate(tmp_path / "g.sock", tap=tap)  # type: ignore[arg-type]
        remote.connect()
        sent.clear()
        client, server = _pair(remote)
        assert sent == [p.FrameType.DERIVE_FINISH]
        client.send_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        _, s_events = pipe(client, server)
        server.send_data(b"after the handshake")
        c_events, _ = pipe(client, server)
        assert _data(s_events) == b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        assert _data(c_events) == b"after the handshake"
        assert sent[1:] == [p.FrameType.OPEN, p.FrameType.SEAL]
        remote.close()


def test_a_split_flight_takes_three_exchanges(tmp_path: Path) -> None:
    """ClientKeyExchange alone, then ChangeCipherSpec + Finished: DERIVE, OPEN, FINISH."""
    prov = provision(tmp_path)
    sent, tap = _frame_tap()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock"):
        remote = RemoteDelegate(tmp_path / "g.sock", tap=tap)  # type: ignore[arg-type]
        client, server = _unfinished_pair(remote)
        flight = client.data_to_send_records()  # ClientKeyExchange, CCS, Finished
        sent.clear()
        assert server.receive_data(flight[0]) == []
        assert server.receive_data(b"".join(flight[1:]))  # HandshakeComplete
        assert sent == [p.FrameType.DERIVE, p.FrameType.OPEN, p.FrameType.FINISH]
        client.receive_data(server.data_to_send())
        assert client.handshake_complete
        server.send_data(b"after the handshake")
        c_events, _ = pipe(client, server)
        assert _data(c_events) == b"after the handshake"
        remote.close()


def _unfinished_pair(remote: RemoteDelegate, client_cls: type[ClientConnection] = ClientConnection
                     ) -> tuple[ClientConnection, WebALPSServerConnection]:
    """Client and host after the hellos: the client's key-exchange flight is queued, unsent."""
    chain = tuple(x509.load_der_x509_certificate(c) for c in remote.chain())
    config = ServerConfig(credentials=Credentials.chain_only(chain), cipher_suites=WEBALPS_SUITES)
    server = WebALPSServerConnection(config, delegate=remote)
    client = client_cls(ClientConfig(cipher_suites=(WEBALPS_SUITES[0],)))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    return client, server


class WrongFinishedClient(ClientConnection):
    """Sends a Finished whose verify_data is off by one bit."""

    def _finished_body(self, from_client: bool) -> bytes:
        body = super()._finished_body(from_client)
        return bytes([body[0] ^ 1]) + body[1:]


def _alert(data: bytes) -> tuple[int, int]:
    """(level, description) of the one plaintext alert record ``data`` holds."""
    assert data[0] == 21 and int.from_bytes(data[3:5], "big") == 2 and len(data) == 7, data
    return data[5], data[6]


@pytest.mark.parametrize("fault", ["wrong verify_data", "tampered record"])
def test_a_bad_finished_in_one_exchange_fails_closed(tmp_path: Path, fault: str) -> None:
    """DERIVE_FINISH with a wrong Finished: the client gets a fatal decrypt_error (wrong
    verify_data) or bad_record_mac (a record that does not open), the guardian keeps nothing,
    and the next connection on the same channel is served as usual."""
    prov = provision(tmp_path)
    sent, tap = _frame_tap()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock") as guardian:
        remote = RemoteDelegate(tmp_path / "g.sock", tap=tap)  # type: ignore[arg-type]
        cls = WrongFinishedClient if fault == "wrong verify_data" else ClientConnection
        client, server = _unfinished_pair(remote, cls)
        flight = client.data_to_send_records()
        if fault == "tampered record":
            last = bytearray(flight[-1])
            last[-1] ^= 1
            flight[-1] = bytes(last)
        sent.clear()
        error = DecryptError if fault == "wrong verify_data" else BadRecordMAC
        with pytest.raises(error):
            server.receive_data(b"".join(flight))
        assert sent == [p.FrameType.DERIVE_FINISH]
        assert _alert(server.data_to_send()) == (2, 51 if error is DecryptError else 20)
        assert server.closed and server.key_handle is None
        service = guardian.service
        assert service._channels == {} and service._delegate._secrets == {}
        client2, server2 = _pair(remote)
        server2.send_data(b"next connection")
        c_events, _ = pipe(client2, server2)
        assert _data(c_events) == b"next connection"
        remote.close()


def test_release_rides_with_the_next_request(tmp_path: Path) -> None:
    """A connection's RELEASE is not sent alone: it goes out just before the next request (the
    guardian then forgets the handle before answering that request), or when the channel closes."""
    prov = provision(tmp_path)
    sent, tap = _frame_tap()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock") as guardian:
        remote = RemoteDelegate(tmp_path / "g.sock", tap=tap)  # type: ignore[arg-type]
        _, server = _pair(remote)
        handle = server.key_handle
        assert handle is not None and handle.id in guardian.service._channels
        sent.clear()
        remote.release(handle)
        assert sent == [] and handle.id in guardian.service._channels
        _, server2 = _pair(remote)
        assert sent == [p.FrameType.RELEASE, p.FrameType.DERIVE_FINISH]
        assert handle.id not in guardian.service._channels
        assert server2.key_handle is not None
        sent.clear()
        remote.release(server2.key_handle)
        remote.close()
        assert sent == [p.FrameType.RELEASE]


def test_a_last_response_and_its_close_notify_take_one_seal(tmp_path: Path) -> None:
    """``send_data`` then ``close`` before the bytes are taken: one SEAL carries the response
    and the close_notify (the guardian seals both, in order); the client reads both."""
    prov = provision(tmp_path)
    sent, tap = _frame_tap()
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock"):
        remote = RemoteDelegate(tmp_path / "g.sock", tap=tap)  # type: ignore[arg-type]
        client, server = _pair(remote)
        client.send_data(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        pipe(client, server)
        sent.clear()
        server.send_data(b"x" * 40000)  # three records
        assert sent == []  # nothing sealed yet
        server.close()
        assert sent == []  # sealed when the bytes are taken
        c_events, _ = pipe(client, server)
        # one SEAL for the records and the close_notify; OPEN: the client's close_notify
        assert sent == [p.FrameType.SEAL, p.FrameType.OPEN]
        assert _data(c_events) == b"x" * 40000
        assert any(isinstance(e, ConnectionClosed) and e.clean for e in c_events)
        # a write on its own is sealed when its bytes are taken, not later
        client2, server2 = _pair(remote)
        sent.clear()
        server2.send_data(b"alone")
        assert server2.data_to_send() and sent == [p.FrameType.SEAL]
        remote.close()
