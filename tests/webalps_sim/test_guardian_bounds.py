"""The guardian's bounds (issue 21, defect 5): connections, frame size, sessions, ephemeral keys.

Each limit is a constructor argument and a flag of ``python -m webalps_sim.guardian``; over a
limit the guardian answers ``ERROR`` (``LIMIT``) or forgets the oldest handle, and goes on
serving everyone else.  The process-level checks read the guardian child's
``/proc/PID/status``: 20 connections that announce 4 MiB frames do not raise its RSS by more
than a few MB (before the fix: 38 -> 127 MB), and 300 idle host connections are served by one
thread (before: 303 threads).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.webalps_sim.raw_guardian import (
    GuardianChild,
    RawGuardian,
    RsaSession,
    proc_status,
    provision_small_key,
)
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.aio.guardian import GuardianServer, main
from webalps_sim.identity import load_identity
from webalps_sim.service import GuardianService

X25519, RSA_PKCS1_SHA256, ECDHE_SUITE = 0x001D, 0x0401, 0xC013


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A certified guardian's state directory (shared by this module's guardian processes)."""
    return provision_small_key(tmp_path_factory.mktemp("bounds"))


@pytest.fixture()
def sock(tmp_path: Path) -> Path:
    return tmp_path / "g.sock"


def _guardian(state: Path, sock: Path, *args: str) -> GuardianChild:
    return GuardianChild(state, sock, *args)


def _header(length: int, request_id: int = 9) -> bytes:
    return p.HEADER.pack(length, p.FrameType.SEAL, request_id)


# -- host connections --------------------------------------------------------------------------


def test_one_connection_over_the_limit_gets_limit_and_the_others_are_served(
        state: Path, sock: Path) -> None:
    with _guardian(state, sock, "--max-connections", "3"):
        first = [RawGuardian(sock, timeout=10) for _ in range(3)]
        for raw in first:  # each accepted and served
            assert isinstance(raw.request(p.Hello()), p.Info)
        with RawGuardian(sock, timeout=10) as extra:
            (frame,) = extra.frames(1)
            error = p.decode_message(frame)
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.LIMIT
            assert "3 host connections" in error.message
            assert extra.closed_by_guardian()
        for raw in first:  # the first three are still served
            assert isinstance(raw.request(p.Hello()), p.Info)
        first[0].close()  # a place frees up: the next connection is served
        deadline = time.monotonic() + 10
        while True:
            with RawGuardian(sock, timeout=10) as again:
                reply = again.request(p.Hello())
            if isinstance(reply, p.Info) or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # the guardian may not have seen the close yet
        assert isinstance(reply, p.Info)
        for raw in first[1:]:
            raw.close()


def test_300_idle_connections_are_served_by_one_thread(state: Path, sock: Path) -> None:
    with _guardian(state, sock, "--max-connections", "400") as guardian:
        pid = guardian.pid
        before = proc_status(pid, "Threads")
        conns = [RawGuardian(sock, timeout=10) for _ in range(300)]
        try:
            for raw in conns[::25] + conns[-1:]:  # all accepted (in order) and served
                assert isinstance(raw.request(p.Hello()), p.Info)
            threads = proc_status(pid, "Threads")
            assert threads <= 3 and threads <= before + 1, (before, threads)
        finally:
            for raw in conns:
                raw.close()


def test_a_host_that_does_not_read_its_replies_does_not_stall_the_others(
        state: Path, sock: Path) -> None:
    """The one loop never blocks on a slow reader: that connection is not read until its
    replies are written, and another connection is answered at once."""
    with _guardian(state, sock) as guardian:
        flood = socket.socket(socket.AF_UNIX)
        flood.connect(str(sock))
        flood.setblocking(False)
        request = p.message_frame(p.Hello(), 1) * 1000  # about 2 MB of INFO replies
        sent = 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # as much as the kernel takes, never reading
            try:
                sent += flood.send(request[sent % len(request):])
            except BlockingIOError:
                time.sleep(0.05)
        rss = proc_status(guardian.pid, "VmRSS")
        with RawGuardian(sock, timeout=3) as other:
            start = time.monotonic()
            assert isinstance(other.request(p.Hello()), p.Info)
            assert time.monotonic() - start < 1.0
        assert proc_status(guardian.pid, "VmRSS") < rss + 8 * 1024
        flood.close()


def test_pipelined_requests_in_one_write_are_all_answered_in_order(
        state: Path, sock: Path) -> None:
    with _guardian(state, sock), RawGuardian(sock) as raw:
        messages: list[p.Message] = [p.Hello() if i % 3 == 0 else p.Release(10_000 + i)
                                     for i in range(600)]
        replies = raw.pipeline(messages)  # request ids checked in order
        assert [type(r) for r in replies] == [p.Info if i % 3 == 0 else p.Ok
                                              for i in range(600)]
        # a frame cut across two writes
        frame = p.message_frame(p.Hello(), 77)
        raw.send_raw(frame[:6])
        time.sleep(0.05)
        raw.send_raw(frame[6:])
        (reply,) = raw.frames(1)
        assert reply.request_id == 77 and reply.type == p.FrameType.INFO


