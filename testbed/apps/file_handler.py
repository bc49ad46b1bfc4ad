"""The HTTP/1.1 side of the HTTPS file server: map a request to a file and stream it back.

HTTP/1.1 is parsed and produced by h11 (itself sans-IO).  What a connection gets:

* ``GET`` and ``HEAD`` of files under the root with ``Content-Length``,
  ``Content-Type`` and keep-alive (several requests per connection);
  ``index.html`` for a directory; 404 for anything missing, 405 (with
  ``Allow``) for other methods, 403 for paths that leave the root (``..``
  segments, symlinks pointing outside), 400 for malformed HTTP;
* large files are streamed in :data:`CHUNK_SIZE` pieces with ``drain()``
  backpressure, never read whole into memory;
* the response head shares its TLS record with the start of the body
  (*coalescing*, as nginx and ``openssl s_server`` do), so a small page is one
  record and one socket write; ``coalesce=False`` gives the head a record of
  its own -- see :class:`HTTPFileHandler`;
* one log line per request with the body size and the TLS bytes this
  response put on the socket.

:func:`resolve_target` is the path check on its own (no I/O besides ``lstat``), so tests can
compare it with the slow reference :func:`resolve_following_links`.  The listening socket and
the TLS layer are :mod:`testbed.apps.server`'s business, not this module's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import mimetypes
import os
import stat
import urllib.parse
from http import HTTPStatus
from pathlib import Path

import h11

from tls12.aio import TLSStream

from .stats import ServerStats, peer_label

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_REQUEST_BODY",
    "SERVER_NAME",
    "HTTPFileHandler",
    "resolve_target",
    "resolve_following_links",
]

logger = logging.getLogger(__name__)

CHUNK_SIZE = 16 * 16384
"""Bytes read from a file per step: 16 full TLS records."""

DEFAULT_IDLE_TIMEOUT = 30.0
"""Seconds a keep-alive connection may stay silent between requests."""

MAX_REQUEST_BODY = 1 << 20
"""Request bodies are read and discarded; a connection sending more is closed."""

SERVER_NAME = "tls12-https-server"
"""The ``Server`` header of every response."""


def resolve_target(root: Path, target: bytes) -> tuple[int, Path | None]:
    """Map a request target to a file under ``root``: ``(status, path)``.

    ``status`` is 200 with the file, or 400 (malformed), 403 (escapes the
    root) or 404 (missing) with ``None``.  ``root`` must already be resolved.
    The check is done twice: textually (no ``..`` segment after
    percent-decoding) and on the file system (symlinks must stay inside).

    The file-system check costs one ``lstat`` per path segment below the root
    (what nginx's ``disable_symlinks ... from=$document_root`` looks at): with
    no ``..`` and no symlink below the root, the file *is* inside the root.
    Only when a segment is a symlink is the whole path resolved
    (:func:`resolve_following_links`) and the result checked against the root.
    """
    try:
        raw_path = target.decode("ascii").split("?", 1)[0].split("#", 1)[0]
        path = urllib.parse.unquote(raw_path, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return 400, None
    if not path.startswith("/") or "\x00" in path or "\\" in path:
        return 400, None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        return 403, None
    current = str(root)
    try:
        mode = os.stat(current).st_mode
        for part in parts:
            if not stat.S_ISDIR(mode):
                return 404, None
            current = os.path.join(current, part)
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return resolve_following_links(root, parts)
        if stat.S_ISDIR(mode):
            current = os.path.join(current, "index.html")
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return resolve_following_links(root, [*parts, "index.html"])
    except (OSError, ValueError):
        return 404, None
    if not stat.S_ISREG(mode):
        return 404, None
    return 200, Path(current)


def resolve_following_links(root: Path, parts: list[str]) -> tuple[int, Path | None]:
    """``root/parts`` with every symlink resolved: 200 and the file if it stays under ``root``, else 403/404.

    The slow path of :func:`resolve_target` (and its reference in the tests):
    ``parts`` are already checked to hold no ``..``; a directory is served as
    its ``index.html``.
    """
    try:
        resolved = root.joinpath(*parts).resolve()
        if not resolved.is_relative_to(root):
            return 403, None
        if resolved.is_dir():
            resolved = (resolved / "index.html").resolve()
            if not resolved.is_relative_to(root):
                return 403, None
        if not resolved.is_file():
            return 404, None
    except (OSError, RuntimeError):  # e.g. a symlink loop, a name too long (is_dir() raises that one)
        return 404, None
    return 200, resolved


@functools.lru_cache(maxsize=256)
def _content_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class HTTPFileHandler:
    """The HTTP/1.1 side of one connection: an h11 server loop serving files under ``root``.

    It needs only ``read``/``write``/``drain``, ``bytes_out``, ``app_data`` and
    ``peername`` of its stream, so the same code serves HTTPS (a
    :class:`~tls12.aio.TLSStream`), SSL splitting and the plain-HTTP baseline of
    the experiments.  Every ``write`` of a TLS stream becomes records of at
    most 16 KiB, so *how* the response is cut into writes decides its records:

    ``coalesce=True`` (the default, what nginx does)
        The head is held back and written together with the first
        ``CHUNK_SIZE - len(head)`` body bytes; later writes are whole
        ``CHUNK_SIZE`` pieces.  A page that fits in one record with its head
        (up to 16 KiB minus ~100 bytes of head) is **one record and one socket
        write**; a larger file takes ``ceil((head + body) / 16 KiB)`` full
        records instead of one extra head-only record.  That saves one record
        of overhead (5-byte header, IV, MAC, padding: ~45 bytes with
        AES-128-CBC-SHA) and one ``send()`` per response.
    ``coalesce=False``
        The head is written alone, then the body in ``CHUNK_SIZE`` pieces (a
        multiple of the 16 KiB record size): the head has a record of its own
        and the body's records start at offset 0 of the file, so a file always
        splits into the same, header-free records.  SSL splitting needs this:
        its proxies cache payload records by id, and an id is only stable
        across responses if no record mixes the head with file bytes.
    """

    def __init__(
        self, stream: TLSStream, root: Path, stats: ServerStats, idle_timeout: float, *, coalesce: bool = True
    ) -> None:
        self.stream = stream
        self.root = root
        self.stats = stats
        self.idle_timeout = idle_timeout
        self.coalesce = coalesce
        self.h11 = h11.Connection(h11.SERVER)

    def _encode(self, event: h11.Event) -> bytes:
        """The bytes of one h11 event (body data passes through uncopied).

        h11 produces a response head as several small pieces; they are joined
        here because writing them one by one would cost one TLS record (MAC,
        padding, IV) each.
        """
        return b"".join(self.h11.send_with_data_passthrough(event) or ())

    async def _write(self, data: bytes) -> None:
        """One write to the stream (one run of records), then wait for backpressure.

        The last write of a connection h11 will close goes out with close_notify behind it
        when the stream offers ``write_last`` (:meth:`tls12.aio.TLSStream.write_last`): the
        same records as ``write`` and then ``close``, in one flush.
        """
        if data:
            last = getattr(self.stream, "write_last", None)
            if last is not None and self.h11.our_state is h11.MUST_CLOSE:
                last(data)
            else:
                self.stream.write(data)
        await self.stream.drain()

    async def _send_response(self, head: bytes, body: bytes) -> None:
        """Write a whole short response: one write when coalescing, head and body apart otherwise."""
        data = self._encode(h11.Data(data=body)) if body else b""
        tail = self._encode(h11.EndOfMessage())
        if self.coalesce:
            await self._write(head + data + tail)
        else:
            await self._write(head)
            await self._write(data + tail)

    async def _next_event(self, deadline: float) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        """The next h11 event, reading from the stream until ``deadline`` (loop time)."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout_at(deadline):
                data = await self.stream.read()
            self.h11.receive_data(data)  # b"" tells h11 about EOF

    async def run(self) -> None:
        """Serve requests until the client closes, h11 says close, or a timeout.

        A client gets ``idle_timeout`` seconds for the *whole* head of each
        request (counted from the end of the previous response), so trickling
        one header byte at a time does not keep a connection open forever;
        each read of a request body gets ``idle_timeout`` anew.
        """
        loop = asyncio.get_running_loop()
        body_bytes = 0
        deadline = loop.time() + self.idle_timeout
        while True:
            if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state is h11.MUST_CLOSE:
                return
            if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
                self.h11.start_next_cycle()
                body_bytes = 0
                deadline = loop.time() + self.idle_timeout
            if self.h11.their_state is not h11.IDLE:  # reading a request body
                deadline = loop.time() + self.idle_timeout
            try:
                event = await self._next_event(deadline)
            except h11.RemoteProtocolError as exc:
                await self._bad_request(exc)
                return
            except TimeoutError:
                logger.info("%s idle for %.1f s, closing", peer_label(self.stream), self.idle_timeout)
                return
            if isinstance(event, h11.Request):
                await self._respond(event)
            elif isinstance(event, h11.Data):
                body_bytes += len(event.data)
                if body_bytes > MAX_REQUEST_BODY:
                    return
            elif isinstance(event, h11.ConnectionClosed):
                return
            elif event is h11.PAUSED:
                # both sides DONE already started a new cycle above; anything else
                # (e.g. a protocol switch we do not support) ends the connection
                return

    async def _bad_request(self, exc: h11.RemoteProtocolError) -> None:
        logger.info("%s bad HTTP: %s", peer_label(self.stream), exc)
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            # h11 still lets a server answer a client that broke the protocol
            status = exc.error_status_hint
            try:
                await self._simple(status, f"{status} bad request\n", False, (("Connection", "close"),))
            except (h11.LocalProtocolError, ConnectionError):
                pass

    @staticmethod
    def _headers(length: int, content_type: str, extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
        return [
            ("Server", SERVER_NAME),
            ("Content-Length", str(length)),
            ("Content-Type", content_type),
            *extra,
        ]

    async def _respond(self, request: h11.Request) -> None:
        out_before = self.stream.bytes_out
        method = request.method.decode("ascii", "replace")
        target = request.target.decode("ascii", "replace")
        status, sent = await self._respond_inner(request)
        self.stats.requests += 1
        self.stream.app_data["requests"] = int(self.stream.app_data.get("requests", 0)) + 1
        logger.info(
            '%s "%s %s HTTP/%s" %d body=%d wire_out=%d',
            peer_label(self.stream),
            method,
            target,
            request.http_version.decode("ascii", "replace"),
            status,
            sent,
            self.stream.bytes_out - out_before,
        )

    async def _simple(self, status: int, text: str, head: bool, extra: tuple[tuple[str, str], ...] = ()) -> tuple[int, int]:
        body = text.encode()
        headers = self._headers(len(body), "text/plain; charset=utf-8", extra)
        response = self._encode(h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()))
        await self._send_response(response, b"" if head else body)
        return status, 0 if head else len(body)

    async def _respond_inner(self, request: h11.Request) -> tuple[int, int]:
        head = request.method == b"HEAD"
        if request.method not in (b"GET", b"HEAD"):
            return await self._simple(405, "405 method not allowed\n", False, (("Allow", "GET, HEAD"),))
        status, path = resolve_target(self.root, request.target)
        if path is None:
            reason = {400: "bad request", 403: "forbidden", 404: "not found"}[status]
            return await self._simple(status, f"{status} {reason}\n", head)
        try:
            f = path.open("rb")
        except OSError:
            return await self._simple(404, "404 not found\n", head)
        with f:
            size = os.fstat(f.fileno()).st_size
            ctype = _content_type(path.name)
            pending = self._encode(h11.Response(status_code=200, headers=self._headers(size, ctype), reason=b"OK"))
            if not self.coalesce:
                await self._write(pending)
                pending = b""
            sent = 0
            if not head:
                while sent < size:
                    # the first write fills CHUNK_SIZE with the pending head: all records stay full
                    room = CHUNK_SIZE - len(pending) if len(pending) < CHUNK_SIZE else CHUNK_SIZE
                    chunk = f.read(min(room, size - sent))
                    if not chunk:
                        # the file shrank under us: the response cannot be completed
                        raise ConnectionAbortedError(f"{path} shrank while being sent")
                    data = self._encode(h11.Data(data=chunk))
                    sent += len(chunk)
                    if sent == size:  # the end of the message goes with the last chunk
                        data += self._encode(h11.EndOfMessage())
                    await self._write(pending + data if pending else data)
                    pending = b""
            if head or not size:
                await self._write(pending + self._encode(h11.EndOfMessage()))
        return 200, sent
