"""The untrusted host: a static-file web server, its TLS connections' secrets in a guardian.

::

    python -m webalps_sim.host --mode webalps --port P --docroot DIR --guardian SOCK \
        [--http-port H] [--guardian-timeout SECONDS] [--guardian-wait SECONDS] [--session-cache]
    python -m webalps_sim.host --mode https   --port P --docroot DIR [--cert C --key K] [--http-port H]
    python -m webalps_sim.host --mode http    --port P --docroot DIR

Every mode serves the files under ``DIR`` with the h11 handler of the HTTPS file server
(:class:`testbed.apps.file_handler.HTTPFileHandler`), so the baselines of the paper's Tables 1/2
differ only in the transport:

* ``http`` -- plain HTTP over TCP;
* ``https`` -- the ordinary :mod:`tls12` server with its own key (``--cert``/``--key``, or a
  fresh self-signed pair);
* ``webalps`` -- every connection is a :class:`tls12.ServerConnection` that asks its delegate
  by event (:class:`tls12.delegate.EventDelegate`), and a
  :class:`webalps_sim.aio.channel.GuardianChannel` answers on the event loop: the host holds the
  guardian's certificate chain (fetched at start) and no private key; the premaster, the
  master secret, every record key and (ECDHE) the ephemeral key stay in the guardian, which
  opens every client record, answers the requests its application claims, and seals every
  record the host sends (``webalps.md`` §4.1).  Suites: :data:`WEBALPS_SUITES` (RSA and ECDHE_RSA
  key exchange, CBC records).  ``--session-cache`` resumes sessions by ID: the cache holds key
  handles (:class:`GuardianSessionStore`), the master secrets stay in the guardian.  A
  keep-alive GET of a small file takes the HTTPS server's fast path (:class:`WebALPSProtocol`:
  answered in the callback that supplies the guardian's ``OPEN`` answer); each request then
  costs one ``OPEN`` and one ``SEAL`` round trip, and a connection's ``RELEASE`` rides with
  the next request (:mod:`webalps_sim.aio.channel`).

``--http-port`` serves plain HTTP from the same process beside the TLS port, as the paper's
Figure 4 server answers plain and secure requests side by side.  The host never waits for the
guardian on its event loop: a question waits at most ``--guardian-timeout`` seconds (default
30), then only the connection that asked ends (``internal_error``, in the clear during the
handshake; after it the socket closes, since a protected alert needs the guardian too).  A
stopped guardian therefore delays only the connections that need it -- new clients still get
the ServerHello flight of an RSA suite at once (an ECDHE ServerKeyExchange is signed by the
guardian), and plain HTTP is served throughout; when it resumes, the waiting connections go on.

Key log (Wireshark).  In ``https`` mode the host holds the key, and ``--keylog FILE`` (or, without
it, the ``SSLKEYLOGFILE`` environment variable) appends each connection's NSS key-log line to
FILE (:mod:`tls12.keylog`; a debugging switch, off by default, announced by a warning on
stderr).  In ``webalps`` mode the host never holds a master secret, so it cannot write one: the
key log comes from the **guardian** (``python -m webalps_sim.guardian --keylog FILE``, or
``SSLKEYLOGFILE`` in the guardian's environment) or from the client (curl, browsers and Python's
``ssl`` read ``SSLKEYLOGFILE``).  There ``--keylog`` is a usage error, and an ``SSLKEYLOGFILE``
in the host's environment is not read (one note on stderr says where the key log comes from).

The host prints ``listening on URL`` for the TLS port (then for ``--http-port``) once it accepts
connections.  If the guardian dies, the connections using it fail and the host reconnects on the
next question; a guardian restarted with the same state serves again without a host restart.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography import x509

from testbed import cli
from testbed.apps.file_handler import DEFAULT_IDLE_TIMEOUT, HTTPFileHandler
from testbed.apps.server import start_server
from testbed.apps.stats import ServerStats
from tls12.aio import DEFAULT_HANDSHAKE_TIMEOUT, TLSProtocol, TLSStream
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ServerConfig
from tls12.delegate import DelegateRequest, EphemeralKey, EventDelegate, FlightResult, KeyHandle
from tls12.keylog import ENV_VAR, KeyLog
from tls12.server_connection import ServerConnection
from tls12.session import InMemorySessionStore, Session
from tls12.suites import DEFAULT_SUITES, CipherSuite, parse_suite_list

from ..questions import OPERATIONS, WEBALPS_SUITES, GuardianUnavailable, prepare
from .channel import DEFAULT_TIMEOUT, GuardianChannel

__all__ = [
    "WEBALPS_SUITES",
    "webalps_config",
    "webalps_connection",
    "guardian_answer",
    "GuardianSessionStore",
    "handle_releaser",
    "start_webalps_server",
    "WebALPSProtocol",
    "PlainStream",
    "start_http_server",
    "main",
]

logger = logging.getLogger(__name__)

def webalps_config(chain: list[bytes], suites: tuple[CipherSuite, ...] = WEBALPS_SUITES,
                   session_store: Any = None) -> ServerConfig:
    """A server config with the guardian's certificate chain (DER, leaf first) and no key."""
    bad = [s for s in suites if s not in WEBALPS_SUITES]
    if bad:
        raise ValueError(f"a guardian serves RSA and ECDHE_RSA CBC suites only, not {bad}")
    certs = tuple(x509.load_der_x509_certificate(c) for c in chain)
    return ServerConfig(credentials=Credentials.chain_only(certs), cipher_suites=suites,
                        session_store=session_store)


