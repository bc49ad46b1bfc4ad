"""The asyncio adapter: real loopback sockets around the sans-IO core.

What is checked: data and byte counters end to end; a peer that misbehaves
(garbage, an oversized record header, silence) gets a fatal alert and loses
only its own connection while a concurrent good client keeps downloading;
authenticated data before a bad record is delivered, then the error; EOF
without close_notify is reported as unclean; handler bugs do not stop the
server; client-side handshake timeouts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable

import pytest

from tls12 import ClientConfig, ServerConfig, ServerConnection
from tls12.aio import HandshakeTimeout, TLSStream, connect, serve
from tls12.errors import AlertDescription, BadRecordMAC
from tls12.events import AlertReceived, ApplicationData, HandshakeComplete
from tls12.suites import CipherSuite
from tls12.testing import credentials

SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
PAYLOAD = bytes(range(256)) * 8192  # 2 MiB


def server_config() -> ServerConfig:
    return ServerConfig(credentials=credentials(), cipher_suites=(SUITE, CipherSuite.TLS_RSA_WITH_NULL_SHA))


def client_config() -> ClientConfig:
    return ClientConfig(server_name="localhost", cipher_suites=(SUITE,))


async def _with_server(
    handler: Callable[[TLSStream], Awaitable[None]],
    body: Callable[[int, list[TLSStream]], Awaitable[None]],
    **kwargs: object,
) -> list[TLSStream]:
    """Run ``body(port, closed_streams)`` against a fresh server; returns the closed server streams."""
    closed: list[TLSStream] = []
    server = await serve(handler, "127.0.0.1", 0, server_config(), on_close=closed.append, **kwargs)  # type: ignore[arg-type]
    async with server:
        await body(server.sockets[0].getsockname()[1], closed)
    return closed


async def _wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def _echo(stream: TLSStream) -> None:
    while data := await stream.read():
        stream.write(data)
        await stream.drain()


async def _send_payload(stream: TLSStream) -> None:
    request = await stream.read()
    assert request == b"send"
    for i in range(0, len(PAYLOAD), 65536):
        stream.write(PAYLOAD[i : i + 65536])
        await stream.drain()


def test_echo_and_byte_counters_match_on_both_ends() -> None:
    async def body(port: int, closed: list[TLSStream]) -> None:
        client = await connect("127.0.0.1", port, client_config())
        assert client.handshake is not None and client.handshake.cipher_suite == SUITE
        message = b"hello over tls12 " * 5000  # several records
        client.write(message)
        await client.drain()
        assert await client.read_exactly(len(message)) == message
        await client.close(wait_for_peer=True)  # also count the server's close_notify
        assert client.closed_cleanly
        await _wait_until(lambda: len(closed) == 1)
        server_side = closed[0]
        assert server_side.closed_cleanly
        assert client.bytes_out == server_side.bytes_in
        assert client.bytes_in == server_side.bytes_out
        assert client.bytes_out > len(message)  # records add headers and MACs

    asyncio.run(_with_server(_echo, body))


def test_read_honours_max_bytes() -> None:
    async def body(port: int, closed: list[TLSStream]) -> None:
        client = await connect("127.0.0.1", port, client_config())
        client.write(b"x" * 1000)
        await client.drain()
        parts = [await client.read(100) for _ in range(10)]
        assert all(len(p) <= 100 for p in parts)
        got = b"".join(parts)
        while len(got) < 1000:
            got += await client.read(100)
        assert got == b"x" * 1000
        await client.close()

    asyncio.run(_with_server(_echo, body))


async def _good_download(port: int) -> str:
    client = await connect("127.0.0.1", port, client_config())
    client.write(b"send")
    await client.drain()
    data = await client.read_exactly(len(PAYLOAD))
    await client.close()
    return hashlib.sha256(data).hexdigest()


async def _raw_exchange(port: int, to_send: bytes, timeout: float = 5.0) -> tuple[bytes, float]:
    """Send raw bytes, read until the server closes; returns what came back and how long it took."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if to_send:
        writer.write(to_send)
        await writer.drain()
    async with asyncio.timeout(timeout):
        received = await reader.read()
    writer.close()
    return received, loop.time() - start


def _alert(received: bytes) -> tuple[int, int]:
    """(level, description) of the plaintext alert record that ``received`` must be."""
    assert len(received) == 7 and received[:5] == b"\x15\x03\x03\x00\x02", received.hex()
    return received[5], received[6]


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("plaintext-http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", None),
        ("huge-record-length", b"\x16\x03\x03\xff\xff" + b"\x00" * 100, AlertDescription.RECORD_OVERFLOW),
        ("garbage-handshake", b"\x16\x03\x03\x00\x05\x01\x00\x00\x01\x00", AlertDescription.DECODE_ERROR),
    ],
)
def test_bad_input_gets_fatal_alert_while_good_client_downloads(name: str, raw: bytes, expected: AlertDescription | None) -> None:
    async def body(port: int, closed: list[TLSStream]) -> None:
        good = asyncio.create_task(_good_download(port))
        received, _ = await _raw_exchange(port, raw)
        level, description = _alert(received)
        assert level == 2
        if expected is not None:
            assert description == expected, AlertDescription(description).name
        assert await good == hashlib.sha256(PAYLOAD).hexdigest()

    closed = asyncio.run(_with_server(_send_payload, body))
    errors = [s.error for s in closed if s.error is not None]
    assert len(errors) == 1  # only the bad connection failed


