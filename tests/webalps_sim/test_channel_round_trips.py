"""What the host's channel does per round trip (:mod:`webalps_sim.aio.channel`).

* an answer reaches the connection's stream in the step that read its reply (no extra
  event-loop step), and a task awaiting it still wakes as from any future;
* ``RELEASE`` rides in the write of the next request, goes alone after ``RELEASE_DELAY``
  when no request comes, and at once when ``MAX_DEFERRED`` wait;
* a question the guardian does not answer fails after ``timeout``, each at its own deadline,
  with one timer for the channel;
* the channel counts the bytes it sent and read.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tls12.delegate import DelegateRequest, KeyHandle
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.aio import channel as ch
from webalps_sim.aio.guardian import GuardianServer
from webalps_sim.questions import GuardianUnavailable, HandleLost
from webalps_sim.service import GuardianService

UNKNOWN = KeyHandle(12345, 0x002F)


def _question(n: int = 0) -> DelegateRequest:
    """A real round trip without a handshake: the guardian answers ``UNKNOWN_HANDLE``."""
    return DelegateRequest(n, "verify_data", (UNKNOWN, False, b"t" * 32))


@pytest.fixture()
def sock(tmp_path: Path) -> Iterator[Path]:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    server = GuardianServer(service, tmp_path / "g.sock").start()
    yield tmp_path / "g.sock"
    server.close()


class _Tap:
    def __init__(self) -> None:
        self.writes: list[list[p.FrameType]] = []
        self._decoder = p.FrameDecoder()

    def __call__(self, direction: str, data: bytes) -> None:
        if direction == "out":
            self.writes.append([p.FrameType(f.type) for f in self._decoder.feed(data)])


def test_an_answer_reaches_the_stream_in_the_step_that_read_it(sock: Path) -> None:
    async def run() -> list[str]:
        channel = ch.GuardianChannel(sock)
        await channel.connect()
        order: list[str] = []
        proto = channel._proto
        assert proto is not None
        read = proto.buffer_updated

        def buffer_updated(nbytes: int) -> None:
            read(nbytes)
            order.append("read")

        proto.buffer_updated = buffer_updated  # type: ignore[method-assign]
        future = channel.ask(_question())
        future.add_done_callback(lambda done: order.append(type(done.result()).__name__))
        assert isinstance(await channel.answer(_question(1)), HandleLost)  # a task wakes too
        channel.close()
        return order

    order = asyncio.run(run())
    assert order[:2] == ["HandleLost", "read"], order


def test_release_rides_with_the_next_request(sock: Path) -> None:
    async def run() -> tuple[list[list[p.FrameType]], ...]:
        tap = _Tap()
        channel = ch.GuardianChannel(sock, tap=tap)
        await channel.connect()
        tap.writes.clear()
        channel.release(KeyHandle(1, 0x002F))
        channel.release(KeyHandle(2, 0x002F))
        assert tap.writes == [] and channel.requests["release"] == 2
        assert isinstance(await channel.answer(_question()), HandleLost)
        riding = list(tap.writes)
        tap.writes.clear()
        channel.release(KeyHandle(3, 0x002F))  # no request follows: it goes alone, later
        await asyncio.sleep(ch.RELEASE_DELAY / 2)
        assert tap.writes == []
        await asyncio.sleep(ch.RELEASE_DELAY)
        alone = list(tap.writes)
        tap.writes.clear()
        for i in range(ch.GuardianChannel.MAX_DEFERRED):
            channel.release(KeyHandle(10 + i, 0x002F))
        full = list(tap.writes)
        tap.writes.clear()
        channel.release(KeyHandle(99, 0x002F))
        channel.close()  # the deferred RELEASE goes out before the channel closes
        return riding, alone, full, tap.writes

    riding, alone, full, closing = asyncio.run(run())
    assert riding == [[p.FrameType.RELEASE, p.FrameType.RELEASE, p.FrameType.VERIFY_DATA]]
    assert alone == [[p.FrameType.RELEASE]]
    assert full == [[p.FrameType.RELEASE] * ch.GuardianChannel.MAX_DEFERRED]
    assert closing == [[p.FrameType.RELEASE]]


def test_the_round_trips_and_bytes_are_counted(sock: Path) -> None:
    async def run() -> ch.GuardianChannel:
        channel = ch.GuardianChannel(sock)
        await channel.connect()
        for i in range(3):
            await channel.answer(_question(i))
        channel.release(UNKNOWN)
        await channel.answer(_question(3))
        channel.close()
        return channel

    channel = asyncio.run(run())
    assert channel.round_trips == 5  # HELLO and four questions; RELEASE is not waited for
    hello = len(p.message_frame(p.Hello(), 1))
    question = len(p.message_frame(p.VerifyData(UNKNOWN.id, 0x002F, False, b"t" * 32), 1))
    release = len(p.message_frame(p.Release(UNKNOWN.id), 1))
    assert channel.bytes_out == hello + 4 * question + release
    assert channel.bytes_in > 0


def test_unanswered_questions_fail_at_their_own_deadlines(tmp_path: Path) -> None:
    """A guardian that answers HELLO and then nothing: each question fails ``timeout`` after it
    was asked, one after the other, and a question asked later waits its own full time."""
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    creds = credentials()
    info = p.Info(tuple(creds.chain_der), b"m" * 32, "null", b"r" * 16)

    def serve() -> None:
        conn, _ = listener.accept()
        decoder = p.FrameDecoder()
        while data := conn.recv(65536):
            for frame in decoder.feed(data):
                if frame.type == p.FrameType.HELLO:
                    conn.sendall(p.message_frame(info, frame.request_id))
        conn.close()

    threading.Thread(target=serve, daemon=True).start()

    async def run() -> list[tuple[int, float]]:
        loop = asyncio.get_running_loop()
        channel = ch.GuardianChannel(path, timeout=0.3)
        await channel.connect()
        start, failed = loop.time(), []

        async def ask(n: int, after: float) -> None:
            await asyncio.sleep(after)
            answer = await channel.answer(_question(n))
            assert isinstance(answer, GuardianUnavailable)
            failed.append((n, loop.time() - start))

        await asyncio.gather(ask(0, 0.0), ask(1, 0.1), ask(2, 0.2))
        channel.close()
        return failed

    failed = asyncio.run(run())
    listener.close()
    assert [n for n, _ in failed] == [0, 1, 2]
    for n, at in failed:
        assert 0.3 + 0.1 * n - 0.02 <= at <= 0.3 + 0.1 * n + 0.25, failed
