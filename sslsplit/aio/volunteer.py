"""A Barnraising volunteer: ``python -m sslsplit.volunteer barnraising://BROKER/some/site``.

Paper §5.1: a volunteer is configured by one URI and nothing else.  It asks the site's broker
(:mod:`sslsplit.barnraising.aio.client`) where the splitting server and its record store are and
what the site wants (``memory_mb``, ...), runs an SSL-splitting proxy
(:class:`~sslsplit.aio.proxy.SplittingProxy`) for clients on ``--listen``, serves its cache to the
site's other volunteers on ``--cache-port``, joins, and renews its lease while it runs.  On
SIGTERM or SIGINT it *leaves* first -- the broker's DNS stops naming it at once -- and then
closes its sockets; a volunteer that dies without leaving drops out when its lease ends.

The cache hierarchy is memory, then the site's cache-sharing ring (one message to the peer
that owns the payload's stub id, :mod:`sslsplit.barnraising.aio.sharing`), then the origin's
store.  Every payload from a peer is checked against its SHA-256 stub id; a poisoned one is
discarded and the origin's copy used.  The ring's membership is the broker's live list,
refreshed every ``--refresh`` seconds.

The volunteer publishes the address it connects to the broker from, so it binds that
connection (and its connections to the splitting server, which the origin's feedback loop
watches) to the ``--listen`` address: on one machine, 127.0.0.2, 127.0.0.3, ... are separate
volunteers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Callable

from testbed import cli

from ..barnraising.aio.cli import listen_address, run_service, serve_until_signal
from ..barnraising.aio.client import BrokerClient, Membership
from ..barnraising.aio.sharing import PeerServer, RingSource
from ..barnraising.protocol import ProtocolError, SiteInfo
from ..barnraising.uri import BarnraisingURI, URIError, parse_uri
from ..cache import CacheHierarchy, MemoryCache, PayloadSource
from .payloads import PayloadClient, serve_payloads
from .proxy import SplittingProxy

__all__ = ["Volunteer", "build_parser", "main"]

logger = logging.getLogger("sslsplit.volunteer")
DEFAULT_MEMORY_MB = 256.0


class Volunteer:
    """One volunteer for the site ``uri`` names; :meth:`start` on a running loop, :meth:`stop`.

    ``memory_mb`` overrides the site's ``memory_mb`` parameter; ``cache_port=None`` keeps the
    cache private (the volunteer still uses its peers' caches when ``share`` is true);
    ``refresh`` is the period of the ring's membership refresh (default: a third of the lease,
    at most 5 s).  ``proxy_factory`` builds the proxy (the tests pass misbehaving ones).
    """

    def __init__(self, uri: str | BarnraisingURI, *, host: str = "127.0.0.1", port: int = 0,
                 cache_port: int | None = 0, memory_mb: float | None = None,
                 capacity: float = 1000.0, share: bool = True,
                 refresh: float | None = None,
                 proxy_factory: Callable[..., SplittingProxy] = SplittingProxy) -> None:
        self.uri = parse_uri(uri) if isinstance(uri, str) else uri
        self.host, self.port, self.cache_port = host, port, cache_port
        self.memory_mb = memory_mb
        self.capacity = capacity
        self.share = share
        self.refresh = refresh
        self.proxy_factory = proxy_factory
        self.client = BrokerClient(self.uri, local_host=host)
        self.site: SiteInfo | None = None
        self.proxy: SplittingProxy | None = None
        self.ring: RingSource | None = None
        self.peer_server: PeerServer | None = None
        self.membership: Membership | None = None
        self._cache_server: asyncio.AbstractServer | None = None
        self._refresher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Ask the broker for the site, start serving, join, start the ring refresh."""
        self.site = site = (await self.client.lookup()).site
        memory = self.memory_mb
        if memory is None:
            value = site.params.get("memory_mb", DEFAULT_MEMORY_MB)
            memory = float(value) if isinstance(value, int | float) else DEFAULT_MEMORY_MB
        remote: list[PayloadSource] = []
        self.ring = RingSource(None)
        if self.share:
            remote.append(self.ring)
        remote.append(PayloadClient(*site.store, name="origin"))
        hierarchy = CacheHierarchy([MemoryCache(int(memory * (1 << 20)))], remote)
        self.proxy = self.proxy_factory(site.server, hierarchy, source_host=self.host)
        await self.proxy.start(self.host, self.port)
        self.port = self.proxy.port
        if self.cache_port is not None:
            self.peer_server = PeerServer(hierarchy, self.ring)
            self._cache_server = await serve_payloads(self.peer_server.lookup, self.host,
                                                      self.cache_port)
            self.cache_port = self._cache_server.sockets[0].getsockname()[1]
            self.ring.me = (self.host, self.cache_port)
        self.membership = Membership(self.client, self.port, capacity=self.capacity,
                                     cache_port=self.cache_port)
        await self.membership.start()
        if self.share:
            await self.refresh_ring()
            self._refresher = asyncio.create_task(self._refresh_loop())

    async def refresh_ring(self) -> None:
        """Take the broker's current list of peers as the ring's membership."""
        assert self.ring is not None
        reply = await self.client.lookup()
        await self.ring.update(reply.peers)

    async def _refresh_loop(self) -> None:
        assert self.membership is not None
        while True:
            period = self.refresh or min(5.0, self.membership.lease_seconds / 3)
            await asyncio.sleep(period)
            try:
                await self.refresh_ring()
            except (ProtocolError, OSError, TimeoutError) as exc:
                logger.warning("ring refresh failed: %s", exc)

    async def stop(self) -> None:
        """Leave the site (DNS stops naming this volunteer), then close every socket."""
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        if self.membership is not None:
            await self.membership.stop()
        else:
            await self.client.close()
        if self._cache_server is not None:
            self._cache_server.close()
        if self.proxy is not None:
            await self.proxy.close()
        if self._cache_server is not None:
            await self._cache_server.wait_closed()