def webalps_connection(config: ServerConfig) -> ServerConnection:
    """``connection_factory``: a server connection that asks the guardian by event."""
    return ServerConnection(config, delegate=EventDelegate(OPERATIONS))


def _handles_in(answer: object) -> list[KeyHandle]:
    if isinstance(answer, KeyHandle):
        return [answer]
    if isinstance(answer, (FlightResult, EphemeralKey)):
        return [answer.handle]
    return []


def guardian_answer(channel: GuardianChannel) -> Callable[[Any, DelegateRequest], Any]:
    """``answer(conn, request)`` for :func:`tls12.aio.serve`: the future of the guardian's
    answer (:meth:`GuardianChannel.ask`; no task per question).  The moment the answer is
    known -- before the stream supplies it -- what the guardian sealed by itself is queued
    (:func:`webalps_sim.questions.prepare`), or, for a connection that is gone meanwhile, a
    handle in the answer is released at once."""

    def answer(conn: Any, request: DelegateRequest) -> Any:
        def then(result: object) -> None:
            if conn.closed:
                for handle in _handles_in(result):
                    channel.release(handle)
            else:
                prepare(conn, result)

        return channel.ask(request, then)

    return answer


class GuardianSessionStore:
    """A session cache for a WebALPS host: an LRU of sessions that hold guardian key handles.

    A session that leaves the cache (evicted, removed) has its handle released in the guardian,
    so the guardian keeps at most ``max_entries`` resumable master secrets; when the guardian
    restarts (or the channel to it is opened again: the guardian frees the handles of a closed
    host connection), every handle is gone and the cache is emptied (``on_restart``).
    """

    def __init__(self, remote: Any, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self.remote = remote
        self.max_entries = max_entries
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()
        self._handles: set[int] = set()
        remote.on_restart.append(self.clear)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: bytes) -> Session | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def put(self, session: Session) -> None:
        old = self._sessions.pop(session.session_id, None)
        if old is not None:
            self._forget(old)
        self._sessions[session.session_id] = session
        if isinstance(session.handle, KeyHandle):
            self._handles.add(session.handle.id)
        while len(self._sessions) > self.max_entries:
            self._forget(self._sessions.popitem(last=False)[1])

    def remove(self, session_id: bytes) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._forget(session)

    def holds(self, handle: KeyHandle) -> bool:
        """Whether a cached session still needs ``handle``."""
        return handle.id in self._handles

    def clear(self) -> None:
        """Forget every session without releasing (the guardian that held them is gone)."""
        self._sessions.clear()
        self._handles.clear()

    def _forget(self, session: Session) -> None:
        if isinstance(session.handle, KeyHandle):
            self._handles.discard(session.handle.id)
            self.remote.release(session.handle)