# -- frame size --------------------------------------------------------------------------------


def test_a_frame_header_over_the_limit_is_refused_at_once(state: Path, sock: Path) -> None:
    """No body sent: the header alone gets LIMIT and the connection closes."""
    with _guardian(state, sock):
        with RawGuardian(sock, timeout=5) as raw:
            raw.send_raw(_header(4 << 20, request_id=41))
            (frame,) = raw.frames(1)
            error = p.decode_message(frame)
            assert frame.request_id == 41
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.LIMIT, error
            assert raw.closed_by_guardian()
        with RawGuardian(sock, timeout=5) as raw:  # beyond the protocol's maximum: malformed
            raw.send_raw(_header((4 << 20) + 1))
            (frame,) = raw.frames(1)
            error = p.decode_message(frame)
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.MALFORMED
        with RawGuardian(sock, timeout=5) as raw:
            assert isinstance(raw.request(p.Hello()), p.Info)


def _send_some(raw: RawGuardian, data: bytes) -> None:
    try:
        raw.send_raw(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the guardian closed it first: what the test wants


def test_20_connections_announcing_4_mib_cost_no_memory(state: Path, sock: Path) -> None:
    with _guardian(state, sock) as guardian:
        pid = guardian.pid
        with RawGuardian(sock) as warm:
            warm.request(p.Hello())
        before = proc_status(pid, "VmRSS")
        conns = [RawGuardian(sock, timeout=5) for _ in range(20)]
        for raw in conns:
            _send_some(raw, _header(4 << 20) + b"\x00" * (256 << 10))
        for raw in conns:
            (frame,) = raw.frames(1)
            assert p.decode_message(frame).code == p.ErrorCode.LIMIT  # type: ignore[attr-defined]
            raw.close()
        assert proc_status(pid, "VmRSS") - before < 4 * 1024  # KiB


def test_a_configured_frame_limit_bounds_each_connection(state: Path, sock: Path) -> None:
    """``--max-frame-bytes 65536``: a frame of exactly that size is read and answered, one byte
    more is refused; 20 connections holding partial frames just under it buffer at most that."""
    with _guardian(state, sock, "--max-frame-bytes", "65536") as guardian:
        pid = guardian.pid
        payload_room = 65536 - 5
        with RawGuardian(sock) as raw:
            big = p.Open(1, 0x2F, True, ((0, 23, 0x0303, b"x" * (payload_room - 13 - 14)),))
            assert len(big.to_payload()) == payload_room
            reply = raw.request(big)
            assert isinstance(reply, p.Error) and reply.code == p.ErrorCode.UNKNOWN_HANDLE
            raw.send_raw(_header(65537))
            (frame,) = raw.frames(1)
            assert p.decode_message(frame).code == p.ErrorCode.LIMIT  # type: ignore[attr-defined]
        before = proc_status(pid, "VmRSS")
        held = [RawGuardian(sock, timeout=5) for _ in range(20)]
        for raw in held:
            raw.send_raw(_header(65536) + b"\x00" * 60000)  # held, waiting for the rest
        with RawGuardian(sock, timeout=5) as other:
            assert isinstance(other.request(p.Hello()), p.Info)
        assert proc_status(pid, "VmRSS") - before < 4 * 1024
        for raw in held:
            raw.close()


# -- sessions and ephemeral keys (the sans-IO service, with an injected clock) -------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def clock() -> Clock:
    return Clock()


def _service(clock: Clock, **bounds: object) -> GuardianService:
    creds = credentials()
    return GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32, clock=clock,
                           **bounds)  # type: ignore[arg-type]


def _session(service: GuardianService) -> RsaSession:
    session = RsaSession(credentials().private_key.public_key())
    reply = service.handle(session.derive())
    assert isinstance(reply, p.HandleReply)
    assert service.handle(session.finish(reply.handle_id)).ok  # type: ignore[attr-defined]
    return session


def _alive(service: GuardianService, session: RsaSession) -> bool:
    """Whether the guardian still serves the session (a request that needs its keys)."""
    (frame,) = p.FrameDecoder().feed(p.message_frame(session.open_request(b"ping"), 3))
    (reply,) = p.FrameDecoder().feed(service.handle_frame(frame))
    message = p.decode_message(reply)
    if isinstance(message, p.Error):
        assert message.code == p.ErrorCode.UNKNOWN_HANDLE, message
        session.client_seq -= 1
        return False
    assert isinstance(message, p.Opened) and message.plaintexts == (b"ping",)
    return True


def test_sessions_beyond_the_limit_evict_the_least_recently_used(clock: Clock) -> None:
    service = _service(clock, max_sessions=3)
    a, b, c = (_session(service) for _ in range(3))
    assert _alive(service, a)  # a is now more recent than b and c
    d = _session(service)  # one too many: b, the least recently used, goes
    assert [_alive(service, s) for s in (a, b, c, d)] == [True, False, True, True]
    assert service._channels.evicted == 1
    assert b.handle_id not in service._delegate._secrets  # its secrets are freed
    assert len(service._delegate._secrets) == 3


