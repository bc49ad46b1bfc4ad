"""The origin server's status lines carry the standard reason phrase, read off the wire.

h11 sends whatever ``reason`` it is given, so a response built without one goes out as
``HTTP/1.1 200 `` -- legal, but some caches and logs show it and it looks broken.  Each
request here is written to a plain socket and the first line of the answer is compared byte
for byte with RFC 9110's phrase for the status.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sine.aio.server import OriginServer
from sine.algorithms import SigningKey
from sine.site import sign_site
from tests.sine.sine_helpers import site_files, write_site


@pytest.fixture
def origin(tmp_path: Path, ed_key: SigningKey) -> Iterator[tuple[Path, int]]:
    """A signed site served by :class:`OriginServer` on a loop in a background thread."""
    root = write_site(tmp_path / "root", site_files(3000))
    sign_site(root, ed_key, time.time())
    loop = asyncio.new_event_loop()
    server = OriginServer(root)
    port, _ = loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield root, port
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _exchange(port: int, head: str) -> bytes:
    """Send one request (``head`` without the final blank line), return the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + b"Host: x\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _status_line(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]


def test_status_lines_have_the_standard_reason_phrase(origin: tuple[Path, int]) -> None:
    root, port = origin
    ok = _exchange(port, "GET /a.html HTTP/1.1\r\n")
    assert _status_line(ok) == b"HTTP/1.1 200 OK"
    etag = re.search(rb"\r\netag: (\S+)\r\n", ok, re.IGNORECASE)
    assert etag is not None
    not_modified = _exchange(port, f"GET /a.html HTTP/1.1\r\nIf-None-Match: {etag[1].decode()}\r\n")
    assert _status_line(not_modified) == b"HTTP/1.1 304 Not Modified"
    assert _status_line(_exchange(port, "GET /no-such-page HTTP/1.1\r\n")) == b"HTTP/1.1 404 Not Found"
    assert _status_line(_exchange(port, "GET /../etc/passwd HTTP/1.1\r\n")) == b"HTTP/1.1 400 Bad Request"
    assert _status_line(_exchange(port, "POST /a.html HTTP/1.1\r\nContent-Length: 0\r\n")) == (
        b"HTTP/1.1 405 Method Not Allowed")
    (root / "b.html").write_bytes(b"changed after signing")
    assert _status_line(_exchange(port, "GET /b.html HTTP/1.1\r\n")) == (
        b"HTTP/1.1 503 Service Unavailable")
