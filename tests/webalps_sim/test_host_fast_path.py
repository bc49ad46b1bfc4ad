"""The WebALPS host answers a keep-alive GET of a small file on the HTTPS server's fast path.

:class:`webalps_sim.aio.host.WebALPSProtocol` offers the plaintext of an ``OPEN`` answer to the
file handler's callback path: the response is the same bytes the h11 path writes (a request
with a ``Connection`` header goes to h11: both are compared), it is written in the callback that
supplies the ``OPEN`` answer (in no task), it costs one ``OPEN`` and one ``SEAL``, and a request
the fast path does not take (an unknown file) is still answered by h11.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.apps.file_handler import HTTPFileHandler
from tls12.testing import credentials
from webalps_sim.aio.channel import GuardianChannel
from webalps_sim.aio.guardian import GuardianServer
from webalps_sim.aio.host import start_webalps_server
from webalps_sim.service import GuardianService

BODY = bytes(range(256)) * 8


@pytest.fixture()
def host(tmp_path: Path) -> Iterator[tuple[int, GuardianChannel]]:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    guardian = GuardianServer(service, tmp_path / "g.sock").start()
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "2k.bin").write_bytes(BODY)
    loop = asyncio.new_event_loop()
    channel = GuardianChannel(tmp_path / "g.sock")
    server = loop.run_until_complete(
        start_webalps_server(tmp_path / "www", "127.0.0.1", 0, channel))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield server.sockets[0].getsockname()[1], channel

    async def shutdown() -> None:  # no connection's task left to the garbage collector
        server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        channel.close()

    asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
    guardian.close()


def _response(tls: ssl.SSLSocket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += tls.recv(65536)
    head = data.split(b"\r\n\r\n", 1)[0]
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(data) < len(head) + 4 + length:
        data += tls.recv(65536)
    return data


def test_keep_alive_gets_take_the_fast_path_with_the_h11_bytes(
        host: tuple[int, GuardianChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    port, channel = host
    taken: list[bool] = []
    in_callback: list[bool] = []
    fast = HTTPFileHandler._fast

    def spy(self: HTTPFileHandler, data: bytes) -> bool:
        in_callback.append(asyncio.current_task() is None)  # not the handler's task
        taken.append(fast(self, data))
        return taken[-1]

    monkeypatch.setattr(HTTPFileHandler, "_fast", spy)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("AES128-SHA")
    plain = b"GET /2k.bin HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(b"GET /2k.bin HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        slow = _response(tls)
        before = dict(channel.requests)
        answers = []
        for _ in range(3):
            tls.sendall(plain)
            answers.append(_response(tls))
        after = dict(channel.requests)
        tls.sendall(b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
        missing = _response(tls)
    assert slow.endswith(BODY) and slow.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answers == [slow] * 3  # the fast path writes what h11 writes
    assert taken.count(True) == 3 and False in taken, taken  # the h11 requests were offered too
    assert [c for t, c in zip(taken, in_callback, strict=True) if t] == [True] * 3
    assert after["open"] - before["open"] == 3 and after["seal"] - before["seal"] == 3
    assert missing.startswith(b"HTTP/1.1 404 ")