def handle_releaser(channel: Any, store: GuardianSessionStore | None = None
                    ) -> Callable[[TLSStream], None]:
    """``on_close``: tell the guardian to forget a closed connection's keys (``channel``: a
    :class:`GuardianChannel` or a blocking :class:`webalps_sim.aio.remote.RemoteDelegate`).

    Keys that a cached session still names (``store``) stay until the session leaves the cache;
    an ephemeral key whose ClientKeyExchange never came goes too.
    """

    def release(stream: TLSStream) -> None:
        conn = stream.conn
        if not isinstance(conn, ServerConnection):
            return
        for handle in (conn.key_handle, conn.ephemeral_handle):
            if handle is not None and not (store is not None and store.holds(handle)):
                channel.release(handle)

    return release


class WebALPSProtocol(TLSProtocol):
    """A WebALPS host connection on its transport, with the HTTPS server's fast path.

    Nothing to override: :class:`tls12.aio.TLSProtocol` offers its
    :attr:`~tls12.aio.TLSProtocol.fast_reader` the plaintext of a connection that asks by event
    when it arrives, with the guardian's ``OPEN`` answer (the conditions of the transport's
    callback: one piece, nothing wrong), and its :attr:`~tls12.aio.TLSProtocol.write_ready`
    holds while no record waits for its ``SEAL``.  So a keep-alive GET of a small file is
    answered as HTTPS answers it: in the callback, bytes for bytes what the handler would
    write, its response then sealed in one ``SEAL``.
    """


