"""A static-file HTTPS server on top of :mod:`tls12`: the testbed's HTTPS baseline.

HTTP/1.1 is parsed and produced by h11 (itself sans-IO); TLS by the
:mod:`tls12` core; :mod:`tls12.aio` connects both to asyncio sockets.  What the
server does:

* ``GET`` and ``HEAD`` of files under ``--root`` with ``Content-Length``,
  ``Content-Type`` and keep-alive (several requests per connection);
  ``index.html`` for a directory; 404 for anything missing, 405 (with
  ``Allow``) for other methods, 403 for paths that leave the root (``..``
  segments, symlinks pointing outside), 400 for malformed HTTP;
* large files are streamed in :data:`CHUNK_SIZE` pieces with ``drain()``
  backpressure, never read whole into memory;
* the response head shares its TLS record with the start of the body
  (*coalescing*, as nginx and ``openssl s_server`` do), so a small page is one
  record and one socket write; ``coalesce=False`` (``--no-coalesce``) gives the
  head a record of its own -- see :class:`HTTPFileHandler`;
* one log line per request with the body size and the TLS bytes this
  response put on the socket; :class:`ServerStats` keeps the per-connection
  socket byte counts for the experiments.

Command line (``--help`` lists all options)::

    python -m tls12.https_server --root DIR --port 8443 --ciphers AES128-SHA:NULL-SHA

prints ``listening on https://HOST:PORT`` once it accepts connections.  In
Python, :func:`start_server` runs it on the current event loop and
:class:`BackgroundServer` in a thread with its own loop (what tests and the
demo use)::

    with BackgroundServer(root, ServerConfig(credentials=generate_self_signed())) as srv:
        subprocess.run(["curl", "-k", f"{srv.url}/file.bin"])
        print(srv.stats.connections[-1].bytes_out)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import mimetypes
import os
import signal
import stat
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType

import h11

from . import cli
from .aio import DEFAULT_HANDSHAKE_TIMEOUT, SansIOConnection, TLSStream, serve
from .certs import generate_self_signed
from .config import ServerConfig
from .server_connection import ServerConnection
from .session import InMemorySessionStore
from .suites import DEFAULT_SUITES, SUITES, parse_suite_list

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_IDLE_TIMEOUT",
    "ConnectionRecord",
    "ServerStats",
    "HTTPFileHandler",
    "resolve_target",
    "resolve_following_links",
    "start_server",
    "BackgroundServer",
    "build_parser",
    "main",
]

logger = logging.getLogger(__name__)

CHUNK_SIZE = 16 * 16384
"""Bytes read from a file per step: 16 full TLS records."""

DEFAULT_IDLE_TIMEOUT = 30.0
"""Seconds a keep-alive connection may stay silent between requests."""

MAX_REQUEST_BODY = 1 << 20
"""Request bodies are read and discarded; a connection sending more is closed."""

SERVER_NAME = "tls12-https-server"


@dataclass(frozen=True)
class ConnectionRecord:
    """What one finished connection cost on the wire."""

    peer: str
    bytes_in: int
    """Raw bytes read from the socket (TLS records of the client)."""
    bytes_out: int
    """Raw bytes written to the socket (TLS records of the server)."""
    requests: int
    cipher_suite: int | None
    resumed: bool
    error: str | None
    """Class name of the error that ended the connection, if any."""
    alerts_received: tuple[int, ...] = ()
    """Descriptions of the alerts the client sent (close_notify is not counted)."""
    server_name: str | None = None
    """The SNI host name the client asked for."""


@dataclass
class ServerStats:
    """Counters of a running server (updated by the server's event loop only)."""

    requests: int = 0
    opened: int = 0
    """Connections accepted so far (``opened - len(finished)`` are still open)."""
    bytes_in: int = 0
    bytes_out: int = 0
    connections: deque[ConnectionRecord] = field(default_factory=lambda: deque(maxlen=10000))
    """The most recent finished connections, oldest first (bounded)."""

    closed: int = 0
    """Connections finished so far."""

    @property
    def active(self) -> int:
        """Connections accepted and not yet finished."""
        return self.opened - self.closed

    def open(self, stream: TLSStream) -> None:
        """Count an accepted connection (the ``on_open`` callback of :func:`tls12.aio.serve`)."""
        self.opened += 1

    def record(self, stream: TLSStream) -> None:
        """Add a finished connection (the ``on_close`` callback of :func:`tls12.aio.serve`)."""
        self.bytes_in += stream.bytes_in
        self.bytes_out += stream.bytes_out
        hs = stream.handshake
        self.connections.append(
            ConnectionRecord(
                peer=_peer(stream),
                bytes_in=stream.bytes_in,
                bytes_out=stream.bytes_out,
                requests=int(stream.app_data.get("requests", 0)),
                cipher_suite=None if hs is None else int(hs.cipher_suite),
                resumed=False if hs is None else hs.resumed,
                error=None if stream.error is None else type(stream.error).__name__,
                alerts_received=tuple(int(a.description) for a in stream.alerts),
                server_name=None if hs is None else hs.server_name,
            )
        )
        self.closed += 1


def _peer(stream: TLSStream) -> str:
    peer = stream.peername
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


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
        """One write to the stream (one run of records), then wait for backpressure."""
        if data:
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
                logger.info("%s idle for %.1f s, closing", _peer(self.stream), self.idle_timeout)
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
        logger.info("%s bad HTTP: %s", _peer(self.stream), exc)
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
            _peer(self.stream),
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
                    await self._write(pending + data if pending else data)
                    pending = b""
                    sent += len(chunk)
            await self._write(pending + self._encode(h11.EndOfMessage()))
        return 200, sent


async def start_server(
    root: str | Path,
    host: str,
    port: int,
    config: ServerConfig,
    *,
    stats: ServerStats | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    connection_factory: Callable[[ServerConfig], SansIOConnection] = ServerConnection,
    on_close: Callable[[TLSStream], None] | None = None,
    coalesce: bool = True,
) -> asyncio.Server:
    """Serve the files under ``root`` over HTTPS on the running event loop.

    Counters go to ``stats`` (pass your own :class:`ServerStats` to read them).
    ``connection_factory`` and ``on_close`` are passed to :func:`tls12.aio.serve`:
    protocol variants (an SSL-splitting server) build their own connections
    and release per-connection state when a connection ends.  ``coalesce``
    decides whether the response head shares a record with the body (see
    :class:`HTTPFileHandler`); SSL splitting turns it off.
    """
    root_path = Path(root).resolve(strict=True)
    if not root_path.is_dir():
        raise NotADirectoryError(f"{root} is not a directory")
    the_stats = stats if stats is not None else ServerStats()

    async def handler(stream: TLSStream) -> None:
        await HTTPFileHandler(stream, root_path, the_stats, idle_timeout, coalesce=coalesce).run()

    return await serve(
        handler,
        host,
        port,
        config,
        handshake_timeout=handshake_timeout,
        connection_factory=connection_factory,
        on_open=the_stats.open,
        on_close=_chain(the_stats.record, on_close),
    )


def _chain(first: Callable[[TLSStream], None], second: Callable[[TLSStream], None] | None) -> Callable[[TLSStream], None]:
    if second is None:
        return first

    def both(stream: TLSStream) -> None:
        first(stream)
        second(stream)

    return both


class BackgroundServer:
    """The HTTPS server in a daemon thread with its own event loop.

    Used as a context manager; ``port`` and ``url`` are known after entering.
    ``stop()`` closes the listening socket and cancels open connections.
    """

    def __init__(
        self,
        root: str | Path,
        config: ServerConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        coalesce: bool = True,
    ) -> None:
        self.root = Path(root)
        self.config = config
        self.host = host
        self.port = port
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.coalesce = coalesce
        self.stats = ServerStats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            server = await start_server(
                self.root,
                self.host,
                self.port,
                self.config,
                stats=self.stats,
                handshake_timeout=self.handshake_timeout,
                idle_timeout=self.idle_timeout,
                coalesce=self.coalesce,
            )
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            raise
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        # asyncio.run() cancels the connection tasks still running

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported through start()
            if self._failure is None:
                self._failure = exc

    def wait_idle(self, timeout: float = 10.0) -> int:
        """Wait until no connection is open; returns the number of finished connections.

        Call it before starting a client whose connection record you want:
        the record will then be ``stats.connections[returned value]``.
        """
        deadline = time.monotonic() + timeout
        while self.stats.active > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.stats.active} connection(s) still open after {timeout} s")
            time.sleep(0.005)
        return len(self.stats.connections)

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start the thread and wait until the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name="https-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"server not ready after {timeout} s")
        if self._failure is not None:
            raise RuntimeError(f"server failed to start: {self._failure!r}") from self._failure
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # loop already closed
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"server thread still running after {timeout} s")
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (also used by ``--help``)."""
    names = ":".join(p.openssl_name for p in SUITES.values())
    default = ":".join(SUITES[s].openssl_name for s in DEFAULT_SUITES)
    parser = argparse.ArgumentParser(
        prog="python -m tls12.https_server",
        description="Static-file HTTPS server (HTTP/1.1 over the tls12 TLS 1.2 core).",
    )
    parser.add_argument("--root", required=True, type=cli.existing_directory, help="directory to serve")
    parser.add_argument("--port", type=cli.port, default=8443, help="TCP port (0 = any free port; default 8443)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--cert", type=Path, help="PEM certificate chain (default: a fresh self-signed one)")
    parser.add_argument("--key", type=Path, help="PEM RSA private key belonging to --cert")
    parser.add_argument(
        "--ciphers",
        default=default,
        help=f"colon-separated suites in preference order (known: {names}; default {default})",
    )
    parser.add_argument("--session-cache", action="store_true", help="enable session resumption by session ID")
    parser.add_argument(
        "--handshake-timeout", type=cli.positive_float, default=DEFAULT_HANDSHAKE_TIMEOUT, help="seconds (default %(default)s)"
    )
    parser.add_argument(
        "--idle-timeout", type=cli.positive_float, default=DEFAULT_IDLE_TIMEOUT, help="keep-alive seconds (default %(default)s)"
    )
    parser.add_argument(
        "--no-coalesce",
        dest="coalesce",
        action="store_false",
        help="write each response head in a TLS record of its own (default: the head shares the first record with the body)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    return parser


async def _serve_until_signal(args: argparse.Namespace, config: ServerConfig) -> None:
    """Serve until SIGINT or SIGTERM, then close the listening socket and return."""
    server = await start_server(
        args.root,
        args.host,
        args.port,
        config,
        handshake_timeout=args.handshake_timeout,
        idle_timeout=args.idle_timeout,
        coalesce=args.coalesce,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on https://{host}:{port}", flush=True)
    async with server:
        await stop.wait()
    logger.info("stopping")


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if (args.cert is None) != (args.key is None):
        raise cli.UsageError("--cert and --key go together")
    try:
        suites = parse_suite_list(args.ciphers)
    except ValueError as exc:
        raise cli.UsageError(f"--ciphers: {exc}") from None
    creds = cli.load_credentials_arg(args.cert, args.key) if args.cert else generate_self_signed()
    config = ServerConfig(
        credentials=creds,
        cipher_suites=suites,
        session_store=InMemorySessionStore() if args.session_cache else None,
    )
    asyncio.run(_serve_until_signal(args, config))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m tls12.https_server``: bad input is one line on stderr, exit 2."""
    return cli.run_main(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