@pytest.mark.parametrize("prefix", [b"", b"\x16\x03\x01\x00"], ids=["silent", "partial-header"])
def test_slow_loris_is_cut_by_handshake_timeout(prefix: bytes) -> None:
    async def body(port: int, closed: list[TLSStream]) -> None:
        good = asyncio.create_task(_good_download(port))
        received, seconds = await _raw_exchange(port, prefix, timeout=5.0)
        assert _alert(received) == (2, AlertDescription.HANDSHAKE_FAILURE)
        assert 0.4 <= seconds < 5.0
        assert await good == hashlib.sha256(PAYLOAD).hexdigest()

    closed = asyncio.run(_with_server(_send_payload, body, handshake_timeout=0.5))
    assert sum(isinstance(s.error, HandshakeTimeout) for s in closed) == 1


def test_handler_exception_closes_only_that_connection() -> None:
    calls: list[int] = []

    async def flaky(stream: TLSStream) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("bug in the application")
        await _echo(stream)

    async def body(port: int, closed: list[TLSStream]) -> None:
        first = await connect("127.0.0.1", port, client_config())
        assert await first.read() == b""
        assert first.closed_cleanly  # the adapter still sends close_notify
        second = await connect("127.0.0.1", port, client_config())
        second.write(b"still alive")
        assert await second.read() == b"still alive"
        await second.close()

    asyncio.run(_with_server(flaky, body))


def test_eof_without_close_notify_is_reported_unclean() -> None:
    async def abort_after_data(stream: TLSStream) -> None:
        stream.write(b"partial")
        await stream.drain()
        stream.writer.close()  # TCP FIN without close_notify: a truncation

    async def body(port: int, closed: list[TLSStream]) -> None:
        client = await connect("127.0.0.1", port, client_config())
        assert await client.read_all() == b"partial"
        assert client.at_eof and not client.closed_cleanly

    asyncio.run(_with_server(abort_after_data, body))


def test_authenticated_prefix_delivered_then_bad_record_mac() -> None:
    """A server (driven by hand) sends two records, the second one tampered with."""
    server_alerts: list[AlertReceived] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection(server_config())
        while not conn.handshake_complete:
            events = conn.receive_data(await reader.read(65536))
            writer.write(conn.data_to_send())
            assert not any(isinstance(e, ApplicationData) for e in events)
        conn.send_data(b"A" * 100)
        good = conn.data_to_send()
        conn.send_data(b"B" * 100)
        bad = bytearray(conn.data_to_send())
        bad[-1] ^= 0x80
        writer.write(good + bytes(bad))
        await writer.drain()
        async with asyncio.timeout(5):
            while data := await reader.read(65536):
                try:
                    server_alerts.extend(e for e in conn.receive_data(data) if isinstance(e, AlertReceived))
                except Exception:
                    break
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            client = await connect("127.0.0.1", port, client_config())
            assert await client.read() == b"A" * 100
            with pytest.raises(BadRecordMAC):
                await client.read()
            assert await client.read() == b""
            await _wait_until(lambda: bool(server_alerts))

    asyncio.run(main())
    assert [a.description for a in server_alerts] == [AlertDescription.BAD_RECORD_MAC]


def test_connect_handshake_timeout_against_silent_server() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; returns when the client gives up
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            with pytest.raises(HandshakeTimeout):
                await connect("127.0.0.1", port, client_config(), handshake_timeout=0.3)

    asyncio.run(main())


def test_handshake_event_and_resumption_through_adapter() -> None:
    from tls12.session import InMemorySessionStore

    store = InMemorySessionStore()

    async def main() -> None:
        config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,), session_store=store)
        server = await serve(_echo, "127.0.0.1", 0, config)
        async with server:
            port = server.sockets[0].getsockname()[1]
            first = await connect("127.0.0.1", port, client_config())
            assert isinstance(first.handshake, HandshakeComplete) and not first.handshake.resumed
            await first.close()
            resumed_config = ClientConfig(server_name="localhost", cipher_suites=(SUITE,), session=first.conn.session)  # type: ignore[attr-defined]
            second = await connect("127.0.0.1", port, resumed_config)
            assert second.handshake is not None and second.handshake.resumed
            assert second.bytes_in < first.bytes_in  # no certificate the second time
            await second.close()

    asyncio.run(main())
