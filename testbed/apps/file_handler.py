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
import re
import stat
import urllib.parse
from http import HTTPStatus
from pathlib import Path

import h11

from tls12.aio import TLSProtocol, TLSStream

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

FAST_MAX_HEAD = 8192
"""Longest request head the callback path (:meth:`HTTPFileHandler._fast`) looks at."""

_FIELD_VALUE = rb"[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*"
_FAST_REQUEST = re.compile(
    rb"(GET|HEAD) ([\x21-\x7e]+) HTTP/1\.1\r\n"
    rb"((?:[-!#$%&'*+.^_`|~0-9a-zA-Z]+:[ \t]*" + _FIELD_VALUE + rb"[ \t]*\r\n)*)\r\n"
)
"""A request head the callback path may answer: a strict subset of what h11 parses (no empty
or control-character field values, CRLF line ends, HTTP/1.1 only)."""

_PLAIN_NAME = re.compile(rb"/(?!\.\.?\Z)[-.\w]+")
"""A target that names a file right under the root, with nothing to decode (no ``%``, ``?``)."""

_SLOW_HEADERS = frozenset({b"connection", b"content-length", b"transfer-encoding", b"expect", b"upgrade", b"te"})
"""Request headers that change how h11 frames or ends the exchange: such a request goes to h11."""


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
    status, found = _walk(str(root), target)
    if isinstance(found, list):
        return resolve_following_links(root, found)
    return status, None if found is None else Path(found)


def _walk(root: str, target: bytes) -> tuple[int, str | list[str] | None]:
    """:func:`resolve_target` on strings: ``(200, file)``, ``(4xx, None)``, or ``(0, parts)``
    when a symlink below the root needs :func:`resolve_following_links` on ``parts``."""
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
    current = root
    try:
        mode = os.stat(current).st_mode
        for part in parts:
            if not stat.S_ISDIR(mode):
                return 404, None
            current = os.path.join(current, part)
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return 0, parts
        if stat.S_ISDIR(mode):
            current = os.path.join(current, "index.html")
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return 0, [*parts, "index.html"]
    except (OSError, ValueError):
        return 404, None
    if not stat.S_ISREG(mode):
        return 404, None
    return 200, current


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


@functools.lru_cache(maxsize=1024)
def _plain_headers(headers: bytes) -> bool:
    """Exactly one ``Host`` and no header of :data:`_SLOW_HEADERS` (``headers``: the lines
    of a request head after the request line, each ending in CRLF)."""
    hosts = 0
    for line in headers.split(b"\r\n")[:-1]:
        name = line[: line.index(b":")].lower()
        if name == b"host":
            hosts += 1
        elif name in _SLOW_HEADERS:
            return False
    return hosts == 1