def test_an_idle_session_expires(clock: Clock) -> None:
    service = _service(clock, session_lifetime=60.0)
    idle, busy = _session(service), _session(service)
    for _ in range(3):
        clock.now += 40
        assert _alive(service, busy)  # used every 40 s: stays
    assert not _alive(service, idle)  # 120 s idle: gone, secrets freed
    assert idle.handle_id not in service._delegate._secrets
    assert service._channels.expired == 1 and service.holds() == 1


def test_pending_ephemeral_keys_are_bounded(clock: Clock) -> None:
    service = _service(clock, max_sessions=100, max_ephemerals=2, session_lifetime=30.0)

    def ephemeral() -> int:
        reply = service.handle(p.Ephemeral(X25519, RSA_PKCS1_SHA256, b"c" * 32, b"s" * 32,
                                           ECDHE_SUITE))
        assert isinstance(reply, p.EphemeralReply)
        return reply.handle_id

    first, second, third = ephemeral(), ephemeral(), ephemeral()
    assert list(service._ephemerals) == [second, third]
    assert set(service._delegate._ephemerals) == {second, third}  # the first one is freed
    point = b"\x09" + b"\x00" * 31  # x25519's base point: a valid public key
    derive = p.Derive(point, 0x0303, b"c" * 32, b"s" * 32, ECDHE_SUITE, None, first)
    with pytest.raises(Exception, match="unknown ephemeral key") as info:
        service.handle(derive)
    assert info.value.code == p.ErrorCode.UNKNOWN_HANDLE  # type: ignore[attr-defined]
    clock.now += 31  # never used: they expire too
    assert service._ephemerals.expire() == 2 and not service._delegate._ephemerals


def test_the_command_line_sets_the_session_bounds(state: Path, sock: Path) -> None:
    """``--max-sessions`` and ``--session-lifetime`` reach the service (the real clock)."""
    public = load_identity(state, "null")[0].public_key()
    with _guardian(state, sock, "--max-sessions", "2", "--session-lifetime", "1.5"), \
            RawGuardian(sock) as raw:
        sessions = []
        for _ in range(3):
            session = RsaSession(public)
            handle = raw.request(session.derive())
            assert isinstance(handle, p.HandleReply)
            assert raw.request(session.finish(handle.handle_id)).ok  # type: ignore[attr-defined]
            sessions.append(session)
        first = raw.request(sessions[0].open_request(b"x"))
        assert isinstance(first, p.Error) and first.code == p.ErrorCode.UNKNOWN_HANDLE
        assert isinstance(raw.request(sessions[2].open_request(b"x")), p.Opened)
        time.sleep(1.8)
        late = raw.request(sessions[2].open_request(b"x"))
        assert isinstance(late, p.Error) and late.code == p.ErrorCode.UNKNOWN_HANDLE


@pytest.mark.parametrize("flag, value", [("--max-connections", "0"), ("--max-frame-bytes", "4"),
                                         ("--max-frame-bytes", str((4 << 20) + 1)),
                                         ("--max-sessions", "0"), ("--session-lifetime", "0")])
def test_a_bound_out_of_range_is_a_usage_error(state: Path, sock: Path, flag: str,
                                               value: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--state-dir", str(state), "--listen", str(sock), flag, value])
    assert info.value.code == 2


class HugeApp:
    """A guardian application whose answer does not fit in one frame (a bug of the app)."""

    def handle(self, method: str, target: str, headers: object, body: bytes) -> object:
        if target != "/huge":
            return None
        return 200, [], b"h" * (5 << 20)


def test_a_request_the_service_fails_on_is_answered_internal_and_the_rest_goes_on(
        tmp_path: Path) -> None:
    """An exception in the service (here: a reply too large for a frame) answers that request
    ``INTERNAL``; the connection, its other sessions and the other connections are served on."""
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32,
                              app=HugeApp(), app_name="huge")  # type: ignore[arg-type]
    server = GuardianServer(service, tmp_path / "g.sock").start()
    try:
        with RawGuardian(tmp_path / "g.sock") as raw, RawGuardian(tmp_path / "g.sock") as other:
            sessions = []
            for _ in range(2):
                session = RsaSession(creds.private_key.public_key())
                handle = raw.request(session.derive())
                assert isinstance(handle, p.HandleReply)
                assert raw.request(session.finish(handle.handle_id)).ok  # type: ignore[attr-defined]
                sessions.append(session)
            get = b"GET /huge HTTP/1.1\r\nHost: x\r\n\r\n"
            replies = raw.pipeline([sessions[0].open_request(get), p.Hello()])
            assert isinstance(replies[0], p.Error) and replies[0].code == p.ErrorCode.INTERNAL
            assert isinstance(replies[1], p.Info)  # the next request in the same read
            opened = raw.request(sessions[1].open_request(b"GET /x HTTP/1.1\r\n\r\n"))
            assert isinstance(opened, p.Opened)  # the connection's other session still works
            assert isinstance(other.request(p.Hello()), p.Info)
    finally:
        server.close()