async def start_webalps_server(docroot: str | Path, host: str, port: int, channel: GuardianChannel,
                               *, suites: tuple[CipherSuite, ...] = WEBALPS_SUITES,
                               session_cache: bool = False, stats: ServerStats | None = None,
                               idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> asyncio.Server:
    """The WebALPS host's TLS server on the running loop (the channel is connected here): the
    HTTPS file server of :func:`testbed.apps.server.start_server`, each connection a
    :class:`WebALPSProtocol` asking ``channel``."""
    chain = await channel.chain()
    store = GuardianSessionStore(channel) if session_cache else None
    config = webalps_config(chain, suites, store)
    root = Path(docroot).resolve(strict=True)
    if not root.is_dir():
        raise NotADirectoryError(f"{docroot} is not a directory")
    counters = stats if stats is not None else ServerStats()
    answer, release = guardian_answer(channel), handle_releaser(channel, store)

    async def handler(stream: TLSStream) -> None:
        await HTTPFileHandler(stream, root, counters, idle_timeout).run()

    def on_close(stream: TLSStream) -> None:
        counters.record(stream)
        release(stream)

    def factory() -> WebALPSProtocol:
        return WebALPSProtocol(webalps_connection(config), answer=answer, handler=handler,
                               handshake_timeout=DEFAULT_HANDSHAKE_TIMEOUT,
                               on_open=counters.open, on_close=on_close)

    return await asyncio.get_running_loop().create_server(factory, host, port)


class PlainStream:
    """What :class:`HTTPFileHandler` needs from a stream, over plain TCP (the HTTP baseline)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.bytes_in = 0
        self.bytes_out = 0
        self.app_data: dict[str, Any] = {}
        self.handshake = None
        self.alerts: list[Any] = []
        self.error: BaseException | None = None

    @property
    def peername(self) -> Any:
        return self.writer.get_extra_info("peername")

    async def read(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self.reader.read(max_bytes)
        except (ConnectionError, OSError):
            data = b""
        self.bytes_in += len(data)
        return data

    def write(self, data: bytes) -> None:
        if self.writer.is_closing():
            raise ConnectionResetError("the stream is closed")
        self.writer.write(data)
        self.bytes_out += len(data)

    async def drain(self) -> None:
        await self.writer.drain()


async def start_http_server(root: str | Path, host: str, port: int, *,
                            stats: ServerStats | None = None,
                            idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> asyncio.Server:
    """The plain-HTTP baseline: the same file handler without TLS."""
    root_path = Path(root).resolve(strict=True)
    the_stats = stats if stats is not None else ServerStats()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = PlainStream(reader, writer)
        the_stats.open(stream)  # type: ignore[arg-type]  # PlainStream has the TLSStream methods used
        try:
            await HTTPFileHandler(stream, root_path, the_stats, idle_timeout).run()  # type: ignore[arg-type]  # PlainStream has the TLSStream methods used
        except (ConnectionError, OSError) as exc:
            stream.error = exc
        finally:
            writer.close()
            the_stats.record(stream)  # type: ignore[arg-type]  # PlainStream has the TLSStream methods used

    return await asyncio.start_server(on_connect, host, port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=cli.program_name("webalps_sim.host"),
                                     description="WebALPS host: HTTP, HTTPS or via a guardian.")
    parser.add_argument("--mode", required=True, choices=("http", "https", "webalps"))
    parser.add_argument("--port", type=cli.port, default=8443, help="TCP port (0 = any free)")
    parser.add_argument("--http-port", type=cli.port, metavar="PORT",
                        help="also serve plain HTTP on this port from the same process "
                        "(https, webalps; 0 = any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--docroot", required=True, type=cli.existing_directory)
    parser.add_argument("--guardian", type=Path, help="the guardian's Unix socket (webalps)")
    parser.add_argument("--guardian-wait", type=cli.non_negative_float, default=0.0,
                        metavar="SECONDS", help="keep trying to reach the guardian this long at "
                        "start (default 0: fail at once)")
    parser.add_argument("--guardian-timeout", type=cli.positive_float, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS", help="end a connection whose question the guardian "
                        f"has not answered after this long (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--cert", type=Path, help="PEM chain for https mode")
    parser.add_argument("--key", type=Path, help="PEM RSA key for https mode")
    parser.add_argument("--ciphers", help="colon-separated suites (OpenSSL names)")
    parser.add_argument("--session-cache", action="store_true",
                        help="resume sessions by session ID (https, webalps)")
    parser.add_argument("--stats-json", type=Path, metavar="FILE",
                        help="on exit (SIGTERM/SIGINT), write the counters as JSON: requests "
                        "served per port and, in webalps mode, guardian questions per operation, "
                        "round trips and bytes each way")
    cli.add_keylog_option(parser, "https mode only (in webalps mode the guardian writes it): ")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    return parser


async def _wait_for_guardian(channel: GuardianChannel, seconds: float) -> None:
    """Try to reach the guardian for up to ``seconds`` (it may still be starting)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            await channel.connect()
            return
        except GuardianUnavailable:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.1)


async def _tls_server(args: argparse.Namespace, stats: ServerStats,
                      channels: list[GuardianChannel], keylog: KeyLog | None) -> asyncio.Server:
    suites = parse_suite_list(args.ciphers) if args.ciphers else None
    if args.mode == "https":
        creds = (cli.load_credentials_arg(args.cert, args.key) if args.cert
                 else generate_self_signed())
        config = ServerConfig(
            credentials=creds, cipher_suites=suites or DEFAULT_SUITES,
            session_store=InMemorySessionStore() if args.session_cache else None, keylog=keylog,
        )
        return await start_server(args.docroot, args.host, args.port, config, stats=stats)
    channel = GuardianChannel(args.guardian, timeout=args.guardian_timeout)
    channels.append(channel)
    await _wait_for_guardian(channel, args.guardian_wait)
    return await start_webalps_server(args.docroot, args.host, args.port, channel,
                                      suites=suites or WEBALPS_SUITES,
                                      session_cache=args.session_cache, stats=stats)


