"""The host<->guardian protocol: codecs round-trip, the parser is fuzzed, bad frames get errors.

Hypothesis feeds the frame decoder, every message decoder and the whole guardian service
arbitrary bytes: the only failure allowed is :class:`webalps_sim.protocol.ProtocolError`, and the
service always answers with a well-formed frame.  Against a live guardian process, a malformed
frame gets an ``ERROR`` reply and closes that connection while another connection keeps working.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webalps_sim.guardian_helpers import GuardianProcess, InProcessGuardian, provision
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.aio.remote import GuardianUnavailable, RemoteDelegate
from webalps_sim.service import GuardianService

EXAMPLES = [
    p.Hello(),
    p.Info((b"\x30\x03abc", b"\x30\x01x"), b"m" * 32, "evoting", b"r" * 16),
    p.Derive(b"e" * 256, 0x0303, b"c" * 32, b"s" * 32, 0x002F, None),
    p.Derive(b"e" * 128, 0x0303, b"c" * 32, b"s" * 32, 0x0035, b"h" * 32),
    p.Resume(7, 0x002F, b"c" * 32, b"s" * 32),
    p.VerifyData(1, 0x002F, False, b"t" * 32),
    p.CheckFinished(1, 0x003C, True, b"t" * 32, b"v" * 12),
    p.Seal(3, 0x002F, False, ((23, 0x0303, 5, b"hello"), (23, 0x0303, 6, b""))),
    p.Open(3, 0x002F, True, ((9, 23, 0x0303, b"x" * 100),)),
    p.Release(3),
    p.Finish(3, 0x002F, b"c" * 32, b"v" * 12, b"s" * 32, 0x0303),
    p.FinishReply(True, b"v" * 12, 0, b"\x16\x03\x03\x00\x01z"),
    p.FinishReply(False),
    p.HandleReply(3, 0x002F),
    p.DataReply(b"v" * 12),
    p.BoolReply(True),
    p.Sealed(b"\x17\x03\x03\x00\x01z"),
    p.Opened((b"GET / HTTP/1.1\r\n\r\n", b""), 2, b"records"),
    p.Opened((), 1, b"r", True),
    p.Ok(),
    p.Error(p.ErrorCode.SEQUENCE, "sequence 4, expected 3"),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: object) -> None:
    frame = p.message_frame(message, 0xDEADBEEF)
    frames = p.FrameDecoder().feed(frame)
    assert len(frames) == 1 and frames[0].request_id == 0xDEADBEEF
    decoded = p.decode_message(frames[0])
    assert decoded == message
    assert p.message_frame(decoded, 0xDEADBEEF) == frame


def test_frames_split_anywhere_decode_the_same() -> None:
    stream = b"".join(p.message_frame(m, i) for i, m in enumerate(EXAMPLES))
    for cut in (1, 3, 8, 9, 100):
        decoder = p.FrameDecoder()
        frames = [f for i in range(0, len(stream), cut) for f in decoder.feed(stream[i : i + cut])]
        assert [p.decode_message(f) for f in frames] == EXAMPLES


def test_trailing_bytes_and_bad_headers_are_protocol_errors() -> None:
    frame = p.message_frame(p.Release(1), 5)
    padded = p.encode_frame(p.FrameType.RELEASE, 5, frame[9:] + b"\x00")
    with pytest.raises(p.ProtocolError, match="trailing") as info:
        p.decode_message(p.FrameDecoder().feed(padded)[0])
    assert info.value.request_id == 5
    with pytest.raises(p.ProtocolError, match="length"):
        p.FrameDecoder().feed(b"\xff\xff\xff\xff\x01\x00\x00\x00\x01")
    with pytest.raises(p.ProtocolError, match="unknown frame type"):
        p.FrameDecoder().feed(b"\x00\x00\x00\x05\x42\x00\x00\x00\x01")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_frame_decoder(data: bytes) -> None:
    decoder = p.FrameDecoder()
    try:
        for frame in decoder.feed(data):
            p.decode_message(frame)
    except p.ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(p.MESSAGES)), st.binary(max_size=200))
def test_fuzz_every_message_decoder(frame_type: int, payload: bytes) -> None:
    try:
        message = p.decode_message(p.Frame(frame_type, 1, payload))
    except p.ProtocolError:
        return
    assert p.decode_message(p.Frame(frame_type, 1, message.to_payload())) == message


@pytest.fixture(scope="module")
def service() -> GuardianService:
    creds = credentials()
    return GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(p.MESSAGES)), st.binary(max_size=200))
def test_fuzz_the_guardian_service(service: GuardianService, frame_type: int, payload: bytes) -> None:
    """Whatever the host sends, the guardian answers with one well-formed frame."""
    reply = service.handle_frame(p.Frame(frame_type, 77, payload))
    frames = p.FrameDecoder().feed(reply)
    assert len(frames) == 1 and frames[0].request_id == 77
    message = p.decode_message(frames[0])
    if frame_type >= 0x80:  # a reply type sent as a request
        assert isinstance(message, p.Error) and message.code == p.ErrorCode.UNSUPPORTED


def _exchange(sock: socket.socket, data: bytes) -> list[object]:
    sock.sendall(data)
    decoder = p.FrameDecoder()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return []
        frames = decoder.feed(chunk)
        if frames:
            return [p.decode_message(f) for f in frames]


def test_malformed_frame_gets_an_error_and_the_guardian_keeps_serving(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    path = tmp_path / "guardian.sock"
    with GuardianProcess(prov.state_dir, path):
        good = socket.socket(socket.AF_UNIX)
        bad = socket.socket(socket.AF_UNIX)
        good.connect(str(path))
        bad.connect(str(path))
        try:
            (info,) = _exchange(good, p.message_frame(p.Hello(), 1))
            assert isinstance(info, p.Info) and info.app == "null"
            # a well-framed but malformed message: error reply, connection stays
            (error,) = _exchange(bad, p.encode_frame(p.FrameType.DERIVE, 2, b"\x03"))
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.MALFORMED
            (error,) = _exchange(bad, p.message_frame(p.VerifyData(99, 0x2F, False, b"t" * 32), 3))
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.UNKNOWN_HANDLE
            # broken framing: error reply, then that connection is closed
            (error,) = _exchange(bad, b"\x7f\xff\xff\xff\x01\x00\x00\x00\x04")
            assert isinstance(error, p.Error) and error.code == p.ErrorCode.MALFORMED
            assert bad.recv(100) == b""
            (again,) = _exchange(good, p.message_frame(p.Hello(), 5))
            assert again == info
        finally:
            good.close()
            bad.close()


@pytest.fixture(scope="module")
def live_guardian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("fuzz-guardian")
    prov = provision(tmp)
    with InProcessGuardian(prov.state_dir, tmp / "g.sock"):
        yield tmp / "g.sock"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=400))
def test_fuzz_the_guardian_server(live_guardian: Path, junk: bytes) -> None:
    """Random bytes on one connection: whatever happens there, a fresh connection is served."""
    with socket.socket(socket.AF_UNIX) as bad:
        bad.settimeout(5)
        bad.connect(str(live_guardian))
        bad.sendall(junk)
        bad.shutdown(socket.SHUT_WR)
        replies = b""
        while chunk := bad.recv(65536):
            replies += chunk
        for frame in p.FrameDecoder().feed(replies):  # every reply is a well-formed frame
            p.decode_message(frame)
    with socket.socket(socket.AF_UNIX) as good:
        good.settimeout(5)
        good.connect(str(live_guardian))
        (info,) = _exchange(good, p.message_frame(p.Hello(), 1))
        assert isinstance(info, p.Info)


def test_server_answers_a_burst_in_order_and_close_ends_every_connection(tmp_path: Path) -> None:
    """Frames sent together are answered together, in order; ``close()`` ends the host
    connections (their next call fails as a lost guardian) and the threads."""
    prov = provision(tmp_path)
    path = tmp_path / "g.sock"
    guardian = InProcessGuardian(prov.state_dir, path).__enter__()
    remote = RemoteDelegate(path)
    try:
        remote.connect()
        with socket.socket(socket.AF_UNIX) as raw:
            raw.settimeout(5)
            raw.connect(str(path))
            burst = b"".join(p.message_frame(m, i) for i, m in
                             enumerate([p.Hello(), p.Release(7), p.Hello()], 1))
            raw.sendall(burst)
            replies: list[p.Frame] = []
            decoder = p.FrameDecoder()
            while len(replies) < 3:
                replies += decoder.feed(raw.recv(65536))
            assert [(f.request_id, f.type) for f in replies] == [
                (1, p.FrameType.INFO), (2, p.FrameType.OK), (3, p.FrameType.INFO)]
    finally:
        guardian.__exit__(None, None, None)
    server = guardian._server
    assert server is not None and not any(t.is_alive() for t in server._threads)
    with pytest.raises(GuardianUnavailable):
        remote.derive(b"\x00" * 256, 0x0303, b"c" * 32, b"s" * 32, 0x002F, None)


def test_a_silent_guardian_times_out(tmp_path: Path) -> None:
    """The channel's timeout is the kernel's (``SO_RCVTIMEO`` on a blocking socket): a guardian
    that accepts and never answers makes the call fail as a lost guardian, not hang."""
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen(1)
        remote = RemoteDelegate(path, timeout=0.3)
        start = time.monotonic()
        with pytest.raises(GuardianUnavailable, match="channel lost"):
            remote.connect()
        assert 0.25 < time.monotonic() - start < 10
    with pytest.raises(ValueError):
        RemoteDelegate(path, timeout=0)
