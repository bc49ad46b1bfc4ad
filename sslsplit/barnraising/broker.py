"""The Barnraising broker on sockets: the join protocol over HTTP/1.1, leases, optional DNS.

Paper §5.1, Figure 6: volunteers join a site through the broker, and the broker points
clients at them through DNS.  :class:`Broker` puts the sans-IO pieces on the network:

* the join protocol (:mod:`.protocol`) over HTTP/1.1, framed by h11, one request at a time
  per keep-alive connection; every request goes to :meth:`.Registry.handle`, which commits
  any change to SQLite before the reply is written;
* a timer that deletes volunteers whose lease ended (every quarter lease, at most 1 s apart);
* with ``dns_port``, the authoritative responder (:mod:`.dns`) answering from the live set.

Limits that keep one bad client from hurting the others: request heads above 8 KiB and bodies
above :data:`~.protocol.MAX_BODY` are refused (400/413) and the connection closed; a client
silent for ``idle_timeout`` seconds is disconnected; anything that is not HTTP gets a 400.
No input makes the broker stop serving.

Run ``python -m sslsplit.barnraising.broker --help``; a site is given with ``--site`` and its
options, or several in a TOML file (``--sites``, format in :func:`.registry.load_sites`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h11

from tls12 import cli

from ..cli import hostport, wait_for_signal
from .dns import DNSServer
from .feedback import label_host
from .protocol import (
    MAX_BODY,
    BodyTooLarge,
    MalformedMessage,
    ProtocolError,
    ServiceUnavailable,
    encode_error,
    encode_reply,
    parse_request,
)
from .registry import ConfigError, Registry, SiteConfig, load_sites
from .uri import DEFAULT_PORT
from .zone import Responder, default_zones

__all__ = ["Broker", "build_parser", "main"]

logger = logging.getLogger("sslsplit.barnraising.broker")
MAX_HEAD = 8192
READ_SIZE = 16384


class Broker:
    """Serves ``registry`` over the join protocol (and DNS); ``clock`` gives wall-clock seconds."""

    def __init__(self, registry: Registry, *, clock: Callable[[], float] = time.time,
                 idle_timeout: float = 15.0) -> None:
        self.registry = registry
        self.clock = clock
        self.idle_timeout = idle_timeout
        self.port = 0
        self.dns: DNSServer | None = None
        self.requests = 0
        self._server: asyncio.AbstractServer | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._names = {name: site.name for site in registry.sites.values() for name in site.names}
        self._dns_cache: dict[str, tuple[int, float, tuple[str, ...]]] = {}

    def lookup(self, name: str) -> tuple[str, ...] | None:
        """The DNS view: live volunteer addresses for served name ``name``, else ``None``.

        The tuple is cached until the live set changes (:attr:`.Registry.version`) or the
        earliest lease in it ends, so a query costs O(1) however many volunteers there are.
        """
        site = self._names.get(name)
        if site is None:
            return self._lookup_one(name)
        now = self.clock()
        cached = self._dns_cache.get(site)
        if cached is not None and cached[0] == self.registry.version and now < cached[1]:
            return cached[2]
        live = self.registry.live(site, now)
        valid_until = min((v.expires for v in live), default=float("inf"))
        addresses = tuple(dict.fromkeys(v.host for v in live))  # one entry per address
        self._dns_cache[site] = (self.registry.version, valid_until, addresses)
        return addresses

    def _lookup_one(self, name: str) -> tuple[str, ...] | None:
        """``v127-0-0-2.mirror.example``: the one volunteer a label names, if it is live under a
        served name (the feedback loop's redirects, :mod:`.feedback`); else ``None``."""
        label, _, parent = name.partition(".")
        host = label_host(label) if parent in self._names else None
        if host is None:
            return None
        live = self.lookup(parent)
        return (host,) if live is not None and host in live else None

    async def start(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                    dns_host: str | None = None, dns_port: int | None = None,
                    zones: list[str] | None = None, ttl: int = 20) -> None:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        if dns_port is not None:
            zones = zones or default_zones(self._names)
            self.dns = DNSServer(Responder(zones, self.lookup, ttl=ttl))
            await self.dns.start(dns_host or host, dns_port)
        self._expiry = asyncio.create_task(self._expire_loop())

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        if self.dns is not None:
            await self.dns.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _expire_loop(self) -> None:
        period = min(1.0, self.registry.lease_seconds / 4)
        while True:
            await asyncio.sleep(period)
            try:
                self.registry.expire(self.clock())
            except Exception:  # a database hiccup must not end expiry for good
                logger.exception("expiring leases failed")

    # --- HTTP ----------------------------------------------------------------------------

    def dispatch(self, method: str, target: str, body: bytes, source: str
                 ) -> tuple[int, bytes, float | None]:
        """Status, JSON body and Retry-After (seconds or ``None``) for one request; never raises."""
        self.requests += 1
        try:
            request = parse_request(method, target, body)
            return *encode_reply(self.registry.handle(request, source, self.clock())), None
        except ProtocolError as exc:
            return *encode_error(exc), exc.retry_after
        except Exception:  # a bug: answer 503, log it, keep serving everyone else
            logger.exception("request %s %s failed", method, target[:80])
            return *encode_error(ServiceUnavailable("internal error in the broker")), None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        peer = writer.get_extra_info("peername")
        source = peer[0] if peer else "0.0.0.0"
        try:
            while True:
                request, body, error = await self._read_request(conn, reader)
                if request is None and error is None:
                    return  # the client closed between requests
                if error is not None:
                    status, payload = encode_error(error)
                    self._send(conn, writer, status, payload, close=True)
                    await writer.drain()
                    return
                assert request is not None
                status, payload, retry = self.dispatch(request.method.decode("ascii", "replace"),
                                                       request.target.decode("ascii", "replace"),
                                                       body, source)
                self._send(conn, writer, status, payload, close=False, retry_after=retry)
                await asyncio.wait_for(writer.drain(), self.idle_timeout)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (TimeoutError, ConnectionError, h11.LocalProtocolError):
            pass
        finally:
            writer.close()
            # at loop shutdown the close waiter itself is cancelled: the handler ends anyway
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader
                            ) -> tuple[h11.Request | None, bytes, ProtocolError | None]:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                    raise ConnectionError from exc
                return request, b"", MalformedMessage(f"not an HTTP/1.1 request: {exc}")
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(READ_SIZE), self.idle_timeout)
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
                length = dict(event.headers).get(b"content-length")
                if length is not None and int(length) > MAX_BODY:
                    return request, b"", BodyTooLarge(f"body of {int(length)} bytes; "
                                                      f"at most {MAX_BODY}")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return request, b"", BodyTooLarge(f"body larger than {MAX_BODY} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body), None
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b"", None

    @staticmethod
    def _send(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, payload: bytes,
              *, close: bool, retry_after: float | None = None) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        if close:
            headers.append(("connection", "close"))
        if retry_after is not None:
            headers.append(("retry-after", str(max(1, math.ceil(retry_after)))))
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        writer.write(conn.send(h11.Data(data=payload)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")


# --- command line ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sslsplit.barnraising.broker",
        description="Barnraising broker: volunteers join sites by barnraising:// URI; the broker "
        "keeps them in SQLite, expires dead ones and (with --dns-port) points the sites' DNS "
        "names at them.",
    )
    p.add_argument("--sites", type=Path, metavar="FILE", help="TOML file of sites")
    p.add_argument("--site", metavar="NAME", help="serve one site NAME (with --server, --store)")
    p.add_argument("--server", type=hostport, help="the site's splitting server HOST:PORT")
    p.add_argument("--store", type=hostport, help="the site's record store HOST:PORT")
    p.add_argument("--name", action="append", default=[], metavar="DNSNAME",
                   help="a DNS name of the site the responder answers (repeatable)")
    p.add_argument("--report-token", default="", help="the site's secret for reports")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a site parameter handed to volunteers (repeatable; numbers stay numbers)")
    p.add_argument("--listen", type=_listen, default=("127.0.0.1", DEFAULT_PORT),
                   help=f"HOST:PORT of the join protocol (default 127.0.0.1:{DEFAULT_PORT})")
    p.add_argument("--db", default="barnraising.db",
                   help="SQLite volunteer database (default barnraising.db)")
    p.add_argument("--sync", choices=("normal", "full"), default="normal",
                   help="SQLite synchronous mode (normal survives a crash, full a power cut)")
    p.add_argument("--lease", type=cli.positive_float, default=30.0, metavar="SECONDS",
                   help="lease length (default 30)")
    p.add_argument("--ban", type=cli.non_negative_float, default=600.0, metavar="SECONDS",
                   help="how long a reported address may not rejoin (default 600)")
    p.add_argument("--join-rate", type=cli.positive_float, default=10.0,
                   help="joins per second per source address (default 10)")
    p.add_argument("--join-burst", type=cli.positive_float, default=20.0,
                   help="joins a source may make at once (default 20)")
    p.add_argument("--trust-declared", action="store_true",
                   help="publish the address a join declares, not the one it comes from")
    p.add_argument("--dns-port", type=cli.port, metavar="PORT",
                   help="also answer DNS on PORT (UDP and TCP; 0 = any free port)")
    p.add_argument("--dns-host", help="address of the DNS responder (default: --listen's host)")
    p.add_argument("--zone", action="append", default=[],
                   help="a zone the responder is authoritative for (default: each name's parent)")
    p.add_argument("--ttl", type=cli.non_negative_int, default=20,
                   help="TTL of the answers in seconds (default 20)")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests")
    return p


def _listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` to listen on; port 0 asks the system for a free one (printed at start)."""
    host, sep, digits = text.rpartition(":")
    if sep and digits == "0":
        return hostport(f"{host}:1")[0], 0
    return hostport(text)


def _param(text: str) -> tuple[str, str | int | float | bool]:
    key, sep, value = text.partition("=")
    if not sep:
        raise cli.UsageError(f"--param {text!r}: expected KEY=VALUE")
    if value in ("true", "false"):
        return key, value == "true"
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def sites_from_args(args: argparse.Namespace) -> list[SiteConfig]:
    """The sites the command line describes (``--sites`` file and/or ``--site`` options)."""
    sites: list[SiteConfig] = []
    try:
        if args.sites is not None:
            sites += load_sites(cli.read_file_arg("--sites", args.sites).decode("utf-8"))
        if args.site is not None:
            if args.server is None or args.store is None:
                raise cli.UsageError("--site needs --server and --store")
            sites.append(SiteConfig(args.site, args.server, args.store,
                                    tuple(n.lower().rstrip(".") for n in args.name),
                                    dict(_param(p) for p in args.param), args.report_token))
        elif args.server or args.store or args.name or args.param:
            raise cli.UsageError("--server, --store, --name and --param describe a --site")
    except (ConfigError, UnicodeDecodeError) as exc:
        raise cli.UsageError(str(exc)) from None
    if not sites:
        raise cli.UsageError("no site: give --sites FILE or --site NAME --server ... --store ...")
    return sites


async def _run(args: argparse.Namespace, registry: Registry) -> None:
    broker = Broker(registry)
    await broker.start(*args.listen, dns_host=args.dns_host, dns_port=args.dns_port,
                       zones=args.zone or None, ttl=args.ttl)
    print(f"barnraising broker on {args.listen[0]}:{broker.port}", flush=True)
    if broker.dns is not None:
        print(f"dns responder on {args.dns_host or args.listen[0]}:{broker.dns.port}", flush=True)
    try:
        await wait_for_signal()
    finally:
        await broker.close()


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    sites = sites_from_args(args)
    try:
        registry = Registry(sites, args.db, lease_seconds=args.lease, ban_seconds=args.ban,
                            join_rate=args.join_rate, join_burst=max(1.0, args.join_burst),
                            trust_declared=args.trust_declared, synchronous=args.sync)
    except Exception as exc:  # sqlite3.Error: not a database, unwritable folder
        if isinstance(exc, ConfigError | ValueError):
            raise cli.UsageError(str(exc)) from None
        raise cli.CLIError(f"cannot open database {args.db}: {exc}") from None
    try:
        asyncio.run(_run(args, registry))
    finally:
        registry.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when a port is in use)."""
    return cli.run_main(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
