"""The transport-level adapter (:class:`tls12.aio.TLSProtocol`, :func:`tls12.aio.serve_protocol`).

First the stream adapter's own server tests (``test_aio.py``) run again with ``serve`` replaced by
``serve_protocol``: same data, counters, alerts to bad peers while a good client downloads,
handshake timeouts, handler bugs, resumption.  Then what only the protocol has to get right:
no task before the handshake is done; bounded memory both ways (a slow reader of a large
download: ``pause_writing``; a peer that sends while the application does not read:
``pause_reading``); TCP half-close and a close_notify that arrives while a response is still
being written; a peer that resets in the middle of the handshake; real peers (Python ``ssl``,
``openssl s_client``); the fast path of a connection that asks its delegate by event (its
plaintext comes with the ``open`` answer, its writes wait for their ``seal``).
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from tests.tls12 import test_aio as stream_tests
from tls12 import ClientConnection, ServerConfig, ServerConnection
from tls12.aio import TLSProtocol, TLSStream, connect, serve_protocol
from tls12.certs import Credentials
from tls12.delegate import DelegateRequest, EventDelegate, LocalDelegate
from tls12.errors import AlertDescription
from tls12.testing import credentials, seeded_rng

from .test_aio import PAYLOAD, SUITE, _echo, _wait_until, client_config, server_config


@pytest.fixture
def on_protocol(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(stream_tests, "serve", serve_protocol)
    yield


@pytest.mark.usefixtures("on_protocol")
@pytest.mark.parametrize("test", [
    stream_tests.test_echo_and_byte_counters_match_on_both_ends,
    stream_tests.test_read_honours_max_bytes,
    stream_tests.test_handler_exception_closes_only_that_connection,
    stream_tests.test_authenticated_prefix_delivered_then_bad_record_mac,
    stream_tests.test_handshake_event_and_resumption_through_adapter,
], ids=lambda t: t.__name__)
def test_stream_adapter_tests_pass_on_the_protocol(test: Callable[[], None]) -> None:
    test()


@pytest.mark.usefixtures("on_protocol")
@pytest.mark.parametrize(("name", "raw", "expected"), [
    ("plaintext-http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", None),
    ("huge-record-length", b"\x16\x03\x03\xff\xff" + b"\x00" * 100, AlertDescription.RECORD_OVERFLOW),
    ("garbage-handshake", b"\x16\x03\x03\x00\x05\x01\x00\x00\x01\x00", AlertDescription.DECODE_ERROR),
])
def test_garbage_gets_an_alert_and_others_are_served(name: str, raw: bytes, expected: AlertDescription | None) -> None:
    stream_tests.test_bad_input_gets_fatal_alert_while_good_client_downloads(name, raw, expected)


@pytest.mark.usefixtures("on_protocol")
@pytest.mark.parametrize("prefix", [b"", b"\x16\x03\x01\x00"], ids=["silent", "partial-header"])
def test_slow_loris_is_cut_by_the_handshake_timer(prefix: bytes) -> None:
    stream_tests.test_slow_loris_is_cut_by_handshake_timeout(prefix)


async def _serve(handler: Callable[[TLSStream], object], **kwargs: object) -> tuple[asyncio.Server, int, list[TLSStream]]:
    closed: list[TLSStream] = []
    server = await serve_protocol(handler, "127.0.0.1", 0, server_config(), on_close=closed.append, **kwargs)  # type: ignore[arg-type]
    return server, server.sockets[0].getsockname()[1], closed


def test_no_task_until_the_handshake_is_done() -> None:
    started: list[TLSStream] = []

    async def handler(stream: TLSStream) -> None:
        started.append(stream)
        await _echo(stream)

    async def main() -> None:
        server, port, closed = await _serve(handler)
        async with server:
            before = len(asyncio.all_tasks())
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x16\x03\x01\x00")  # a ClientHello that has only begun
            await writer.drain()
            await asyncio.sleep(0.1)
            assert len(asyncio.all_tasks()) == before and not started
            writer.close()
            client = await connect("127.0.0.1", port, client_config())
            client.write(b"ping")
            assert await client.read() == b"ping"
            assert len(started) == 1 and isinstance(started[0], TLSProtocol)
            await client.close()
            await _wait_until(lambda: len(closed) == 2)

    asyncio.run(main())


def test_slow_reader_of_a_large_download_keeps_memory_bounded() -> None:
    """The server writes 32 MiB while the client reads nothing for a while: ``drain()`` waits
    (``pause_writing``), so the transport never buffers much more than one write."""
    total = 32 << 20
    chunk = 256 * 1024
    peaks: list[int] = []
    paused: list[bool] = []

    async def handler(stream: TLSStream) -> None:
        assert isinstance(stream, TLSProtocol)
        assert await stream.read() == b"go"
        block = bytes(chunk)
        for _ in range(total // chunk):
            stream.write(block)
            assert stream._transport is not None
            peaks.append(stream._transport.get_write_buffer_size())
            paused.append(stream._write_paused)
            await stream.drain()

    async def main() -> None:
        server, port, closed = await _serve(handler)
        async with server:
            client = await connect("127.0.0.1", port, client_config())
            client.write(b"go")
            await client.drain()
            await asyncio.sleep(0.5)  # the slow reader: nothing read yet
            got = len(await client.read_exactly(total))
            assert got == total
            await client.close()
            await _wait_until(lambda: len(closed) == 1)

    asyncio.run(main())
    assert any(paused), "the transport never paused writing: the test did not exercise backpressure"
    # the high-water mark (64 KiB) plus one write of records; never the whole download
    assert max(peaks) < 64 * 1024 + chunk + 16 * 1024, max(peaks)


def test_a_peer_that_sends_while_nobody_reads_is_paused() -> None:
    """The handler stops reading; the client sends 8 MiB: the raw bytes kept for it stay below
    ``read_size`` plus one receive, because the transport's reading is paused."""
    seen: list[int] = []
    resume = asyncio.Event()
    got: list[int] = []

    async def handler(stream: TLSStream) -> None:
        assert isinstance(stream, TLSProtocol)
        assert await stream.read(4) == b"wait"
        await resume.wait()
        seen.append(len(stream._raw))
        seen.append(int(stream._read_paused))
        n = 4
        while n < (8 << 20) + 4:
            data = await stream.read()
            assert data
            n += len(data)
        got.append(n)
        stream.write(b"done")
        await stream.drain()

    async def main() -> None:
        server, port, closed = await _serve(handler)
        async with server:
            client = await connect("127.0.0.1", port, client_config())
            client.write(b"wait")
            await client.drain()
            sender = asyncio.create_task(_send_lots(client, 8 << 20))
            await asyncio.sleep(0.5)
            assert not sender.done(), "the client could send everything: nothing was paused"
            resume.set()
            await sender
            assert await client.read() == b"done"
            await client.close()
            await _wait_until(lambda: len(closed) == 1)

    asyncio.run(main())
    raw, was_paused = seen
    assert was_paused == 1
    assert raw <= 2 * 65536, raw
    assert got == [(8 << 20) + 4]


