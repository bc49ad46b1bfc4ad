"""The SSL-splitting origin server: HTTPS whose records leave as stubs (paper §4.1).

It is the HTTPS file server of :mod:`testbed.apps` (static files, HTTP/1.1 via h11) with
one change: each TLS connection uses a
:class:`~sslsplit.writer.SplittingRecordWriter`, so the bytes that go to the
proxy are stubs, MACs and payload ids instead of records.  A second port
serves the record store to proxies that miss (:mod:`sslsplit.aio`).

Modes (``--mode``): ``null`` accepts only authentication-only suites
(TLS_RSA_WITH_NULL_SHA/_SHA256); ``key-expose`` accepts only AES-CBC suites
and exposes the server-write key; ``auto`` (default) prefers a NULL suite when
the client offers one and falls back to key exposure, as in the paper (§3.4).

With ``--broker barnraising://BROKER/site`` the origin also runs Barnraising's feedback loop
(§7.4, :mod:`sslsplit.barnraising.aio.origin`): a plain HTTPS port for the site's ``trusted.`` name
redirects every request to one live volunteer under ``--mirror``, the splitting port watches
for the redirected request to arrive through that volunteer within ``--deadline`` seconds,
and volunteers that fail are reported to the broker, which drops them from DNS.

``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment variable) appends each
connection's NSS key-log line to FILE (:mod:`tls12.keylog`; a debugging switch, off by default,
announced by a warning on stderr): the client's view of a split connection is an ordinary TLS
stream with these secrets, so Wireshark decrypts a capture between client and proxy.

Run ``python -m sslsplit.server --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from testbed import cli
from testbed.apps.server import start_server
from testbed.apps.stats import ServerStats
from tls12 import ServerConnection
from tls12.aio import TLSStream, serve
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ServerConfig
from tls12.keylog import KeyLog
from tls12.session import InMemorySessionStore

from ..barnraising.aio.client import BrokerClient
from ..barnraising.aio.origin import OriginFeedback
from ..barnraising.feedback import FeedbackMonitor
from ..barnraising.protocol import ProtocolError
from ..barnraising.uri import URIError
from ..store import RecordStore
from ..wire import IDEncoding
from ..writer import (
    ENCRYPTING_SUITES,
    MODES,
    NULL_SUITES,
    SplittingRecordWriter,
    WriterStats,
    suites_for_mode,
)
from .cli import close_servers, hostport, wait_for_signal
from .payloads import PayloadServerStats, serve_payloads
from .server_upstream import UpstreamForwarder

__all__ = ["SplittingServer", "MODES", "NULL_SUITES", "ENCRYPTING_SUITES", "suites_for_mode", "main"]

logger = logging.getLogger("sslsplit.server")

@dataclass
class SplitTotals:
    """Totals over closed connections: what the server sent and what splitting saved."""

    connections: int = 0
    bytes_to_proxies: int = 0
    payload_bytes: int = 0
    digest_payload_bytes: int = 0
    digest_stubs: int = 0

    def add(self, stream: TLSStream, stats: WriterStats) -> None:
        self.connections += 1
        self.bytes_to_proxies += stream.bytes_out
        self.payload_bytes += stats.payload_bytes
        self.digest_payload_bytes += stats.digest_payload_bytes
        self.digest_stubs += stats.digest_stubs


class SplittingServer:
    """Serves ``root`` (or forwards to ``upstream``) to SSL-splitting proxies; ``start()`` on a running loop."""

    def __init__(
        self,
        root: str | Path | None,
        credentials: Credentials,
        *,
        upstream: tuple[str, int] | None = None,
        mode: str = "auto",
        encoding: IDEncoding = IDEncoding.DIGEST_SHA256,
        store: RecordStore | None = None,
        session_cache: bool = True,
        idle_timeout: float = 30.0,
        feedback: OriginFeedback | None = None,
        keylog: KeyLog | None = None,
    ) -> None:
        """``feedback`` (Barnraising, §7.4): watch the requests the origin redirected to
        volunteers (:class:`~sslsplit.barnraising.aio.origin.OriginFeedback`); needs ``root``.
        ``keylog``: the debugging switch of :mod:`tls12.keylog` (off by default)."""
        if (root is None) == (upstream is None):
            raise ValueError("give exactly one of root (a document root) and upstream (an HTTP server)")
        self.root = Path(root) if root is not None else None
        self.upstream = upstream
        self.config = ServerConfig(
            credentials=credentials,
            cipher_suites=suites_for_mode(mode),
            session_store=InMemorySessionStore() if session_cache else None,
            keylog=keylog,
        )
        self.mode = mode
        self.encoding = encoding
        self.store = store if store is not None else RecordStore()
        self.idle_timeout = idle_timeout
        self.feedback = feedback
        if feedback is not None and self.root is None:
            raise ValueError("the feedback loop serves a document root, not an upstream")
        self.stats = ServerStats()
        self.totals = SplitTotals()
        self.store_stats = PayloadServerStats()
        self._servers: list[asyncio.AbstractServer] = []
        self.port = 0
        self.store_port = 0

    @property
    def bytes_sent(self) -> int:
        """Everything the origin sent: stubs to proxies (closed connections) and cache-miss payloads."""
        return self.totals.bytes_to_proxies + self.store_stats.bytes_out

    def _connection(self, config: ServerConfig) -> ServerConnection:
        writer = SplittingRecordWriter(self.store, self.encoding, expose_keys=self.mode != "null")
        return ServerConnection(config, record_writer=writer)

    def _closed(self, stream: TLSStream) -> None:
        writer = stream.conn.record_writer  # type: ignore[attr-defined]  # this server's connections are ServerConnections
        writer.release()
        self.totals.add(stream, writer.stats)
        saved = writer.stats.digest_payload_bytes - writer.stats.digest_stubs * 32
        logger.info(
            "connection %s: %d B to proxy, %d payload B, %d B as digest stubs (saved ~%d B)",
            stream.peername, stream.bytes_out, writer.stats.payload_bytes, writer.stats.digest_payload_bytes, saved,
        )

    async def start(self, host: str = "127.0.0.1", port: int = 0, store_port: int = 0) -> None:
        if self.feedback is not None and self.root is not None:
            fb = self.feedback

            def closed_fb(stream: TLSStream) -> None:
                self.stats.record(stream)
                self._closed(stream)
                fb.closed(stream)

            tls = await serve(
                fb.handler("mirror", self.root.resolve(strict=True), self.stats, self.idle_timeout,
                           coalesce=False),
                host, port, self.config, connection_factory=self._connection,
                on_open=self.stats.open, on_close=closed_fb,
            )
        elif self.root is not None:
            tls = await start_server(
                self.root, host, port, self.config, stats=self.stats, idle_timeout=self.idle_timeout,
                connection_factory=self._connection, on_close=self._closed, coalesce=False,  # header-free payload records
            )
        else:
            upstream = self.upstream
            assert upstream is not None

            async def forward(stream: TLSStream) -> None:
                await UpstreamForwarder(stream, upstream, timeout=self.idle_timeout).run()

            def closed(stream: TLSStream) -> None:
                self.stats.record(stream)
                self._closed(stream)

            tls = await serve(forward, host, port, self.config, connection_factory=self._connection, on_close=closed)
        store = await serve_payloads(
            lambda enc, ident: self.store.get(ident), host, store_port, stats=self.store_stats
        )
        self._servers = [tls, store]
        self.port = tls.sockets[0].getsockname()[1]
        self.store_port = store.sockets[0].getsockname()[1]

    async def close(self) -> None:
        await close_servers(self._servers)
        self._servers = []


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=cli.program_name("sslsplit.server"),
        description="SSL-splitting origin server: serves a document root to splitting proxies as stubs "
        "(handshakes, MACs and payload ids) and publishes payloads for cache misses.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--root", type=cli.existing_directory, help="document root to serve")
    src.add_argument("--upstream", type=hostport, metavar="HOST:PORT",
                     help="forward requests to this plain HTTP server instead (like the paper's STunnel setup)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=cli.port, default=8443, help="port proxies connect to (default 8443)")
    p.add_argument("--store-port", type=cli.port, default=8444, help="port of the record store for cache misses (default 8444)")
    p.add_argument("--cert", type=Path, help="PEM certificate chain (default: a fresh self-signed one)")
    p.add_argument("--key", type=Path, help="PEM RSA private key matching --cert")
    p.add_argument("--mode", choices=MODES, default="auto", help="suites to accept (default auto: NULL if offered, else key-expose)")
    p.add_argument("--encoding", choices=("sha256", "sha1"), default="sha256", help="payload id digest (sha1 = the paper's)")
    p.add_argument("--store-max-mb", type=cli.non_negative_float, default=256.0, help="unpinned record store bound in MiB (default 256)")
    fb = p.add_argument_group("Barnraising feedback loop (paper §7.4)")
    fb.add_argument("--broker", metavar="URI", help="barnraising://BROKER/site: redirect the trusted "
                    "name to the site's volunteers and report those that fail")
    fb.add_argument("--report-token", default="", help="the site's secret for reports")
    fb.add_argument("--mirror", metavar="NAME", help="DNS name under which volunteers are named (mirror.example)")
    fb.add_argument("--trusted-port", type=cli.port, default=8445, help="plain HTTPS port of the trusted name (default 8445)")
    fb.add_argument("--deadline", type=cli.positive_float, default=2.0,
                    help="seconds a redirected request has to arrive through its volunteer (default 2)")
    cli.add_keylog_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log every connection and request")
    return p


def _feedback(args: argparse.Namespace) -> OriginFeedback | None:
    """The feedback loop the options ask for (``--broker``), or None."""
    if args.broker is None:
        if args.mirror or args.report_token:
            raise cli.UsageError("--mirror and --report-token go with --broker")
        return None
    if args.root is None or not args.mirror or not args.report_token:
        raise cli.UsageError("--broker needs --root, --mirror and --report-token")
    try:
        client = BrokerClient(args.broker)
    except URIError as exc:
        raise cli.UsageError(f"--broker: {exc}") from None
    return OriginFeedback(client, args.report_token, mirror=args.mirror,
                          monitor=FeedbackMonitor(args.deadline))


async def _run(args: argparse.Namespace, creds: Credentials, keylog: KeyLog | None = None) -> None:
    feedback = _feedback(args)
    server = SplittingServer(
        args.root, creds, upstream=args.upstream, mode=args.mode,
        encoding=IDEncoding.DIGEST if args.encoding == "sha1" else IDEncoding.DIGEST_SHA256,
        store=RecordStore(int(args.store_max_mb * (1 << 20))), feedback=feedback, keylog=keylog,
    )
    if feedback is not None:  # the broker first: a wrong URI fails before anything listens
        try:
            await feedback.start()
        except (ProtocolError, OSError, TimeoutError) as exc:
            await feedback.close()
            why = cli.describe_os_error(exc) if isinstance(exc, OSError) else str(exc) or "timed out"
            raise cli.CLIError(f"cannot use broker {args.broker}: {why}") from None
    await server.start(args.host, args.port, args.store_port)
    print(f"splitting server on {args.host}:{server.port}, record store on {args.host}:{server.store_port}", flush=True)
    if feedback is not None:
        port = await feedback.start_trusted(args.root.resolve(), server.config, args.host, args.trusted_port)
        print(f"trusted name on {args.host}:{port}, redirecting to volunteers under {feedback.mirror}", flush=True)
    await wait_for_signal()
    if feedback is not None:
        await feedback.close()
    await server.close()
    t = server.totals
    print(f"{t.connections} connections, {t.bytes_to_proxies} B sent to proxies for {t.payload_bytes} B of payload")


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if (args.cert is None) != (args.key is None):
        raise cli.UsageError("give both --cert and --key, or neither")
    creds = cli.load_credentials_arg(args.cert, args.key) if args.cert else generate_self_signed()
    asyncio.run(_run(args, creds, cli.keylog_arg(args.keylog)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when a port is in use)."""
    return cli.run_main(build_parser(), _main, argv)

