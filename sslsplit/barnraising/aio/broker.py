"""The Barnraising broker on sockets: the join protocol over HTTP/1.1, leases, optional DNS.

Paper §5.1, Figure 6: volunteers join a site through the broker, and the broker points
clients at them through DNS.  The decisions are sans-IO (:mod:`~sslsplit.barnraising.service`:
:class:`~.service.BrokerService` and one :class:`~.service.JoinConnection` per client);
:class:`Broker` only puts them on the network:

* a TCP server whose connections feed :class:`~.service.JoinConnection` (its replies are
  written back; a client silent for ``idle_timeout`` seconds is disconnected);
* a timer that deletes volunteers whose lease ended (every quarter lease, at most 1 s apart);
* with ``dns_port``, the authoritative responder (:mod:`.dns`) answering from the live set.

The limits (8 KiB heads, :data:`~.protocol.MAX_BODY` bodies, 400 for anything not HTTP) are
the service's; no input makes the broker stop serving.

Run ``python -m sslsplit.barnraising.broker --help``; a site is given with ``--site`` and its
options, or several in a TOML file (``--sites``, format in :func:`.registry.load_sites`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from testbed import cli

from ...aio.cli import hostport
from ..registry import ConfigError, Registry, SiteConfig, load_sites
from ..service import BrokerService, JoinConnection
from ..uri import DEFAULT_PORT
from ..zone import Responder, default_zones
from .cli import listen_address, run_service, serve_until_signal
from .dns import DNSServer

__all__ = ["Broker", "build_parser", "main"]

logger = logging.getLogger("sslsplit.barnraising.broker")
READ_SIZE = 16384


class Broker:
    """Serves ``registry`` over the join protocol (and DNS); ``clock`` gives wall-clock seconds."""

    def __init__(self, registry: Registry, *, clock: Callable[[], float] = time.time,
                 idle_timeout: float = 15.0) -> None:
        self.registry = registry
        self.service = BrokerService(registry)
        self.clock = clock
        self.idle_timeout = idle_timeout
        self.port = 0
        self.dns: DNSServer | None = None
        self._server: asyncio.AbstractServer | None = None
        self._expiry: asyncio.Task[None] | None = None

    @property
    def requests(self) -> int:
        """Join-protocol requests dispatched so far."""
        return self.service.requests

    def lookup(self, name: str) -> tuple[str, ...] | None:
        """The DNS view at the clock's time (:meth:`.BrokerService.lookup`)."""
        return self.service.lookup(name, self.clock())

    def dispatch(self, method: str, target: str, body: bytes, source: str
                 ) -> tuple[int, bytes, float | None]:
        """One request at the clock's time (:meth:`.BrokerService.dispatch`); never raises."""
        return self.service.dispatch(method, target, body, source, self.clock())

    async def start(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                    dns_host: str | None = None, dns_port: int | None = None,
                    zones: list[str] | None = None, ttl: int = 20) -> None:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        if dns_port is not None:
            zones = zones or default_zones(self.service.names)
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
        while True:
            await asyncio.sleep(self.service.expiry_period)
            try:
                self.service.expire(self.clock())
            except Exception:  # a database hiccup must not end expiry for good
                logger.exception("expiring leases failed")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = JoinConnection(self.service, peer[0] if peer else "0.0.0.0")
        try:
            while not conn.closed:
                data = await asyncio.wait_for(reader.read(READ_SIZE), self.idle_timeout)
                conn.receive_data(data, self.clock())
                out = conn.data_to_send()
                if out:
                    writer.write(out)
                    await asyncio.wait_for(writer.drain(), self.idle_timeout)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            # at loop shutdown the close waiter itself is cancelled: the handler ends anyway
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()


# --- command line ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=cli.program_name("sslsplit.barnraising.broker"),
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
    p.add_argument("--listen", type=listen_address, default=("127.0.0.1", DEFAULT_PORT),
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
    await serve_until_signal(broker.close)


def _main(args: argparse.Namespace) -> int:
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
        return run_service(args.verbose, _run(args, registry))
    finally:
        registry.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when a port is in use)."""
    return cli.run_main(build_parser(), _main, argv)

