"""The untrusted host: a static-file web server in three modes, one of them relaying to a guardian.

::

    python -m webalps_sim.host --mode http    --port P --docroot DIR
    python -m webalps_sim.host --mode https   --port P --docroot DIR [--cert C --key K]
    python -m webalps_sim.host --mode webalps --port P --docroot DIR --guardian SOCK \
        [--guardian-wait SECONDS]

All three serve the files under ``DIR`` with the h11 handler of the HTTPS file server
(:class:`testbed.apps.file_handler.HTTPFileHandler`), so the baselines of the paper's Tables 1/2
differ only in the transport:

* ``http`` -- plain HTTP over TCP;
* ``https`` -- the ordinary :mod:`tls12` server with its own key (``--cert``/``--key``, or a
  fresh self-signed pair);
* ``webalps`` -- :class:`WebALPSServerConnection`: a :class:`tls12.ServerConnection` whose
  session delegate is a :class:`webalps_sim.aio.remote.RemoteDelegate` to the guardian.  The host
  holds the guardian's certificate chain (fetched from the guardian at start) and no private key;
  the premaster, the master secret and every record key stay in the guardian, which opens every
  client record, answers the requests its application claims, and seals every record the host
  sends (``webalps.md`` §4.1).  Only RSA-key-exchange CBC suites (:data:`WEBALPS_SUITES`).
  ``--session-cache`` resumes sessions by ID: the cache holds key handles
  (:class:`GuardianSessionStore`), the master secrets stay in the guardian.

The host prints ``listening on URL`` once it accepts connections.  If the guardian dies, the
connections using it fail (their clients see the TLS connection drop) and the host reconnects
on the next handshake; while the guardian is down, new connections fail the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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
from tls12.aio import TLSStream
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ServerConfig
from tls12.delegate import DelegatedWriteProtection, KeyHandle
from tls12.errors import AlertDescription
from tls12.events import Event
from tls12.messages import ClientHello
from tls12.record import ContentType, OutgoingRecord
from tls12.server_connection import ServerConnection
from tls12.session import InMemorySessionStore, Session
from tls12.suites import SUITES, CipherSuite, KeyExchange, parse_suite_list

from .remote import GuardianUnavailable, RemoteDelegate

__all__ = [
    "WEBALPS_SUITES",
    "WebALPSServerConnection",
    "webalps_config",
    "webalps_connection_factory",
    "GuardianSessionStore",
    "handle_releaser",
    "release_handle",
    "PlainStream",
    "start_http_server",
    "main",
]

logger = logging.getLogger(__name__)

_APPLICATION_DATA = ContentType.APPLICATION_DATA

WEBALPS_SUITES: tuple[CipherSuite, ...] = tuple(
    s for s, prm in SUITES.items() if prm.block_size and prm.key_exchange is KeyExchange.RSA
)
"""The suites a guardian serves: RSA key exchange (the delegate's), CBC records."""


class WebALPSServerConnection(ServerConnection):
    """A server connection whose secrets are in the guardian; it passes on the guardian's records.

    When the keys arrive (a handle), it registers with the remote delegate where the responses
    the guardian's application seals go (:meth:`tls12.ServerConnection.queue_sealed`, so they go
    out in sequence); when the client asked that answer to end the connection, the connection
    then sends close_notify.  A lost guardian ends the connection with ``internal_error`` (protected alerts
    need the guardian too, so after the handshake the socket simply closes).

    Sealing waits for the next write: the records of ``send_data`` stay unsealed until
    :meth:`data_to_send` (or anything else that needs them on the wire) and are sealed in one
    guardian call together with whatever is written before that -- a response and the
    close_notify of ``send_data(...); close()`` cost one ``SEAL``, not two.  Sequence numbers
    are assigned when the records are queued, so nothing else changes (a WebALPS host sets no
    record writer: once the keys are in use, its records go straight to the guardian).
    """

    def __init__(self, config: ServerConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._unsealed: list[OutgoingRecord] = []

    def _write_records(self, content_type: int, fragments: list[bytes]) -> None:
        if not isinstance(self._write, DelegatedWriteProtection):  # plaintext handshake
            super()._write_records(content_type, fragments)
            return
        version = self.context.version
        self._unsealed += [OutgoingRecord(content_type, version, self._write.next_seq(), f)
                           for f in fragments]
        if content_type != _APPLICATION_DATA:  # alerts, Finished: out with what came before
            self._seal_unsealed()

    def _seal_unsealed(self) -> None:
        records, self._unsealed = self._unsealed, []
        if records:
            self._output += self._write.seal_many(records)

    def data_to_send(self) -> bytes:
        self._seal_unsealed()
        return super().data_to_send()

    def data_to_send_records(self) -> list[bytes]:
        self._seal_unsealed()
        return super().data_to_send_records()

    def queue_sealed(self, records: bytes, count: int) -> None:
        self._seal_unsealed()  # ours first: they have the earlier sequence numbers
        super().queue_sealed(records, count)

    def _set_delegated_keys(self, handle: KeyHandle) -> None:
        super()._set_delegated_keys(handle)
        delegate = self._delegate
        if isinstance(delegate, RemoteDelegate):
            delegate.attach(handle, self._guardian_records)

    def _guardian_records(self, records: bytes, count: int, close: bool) -> None:
        """Pass on the guardian's answer; close after it if its client asked to."""
        self.queue_sealed(records, count)
        if close:
            self.close()

    def _find_session(self, hello: ClientHello, client_ems: bool) -> Session | None:
        """Before resuming, make sure the guardian that holds the session's keys is still the same
        run (a restarted guardian empties the cache through ``on_restart``: full handshake)."""
        if hello.session_id and self.config.session_store is not None:
            delegate = self._delegate
            if isinstance(delegate, RemoteDelegate):
                delegate.check_alive()
        return super()._find_session(hello, client_ems)

    def receive_data(self, data: bytes, *, max_records: int | None = None) -> list[Event]:
        try:
            self._seal_unsealed()  # before the guardian seals anything of its own
            return super().receive_data(data, max_records=max_records)
        except GuardianUnavailable:
            self.abort(AlertDescription.INTERNAL_ERROR)
            raise

    @property
    def key_handle(self) -> KeyHandle | None:
        """The guardian's name for this connection's keys (nothing secret)."""
        return self._key_handle


def webalps_config(remote: RemoteDelegate, suites: tuple[CipherSuite, ...] = WEBALPS_SUITES,
                   session_store: GuardianSessionStore | None = None) -> ServerConfig:
    """A server config with the guardian's certificate chain and no private key."""
    bad = [s for s in suites if s not in WEBALPS_SUITES]
    if bad:
        raise ValueError(f"a guardian serves RSA CBC suites only, not {bad}")
    chain = tuple(x509.load_der_x509_certificate(c) for c in remote.chain())
    return ServerConfig(credentials=Credentials.chain_only(chain), cipher_suites=suites,
                        session_store=session_store)


def webalps_connection_factory(remote: RemoteDelegate):  # type: ignore[no-untyped-def]
    """``connection_factory`` for :func:`testbed.apps.server.start_server`."""

    def factory(config: ServerConfig) -> WebALPSServerConnection:
        return WebALPSServerConnection(config, delegate=remote)

    return factory


class GuardianSessionStore:
    """A session cache for a WebALPS host: an LRU of sessions that hold guardian key handles.

    A session that leaves the cache (evicted, removed) has its handle released in the guardian,
    so the guardian keeps at most ``max_entries`` resumable master secrets; when the guardian
    restarts, every handle is gone and the cache is emptied (``RemoteDelegate.on_restart``).
    """

    def __init__(self, remote: RemoteDelegate, max_entries: int = 10_000) -> None:
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


def handle_releaser(store: GuardianSessionStore | None = None) -> Callable[[TLSStream], None]:
    """``on_close``: tell the guardian to forget a closed connection's keys.

    Keys that a cached session still names (``store``) stay until the session leaves the cache.
    """

    def release(stream: TLSStream) -> None:
        conn = stream.conn
        if not isinstance(conn, WebALPSServerConnection) or conn.key_handle is None:
            return
        if store is not None and store.holds(conn.key_handle):
            return
        delegate = conn._delegate
        assert isinstance(delegate, RemoteDelegate)
        delegate.release(conn.key_handle)

    return release


release_handle = handle_releaser()
"""``on_close`` of a WebALPS host without a session cache."""


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
        the_stats.open(stream)  # type: ignore[arg-type]
        try:
            await HTTPFileHandler(stream, root_path, the_stats, idle_timeout).run()  # type: ignore[arg-type]
        except (ConnectionError, OSError) as exc:
            stream.error = exc
        finally:
            writer.close()
            the_stats.record(stream)  # type: ignore[arg-type]

    return await asyncio.start_server(on_connect, host, port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webalps_sim.host",
                                     description="WebALPS host: HTTP, HTTPS or via a guardian.")
    parser.add_argument("--mode", required=True, choices=("http", "https", "webalps"))
    parser.add_argument("--port", type=cli.port, default=8443, help="TCP port (0 = any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--docroot", required=True, type=cli.existing_directory)
    parser.add_argument("--guardian", type=Path, help="the guardian's Unix socket (webalps)")
    parser.add_argument("--guardian-wait", type=cli.non_negative_float, default=0.0,
                        metavar="SECONDS", help="keep trying to reach the guardian this long at "
                        "start (default 0: fail at once)")
    parser.add_argument("--cert", type=Path, help="PEM chain for https mode")
    parser.add_argument("--key", type=Path, help="PEM RSA key for https mode")
    parser.add_argument("--ciphers", help="colon-separated suites (OpenSSL names)")
    parser.add_argument("--session-cache", action="store_true",
                        help="resume sessions by session ID (https, webalps)")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    return parser


async def _wait_for_guardian(remote: RemoteDelegate, seconds: float) -> None:
    """Try to reach the guardian for up to ``seconds`` (it may still be starting)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            remote.connect()
            return
        except GuardianUnavailable:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.1)


async def _serve(args: argparse.Namespace) -> None:
    if args.mode == "http":
        server = await start_http_server(args.docroot, args.host, args.port)
        scheme = "http"
    else:
        suites = parse_suite_list(args.ciphers) if args.ciphers else None
        if args.mode == "https":
            creds = (cli.load_credentials_arg(args.cert, args.key) if args.cert
                     else generate_self_signed())
            config = ServerConfig(
                credentials=creds, **({"cipher_suites": suites} if suites else {}),
                session_store=InMemorySessionStore() if args.session_cache else None,
            )
            server = await start_server(args.docroot, args.host, args.port, config)
        else:
            remote = RemoteDelegate(args.guardian)
            await _wait_for_guardian(remote, args.guardian_wait)
            store = GuardianSessionStore(remote) if args.session_cache else None
            config = webalps_config(remote, suites or WEBALPS_SUITES, store)
            server = await start_server(args.docroot, args.host, args.port, config,
                                        connection_factory=webalps_connection_factory(remote),
                                        on_close=handle_releaser(store))
        scheme = "https"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on {scheme}://{host}:{port}", flush=True)
    async with server:
        await stop.wait()


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.mode == "webalps" and args.guardian is None:
        raise cli.UsageError("--mode webalps needs --guardian SOCKET")
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
        asyncio.run(_serve(args))
    except GuardianUnavailable as exc:
        raise cli.CLIError(str(exc)) from None  # one line, status 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m webalps_sim.host``; bad input is one line on stderr, exit 2."""
    return cli.run_main(build_parser(), _main, argv)