# --- command line ------------------------------------------------------------------------


def _uri(text: str) -> BarnraisingURI:
    try:
        return parse_uri(text)
    except URIError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=cli.program_name("sslsplit.volunteer"),
        description="Barnraising volunteer: joins the site a barnraising:// URI names, serves its "
        "clients as an SSL-splitting proxy (configured by the broker), shares its cache with the "
        "site's other volunteers, and leaves on SIGTERM.",
    )
    p.add_argument("uri", type=_uri, metavar="URI", help="barnraising://BROKER[:PORT]/some/site")
    p.add_argument("--listen", type=listen_address, default=("127.0.0.1", 4433),
                   help="HOST:PORT for clients; HOST is the address published in DNS "
                   "(default 127.0.0.1:4433; port 0 = any free port)")
    p.add_argument("--cache-port", type=cli.port, default=0,
                   help="port on the --listen address serving this cache to peers (default 0: any)")
    p.add_argument("--no-share", action="store_true",
                   help="neither serve nor use the peers' caches (memory, then the origin)")
    p.add_argument("--memory-mb", type=cli.non_negative_float,
                   help="memory cache in MiB (default: the site's memory_mb, else 256)")
    p.add_argument("--capacity", type=cli.positive_float, default=1000.0,
                   help="upload capacity in kbit/s declared to the broker (default 1000)")
    p.add_argument("--refresh", type=cli.positive_float, metavar="SECONDS",
                   help="period of the ring membership refresh (default: lease/3, at most 5)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every connection")
    return p


async def _run(args: argparse.Namespace) -> None:
    host, port = args.listen
    volunteer = Volunteer(args.uri, host=host, port=port,
                          cache_port=None if args.no_share else args.cache_port,
                          memory_mb=args.memory_mb, capacity=args.capacity,
                          share=not args.no_share, refresh=args.refresh)
    try:
        await volunteer.start()
    except ProtocolError as exc:
        await volunteer.stop()
        raise cli.CLIError(f"the broker refused: {exc}") from None
    except (OSError, TimeoutError) as exc:
        await volunteer.stop()
        if volunteer.site is None:
            raise cli.connect_error(f"broker {args.uri.broker_host}:{args.uri.broker_port}",
                                    exc if isinstance(exc, OSError) else TimeoutError()) from None
        raise
    assert volunteer.site is not None and volunteer.membership is not None
    cache = f", cache on {host}:{volunteer.cache_port}" if volunteer.cache_port else ""
    print(f"volunteer on {host}:{volunteer.port}{cache} for {volunteer.site.name} "
          f"(id {volunteer.membership.volunteer_id})", flush=True)
    await serve_until_signal(volunteer.stop)
    assert volunteer.proxy is not None
    s, h = volunteer.proxy.stats, volunteer.proxy.hierarchy.stats
    print(f"left; {s.connections} connections ({s.failed} failed); cache hits {h.hits}, "
          f"poisoned {h.poisoned}, misses {h.misses}", flush=True)


def _main(args: argparse.Namespace) -> int:
    return run_service(args.verbose, _run(args))


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when the broker fails)."""
    return cli.run_main(build_parser(), _main, argv)