async def _send_lots(client: TLSStream, n: int) -> None:
    block = bytes(65536)
    for _ in range(n // len(block)):
        client.write(block)
        await client.drain()


def _tls12_client(port: int) -> tuple[socket.socket, ClientConnection]:
    """A handshaken :class:`ClientConnection` over a blocking socket (for byte-level control)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = ClientConnection(client_config())
    while not conn.handshake_complete:
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
        conn.receive_data(sock.recv(65536))
    sock.sendall(conn.data_to_send())
    return sock, conn


def _read_all(sock: socket.socket, conn: ClientConnection, first: bytes = b"") -> tuple[bytes, bool]:
    """Plaintext until the server closes (``first``: raw bytes read already); and whether it
    sent close_notify."""
    from tls12.events import ApplicationData, ConnectionClosed

    data = bytearray()
    clean = False
    chunk = first
    while chunk or (chunk := sock.recv(65536)):
        for event in conn.receive_data(chunk):
            if isinstance(event, ApplicationData):
                data += event.data
            elif isinstance(event, ConnectionClosed):
                clean = event.clean
        chunk = b""
    return bytes(data), clean


def _run_in_thread(fn: Callable[[], object]) -> Callable[[], object]:
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()

    def join() -> object:
        thread.join(30)
        assert result, "client thread did not finish"
        return result[0]

    return join


@pytest.mark.parametrize("close_notify", [False, True], ids=["tcp-fin", "close-notify-and-fin"])
def test_half_closed_client_gets_the_whole_response(close_notify: bool) -> None:
    """The client ends its direction while 8 MiB are still to come -- a TCP FIN right behind the
    request, or close_notify and a FIN once the response is arriving (as ``printf ... |
    gnutls-cli`` does): it gets every byte.  (A close_notify in the same segment as the request
    ends the connection before the response, in both adapters: the core answers it at once.)"""
    size = 8 << 20

    async def handler(stream: TLSStream) -> None:
        assert await stream.read() == b"send"
        for _ in range(size // 65536):
            stream.write(PAYLOAD[:65536])
            await stream.drain()

    def client(port: int) -> tuple[bytes, bool]:
        sock, conn = _tls12_client(port)
        conn.send_data(b"send")
        sock.sendall(conn.data_to_send())
        first = b""
        if close_notify:  # once the response is arriving, as gnutls-cli does
            first = sock.recv(65536)
            conn.close()
            sock.sendall(conn.data_to_send())
        sock.shutdown(socket.SHUT_WR)
        with sock:
            data, clean = _read_all(sock, conn, first)
            return data, clean

    async def main() -> tuple[bytes, bool]:
        server, port, closed = await _serve(handler)
        async with server:
            join = _run_in_thread(lambda: client(port))
            await _wait_until(lambda: len(closed) == 1, timeout=30)
            return join()  # type: ignore[return-value]

    body, clean = asyncio.run(main())
    assert len(body) == size and body == PAYLOAD[:65536] * (size // 65536)
    assert clean or not close_notify  # answered with close_notify once the response was written


def test_reset_in_the_middle_of_the_handshake_ends_only_that_connection() -> None:
    async def main() -> list[TLSStream]:
        server, port, closed = await _serve(_echo)
        async with server:
            sock = socket.create_connection(("127.0.0.1", port))
            hello = ClientConnection(client_config()).data_to_send()
            sock.sendall(hello[: len(hello) // 2])
            await asyncio.sleep(0.1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # RST
            await _wait_until(lambda: len(closed) == 1)
            client = await connect("127.0.0.1", port, client_config())
            client.write(b"after")
            assert await client.read() == b"after"
            await client.close()
            await _wait_until(lambda: len(closed) == 2)
            await asyncio.sleep(0.1)
        return closed

    closed = asyncio.run(main())
    assert len(closed) == 2  # on_close once per connection
    assert closed[0].handshake is None and closed[1].handshake is not None


def test_python_ssl_client_echo() -> None:
    def client(port: int) -> bytes:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("AES128-SHA")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
            message = b"python ssl " * 3000
            tls.sendall(message)
            got = bytearray()
            while len(got) < len(message):
                got += tls.recv(65536)
            return bytes(got)

    async def main() -> bytes:
        server, port, closed = await _serve(_echo)
        async with server:
            join = _run_in_thread(lambda: client(port))
            await _wait_until(lambda: len(closed) == 1, timeout=30)
            return join()  # type: ignore[return-value]

    assert asyncio.run(main()) == b"python ssl " * 3000


def test_openssl_s_client_echo() -> None:
    def client(port: int) -> str:
        proc = subprocess.run(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-quiet",
             "-cipher", "AES128-SHA"],
            input=b"hello from s_client\n", capture_output=True, timeout=30,
        )
        return proc.stdout.decode()

    async def echo_once(stream: TLSStream) -> None:  # then close: s_client -quiet reads until then
        line = b""
        while not line.endswith(b"\n"):
            line += await stream.read()
        stream.write(line)
        await stream.drain()

    async def main() -> str:
        server, port, closed = await _serve(echo_once)
        async with server:
            join = _run_in_thread(lambda: client(port))
            await _wait_until(lambda: len(closed) == 1, timeout=30)
            return join()  # type: ignore[return-value]

    assert "hello from s_client" in asyncio.run(main())


def test_download_digest_through_protocol_client() -> None:
    """A client built on the protocol too (``loop.create_connection``), against the protocol server."""
    async def handler(stream: TLSStream) -> None:
        await stream.read()
        stream.write(PAYLOAD)
        await stream.drain()

    async def main() -> str:
        server, port, _ = await _serve(handler)
        async with server:
            loop = asyncio.get_running_loop()
            _, proto = await loop.create_connection(
                lambda: TLSProtocol(ClientConnection(client_config())), "127.0.0.1", port)
            await proto.do_handshake()
            assert proto.handshake is not None and proto.handshake.cipher_suite == SUITE
            proto.write(b"send")
            data = await proto.read_exactly(len(PAYLOAD))
            await proto.close()
            return hashlib.sha256(data).hexdigest()

    assert asyncio.run(main()) == hashlib.sha256(PAYLOAD).hexdigest()


def test_eof_after_data_is_reported_after_the_data() -> None:
    async def handler(stream: TLSStream) -> None:
        stream.write(b"partial")
        await stream.drain()
        stream._abort()  # FIN without close_notify: a truncation

    async def main() -> None:
        server, port, _ = await _serve(handler)
        async with server:
            client = await connect("127.0.0.1", port, client_config())
            assert await client.read() == b"partial"
            assert await client.read() == b""
            assert not client.closed_cleanly
            await client.close()

    asyncio.run(main())


def test_lazy_handler_starts_with_the_first_bytes_or_its_timer() -> None:
    """``lazy_handler``: a client that handshakes and leaves (FIN) costs no task and no handler,
    and ``on_close`` still runs once; one that sends is served as usual; one that stays silent
    gets its handler ``lazy_handler`` seconds after the handshake, ``handshake_at`` telling when
    that was."""
    started: list[tuple[TLSStream, float]] = []

    async def handler(stream: TLSStream) -> None:
        started.append((stream, asyncio.get_running_loop().time()))
        await _echo(stream)

    async def main() -> None:
        server, port, closed = await _serve(handler, lazy_handler=0.3)
        async with server:
            def handshake_and_leave() -> None:
                sock, _ = _tls12_client(port)
                sock.close()

            before = len(asyncio.all_tasks())
            await asyncio.to_thread(handshake_and_leave)
            await _wait_until(lambda: len(closed) == 1)
            assert not started and len(asyncio.all_tasks()) == before
            assert closed[0].handshake is not None and closed[0].error is None

            client = await connect("127.0.0.1", port, client_config())
            client.write(b"ping")
            assert await client.read() == b"ping"
            assert len(started) == 1
            await client.close()
            await _wait_until(lambda: len(closed) == 2)

            silent = await connect("127.0.0.1", port, client_config())
            await _wait_until(lambda: len(started) == 2)
            stream, at = started[1]
            assert isinstance(stream, TLSProtocol) and stream.handshake_at is not None
            assert at - stream.handshake_at >= 0.29
            silent.write(b"late")
            assert await silent.read() == b"late"
            await silent.close()
            await _wait_until(lambda: len(closed) == 3)

    asyncio.run(main())


def _answered_at_once(
    delegate: LocalDelegate,
) -> Callable[[object, DelegateRequest], asyncio.Future[object]]:
    """``answer=``: a future already done (its callback supplies it on the loop's next turn)."""

    def answer(conn: object, request: DelegateRequest) -> asyncio.Future[object]:
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        try:
            fut.set_result(request.call(delegate))
        except Exception as exc:  # noqa: BLE001 - a failed operation is an answer too
            fut.set_result(exc)
        return fut

    return answer


def test_a_connection_asking_by_event_takes_the_fast_path() -> None:
    """Its plaintext arrives with the ``open`` answer, not in ``buffer_updated``: the fast reader
    is offered it there, and ``write_ready`` is false while a written record waits for its
    ``seal``, true once none does."""
    ready: list[bool] = []
    offered: list[bytes] = []

    async def handler(stream: TLSStream) -> None:
        assert isinstance(stream, TLSProtocol)

        def fast(data: bytes) -> bool:
            offered.append(data)
            if not stream.write_ready:
                return False
            stream.write(b"fast " + data)
            return True

        first = await stream.read()
        stream.write(b"slow " + first)
        ready.append(stream.write_ready)  # its seal is not answered yet
        await stream.drain()
        ready.append(stream.write_ready)  # sealed and written
        stream.fast_reader = fast
        while data := await stream.read():
            stream.write(b"slow " + data)
            await stream.drain()

    creds = credentials()
    assert creds.private_key is not None
    config = ServerConfig(credentials=Credentials.chain_only(creds.chain), cipher_suites=(SUITE,))
    delegate = LocalDelegate(creds.private_key, rng=seeded_rng(7))

    async def main() -> list[bytes]:
        closed: list[TLSStream] = []
        server = await serve_protocol(
            handler,
            "127.0.0.1",
            0,
            config,
            connection_factory=lambda c: ServerConnection(c, delegate=EventDelegate()),
            answer=_answered_at_once(delegate),
            on_close=closed.append,
        )
        async with server:
            client = await connect("127.0.0.1", server.sockets[0].getsockname()[1], client_config())
            replies = []
            for request in (b"one", b"two", b"three"):
                client.write(request)
                replies.append(await client.read())
            await client.close()
            await _wait_until(lambda: len(closed) == 1)
        return replies

    assert asyncio.run(main()) == [b"slow one", b"fast two", b"fast three"]
    assert ready == [False, True] and offered == [b"two", b"three"]
