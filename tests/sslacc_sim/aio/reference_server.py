"""A small HTTPS server that speaks the campaign's HTTP contract, for the clients' tests (stdlib only).

The contract is the one :mod:`sslacc_sim.aio.linux.service` speaks to the four clients of
:mod:`sslacc_sim.aio.linux.clients`: ``GET PATH`` answers the file; ``POST PATH`` with
``Content-Length: N`` answers ``receipt(N, zlib.crc32(body))``; ``Expect: 100-continue`` is not
implemented (a request that carries it is recorded, and the tests want none). Connections are
HTTP/1.1 persistent: requests are read from one buffer, so pipelined ones are fine, and
answered in order, each head saying ``Connection: keep-alive`` except the answer to a request
that said ``Connection: close``, after which the server sends close_notify and closes. Each
answer is ``HTTP/1.1 200 OK`` with a ``Content-Length`` (404 for an unknown path).

Faults, per connection (requests counted from 1 on each connection): ``wrong_body_at=K``
flips one byte in the middle of the K-th answer's body (same length, same Content-Length);
``wrong_receipt`` answers every upload with the receipt of a different CRC; ``cut_after=K``
drops the TCP connection without close_notify right after the K-th answer.
"""

from __future__ import annotations

import socket
import ssl
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sslacc_sim.aio.linux.docroot import receipt

_READ = 1 << 16


@dataclass(frozen=True)
class Seen:
    """One request as the server read it: on which connection (from 1), its method, path, body
    size and CRC-32, and its ``Connection`` and ``Expect`` headers (``''`` when absent)."""

    connection: int
    method: str
    path: str
    size: int
    crc: int
    connection_header: str
    expect: str


class ReferenceServer:
    """Serves ``files`` (path -> bytes) on 127.0.0.1 over TLS 1.2 with ``AES128-SHA``; a context manager."""

    def __init__(self, cert: Path, key: Path, files: dict[str, bytes], *, wrong_body_at: int | None = None,
                 wrong_receipt: bool = False, cut_after: int | None = None) -> None:  # fmt: skip
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        self.ctx.set_ciphers("AES128-SHA")
        self.files = files
        self.wrong_body_at, self.wrong_receipt, self.cut_after = wrong_body_at, wrong_receipt, cut_after
        self.connections = 0
        self.seen: list[Seen] = []
        self.errors: list[str] = []  # what went wrong on the server's side (clients hanging up is fine)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def __enter__(self) -> ReferenceServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting and wait (up to 10 s each) for the connections to end."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        except OSError:
            pass
        self.listener.close()
        self._acceptor.join(timeout=10)
        for thread in self._threads:
            thread.join(timeout=10)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.connections += 1
                number = self.connections
            thread = threading.Thread(target=self._serve, args=(conn, number), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        conn.settimeout(30)
        try:
            tls = self.ctx.wrap_socket(conn, server_side=True)
            buffer = bytearray()
            answered = 0
            while (request := _read_request(tls, buffer)) is not None:
                answered += 1
                seen = Seen(number, *request)
                with self._lock:
                    self.seen.append(seen)
                close = seen.connection_header.lower() == "close"
                tls.sendall(self._answer(seen, answered, close))
                if answered == self.cut_after:
                    return  # the finally drops TCP: no close_notify
                if close:
                    _unwrap(tls)
                    return
        except (OSError, ssl.SSLError, ValueError) as exc:
            if not isinstance(exc, ConnectionError | ssl.SSLEOFError | TimeoutError):
                self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def _answer(self, seen: Seen, answered: int, close: bool) -> bytes:
        if seen.method == "POST":
            body = receipt(seen.size, seen.crc ^ 1 if self.wrong_receipt else seen.crc)
        else:
            body = self.files.get(seen.path, b"")
        if answered == self.wrong_body_at and body:
            wrong = bytearray(body)
            wrong[len(body) // 2] ^= 0xFF
            body = bytes(wrong)
        status = "200 OK" if seen.method == "POST" or seen.path in self.files else "404 Not Found"
        connection = "close" if close else "keep-alive"
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: {connection}\r\n\r\n"
        return head.encode("ascii") + body


def _unwrap(tls: ssl.SSLSocket) -> None:
    """Send close_notify (the client may already have hung up)."""
    try:
        tls.unwrap()
    except (OSError, ssl.SSLError):
        pass


def _read_request(tls: ssl.SSLSocket, buffer: bytearray) -> tuple[str, str, int, int, str, str] | None:
    """The next request from ``buffer`` (filled from ``tls`` as needed): method, path, body size,
    body CRC-32, Connection and Expect headers. ``None`` when the client closed between requests;
    ``ValueError`` for a malformed request or a close in the middle of one."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if not (chunk := tls.recv(_READ)):
            if buffer:
                raise ValueError(f"closed inside a request head: {bytes(buffer[:80])!r}")
            return None
        buffer += chunk
    lines = buffer[:end].decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method, path, version = lines[0].split(" ")
    if version != "HTTP/1.1" or method not in ("GET", "POST"):
        raise ValueError(f"unexpected request line {lines[0]!r}")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    size = int(headers.get("content-length", "0"))
    while len(buffer) < size:
        if not (chunk := tls.recv(_READ)):
            raise ValueError(f"closed inside a request body: {len(buffer)} of {size} bytes")
        buffer += chunk
    crc = zlib.crc32(buffer[:size])
    del buffer[:size]
    return method, path, size, crc, headers.get("connection", ""), headers.get("expect", "")