def _response_head(size: int, content_type: str) -> bytes:
    """The head h11 writes for ``Response(200, HTTPFileHandler._headers(size, content_type))``."""
    return (f"HTTP/1.1 200 OK\r\nServer: {SERVER_NAME}\r\nContent-Length: {size}\r\n"
            f"Content-Type: {content_type}\r\n\r\n").encode("ascii")


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
        self._parked = False
        """Waiting in ``stream.read()`` between two requests, h11 idle and its buffer empty."""
        self._last_fast: float | None = None
        """Loop time of the last request answered by :meth:`_fast` (the idle clock restarts there)."""
        self._loop = asyncio.get_running_loop()
        if isinstance(stream, TLSProtocol):
            self._root = str(root)
            self._fast_headers: bytes | None = None
            """The header block of the last request :meth:`_fast` answered (checked already)."""
            stream.fast_reader = self._fast

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
        """The next h11 event, reading from the stream until ``deadline`` (loop time).

        Requests answered in the transport's callback meanwhile (:meth:`_fast`) move the
        deadline: the connection was not idle."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            h = self.h11
            self._parked = h.our_state is h11.IDLE and h.their_state is h11.IDLE and not h.trailing_data[0]
            try:
                async with asyncio.timeout_at(deadline):
                    data = await self.stream.read()
                if data and self._parked and isinstance(self.stream, TLSProtocol) and self._fast(data):
                    continue  # what the callback would have answered (it arrived before we waited)
            except TimeoutError:
                if self._last_fast is None or self._last_fast + self.idle_timeout <= deadline:
                    raise
                deadline = self._last_fast + self.idle_timeout
                continue
            finally:
                self._parked = False
            self.h11.receive_data(data)  # b"" tells h11 about EOF

    def _fast(self, data: bytes) -> bool:
        """Answer a keep-alive GET or HEAD of a small file inside the transport's callback.

        Called by :class:`tls12.aio.TLSProtocol` with the plaintext that arrived while
        :meth:`_next_event` waits between two requests, and by :meth:`_next_event` with what
        its read returned in that state (a connection's first request, which arrives before a
        ``lazy_handler`` starts this handler).  It answers only the plainest case --
        one whole request head that :data:`_FAST_REQUEST` matches, exactly one ``Host`` and no
        header of :data:`_SLOW_HEADERS`, a regular file under the root reached without a
        symlink, small enough for one write, a transport not above its high-water mark -- and
        writes what the h11 path writes for it, byte for byte (``tests/testbed/test_fast_path.py``
        checks both against each other).  Anything else returns False and goes to h11
        unchanged; h11 stays idle throughout, as after a served request.
        """
        stream = self.stream
        if not self._parked or len(data) > FAST_MAX_HEAD or not stream.write_ready:  # type: ignore[attr-defined]  # set only on a TLSProtocol
            return False
        m = _FAST_REQUEST.fullmatch(data)
        if m is None:
            return False
        headers = m.group(3)
        if headers != self._fast_headers:  # a client sends the same headers every time
            if not _plain_headers(headers):
                return False
            self._fast_headers = headers
        method, target = m.group(1), m.group(2)
        found = self._fast_file(method, target)
        if found is None:
            return False
        head, body = found
        out_before = stream.bytes_out
        if self.coalesce:
            stream.write(head + body)
        else:
            stream.write(head)
            if body:
                stream.write(body)
        self._last_fast = self._loop.time()
        self._count(method, target, b"1.1", 200, len(body), out_before)
        return True

    def _fast_file(self, method: bytes, target: bytes) -> tuple[bytes, bytes] | None:
        """The response head and body for a fast-path GET or HEAD of ``target``, or ``None``
        when h11's path must answer (no such regular file under the root reached without a
        symlink, too big for one write, changed while read)."""
        if _PLAIN_NAME.fullmatch(target):
            # /name: the one lstat of _walk is the O_NOFOLLOW of the open (a symlink fails it)
            path = self._root + target.decode("ascii")
        else:
            found = _walk(self._root, target)[1]
            if not isinstance(found, str):
                return None
            path = found
        try:
            # O_NONBLOCK: a FIFO must not block the loop; fstat then turns it away
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            size = st.st_size
            head = _response_head(size, _content_type(path[path.rindex("/") + 1 :]))
            if len(head) + size > CHUNK_SIZE:
                return None
            body = b"" if method == b"HEAD" else os.read(fd, size)
        finally:
            os.close(fd)
        if len(body) != size and method != b"HEAD":
            return None  # the file changed under us: h11's path copes with that
        return head, body

    async def run(self) -> None:
        """Serve requests until the client closes, h11 says close, or a timeout.

        A client gets ``idle_timeout`` seconds for the *whole* head of each
        request (counted from the end of the previous response), so trickling
        one header byte at a time does not keep a connection open forever;
        each read of a request body gets ``idle_timeout`` anew.
        """
        loop = self._loop
        body_bytes = 0
        # the first request's clock starts at the end of the handshake: a TLSProtocol served with
        # lazy_handler starts this handler only when the client sends its first bytes
        started = getattr(self.stream, "handshake_at", None)
        deadline = (loop.time() if started is None else started) + self.idle_timeout
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
        status, sent = await self._respond_inner(request)
        self._count(request.method, request.target, request.http_version, status, sent, out_before)

    def _count(self, method: bytes, target: bytes, version: bytes, status: int, sent: int, out_before: int) -> None:
        """Count one answered request and log its line."""
        self.stats.requests += 1
        app_data = self.stream.app_data
        app_data["requests"] = int(app_data.get("requests", 0)) + 1
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                '%s "%s %s HTTP/%s" %d body=%d wire_out=%d',
                peer_label(self.stream),
                method.decode("ascii", "replace"),
                target.decode("ascii", "replace"),
                version.decode("ascii", "replace"),
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