def _write_stats(path: Path, counters: dict[str, ServerStats],
                 channels: list[GuardianChannel]) -> None:
    """The ``--stats-json`` file: what a benchmark reads after stopping the host."""
    import json

    data: dict[str, Any] = {
        scheme: {"requests": st.requests, "connections": st.opened,
                 "handshakes": st.handshakes, "bytes_in": st.bytes_in,
                 "bytes_out": st.bytes_out}
        for scheme, st in counters.items()
    }
    for channel in channels:
        data["guardian"] = {"questions": dict(channel.requests), "round_trips": channel.round_trips,
                            "reconnects": channel.reconnects, "bytes_out": channel.bytes_out,
                            "bytes_in": channel.bytes_in}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


async def _serve(args: argparse.Namespace, keylog: KeyLog | None = None) -> None:
    servers: list[tuple[str, asyncio.Server]] = []
    counters = {"http": ServerStats()}
    channels: list[GuardianChannel] = []
    if args.mode == "http":
        servers.append(("http", await start_http_server(args.docroot, args.host, args.port,
                                                       stats=counters["http"])))
    else:
        counters["https"] = ServerStats()
        servers.append(("https", await _tls_server(args, counters["https"], channels, keylog)))
        if args.http_port is not None:
            plain = await start_http_server(args.docroot, args.host, args.http_port,
                                            stats=counters["http"])
            servers.append(("http", plain))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for scheme, server in servers:
        host, port = server.sockets[0].getsockname()[:2]
        print(f"listening on {scheme}://{host}:{port}", flush=True)
    try:
        await stop.wait()
    finally:
        for _, server in servers:
            server.close()
        if args.stats_json is not None:
            _write_stats(args.stats_json, counters, channels)


def _keylog(args: argparse.Namespace) -> KeyLog | None:
    """The key log of https mode (``--keylog``, else ``SSLKEYLOGFILE``); in webalps mode the
    guardian writes it (module docstring), and http mode has no TLS."""
    if args.mode != "https":
        if args.keylog is not None:
            raise cli.UsageError("--keylog is for --mode https: a WebALPS host holds no master "
                                 "secret (give --keylog to the guardian)")
        if args.mode == "webalps" and os.environ.get(ENV_VAR):
            print(f"note: {ENV_VAR} is not read in webalps mode: the host holds no master secret; "
                  "the guardian (python -m webalps_sim.guardian --keylog FILE, or its "
                  f"{ENV_VAR}) or the client writes the key log", file=sys.stderr, flush=True)
        return None
    return cli.keylog_arg(args.keylog)


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.mode == "webalps" and args.guardian is None:
        raise cli.UsageError("--mode webalps needs --guardian SOCKET")
    if args.mode == "http" and args.http_port is not None:
        raise cli.UsageError("--http-port is for --mode https or webalps (--port is the HTTP port)")
    if args.mode != "https" and (args.cert or args.key):
        raise cli.UsageError("--cert/--key are for --mode https (a WebALPS host holds no key)")
    if (args.cert is None) != (args.key is None):
        raise cli.UsageError("--cert and --key go together")
    if args.ciphers:
        try:
            parse_suite_list(args.ciphers)
        except ValueError as exc:
            raise cli.UsageError(f"--ciphers: {exc}") from None
    try:
        asyncio.run(_serve(args, _keylog(args)))
    except GuardianUnavailable as exc:
        raise cli.CLIError(str(exc)) from None  # one line, status 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m webalps_sim.host``; bad input is one line on stderr, exit 2."""
    return cli.run_main(build_parser(), _main, argv)

