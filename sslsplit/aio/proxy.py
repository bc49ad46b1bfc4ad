"""The SSL-splitting proxy: untrusted, caching, invisible to the client (paper §3.2, §4.2).

For every client connection the proxy opens one connection to the splitting
server, relays the client's records to it verbatim, and turns the server's
messages back into TLS records (:class:`~sslsplit.splicer.Splicer`), taking
payloads from its cache hierarchy (:mod:`sslsplit.cache`).  The client talks
ordinary HTTPS and cannot tell the proxy is there -- except that any change
the proxy makes to a payload fails the record MAC.

**How a connection ends.**  The two directions are independent, as in TCP
and TLS.  When the client has said all it will -- its close_notify, a TCP
half-close, or a reset after its last request -- the proxy passes that on to
the server and *keeps relaying the response the server has already committed
to*, until the server ends its side: a client that sends its request and
close_notify at once still gets the whole file, exactly as from the server
directly.  Every read from the server and every write to the client is
bounded by ``idle_timeout``, so a silent server or a client that stops reading
cannot hold a connection forever.  A server that resets the connection after
its last message (it closed its socket with the client's close_notify still
unread) has still sent everything: the proxy relays all of it
(:class:`~sslsplit.aio.ResetAwareReader`), then ends the client's side with a
FIN.  A reset inside a message is a failure; the client, lacking the
server's close_notify, sees a truncation.  When the server has ended, the
proxy waits for the client to close its side before closing the socket (a
lingering close, bounded by ``idle_timeout``); after a failure the client
gets only ``DRAIN_GRACE`` seconds (e.g. for its fatal alert after a bad
record to reach the server).

**The per-record path, in batches.**  The splicer runs in batch mode
(:data:`BATCH` messages per run, :class:`~sslsplit.splicer.PayloadsNeeded`): each run's
payloads come from one call to the cache hierarchy
(:meth:`~sslsplit.cache.CacheHierarchy.lookup_local_many`; only misses are awaited, one by
one, from the remote sources), its records from one loop with one ``rng`` call for their IVs,
written straight into the splicer's reused output buffer; they leave in one write of a view
of it (the transport copies only what the socket does not take at once) before the next run
is looked up.  A subclass that overrides
:meth:`SplittingProxy.payload_for` or :meth:`SplittingProxy.record_for` gets the per-record
path (one :class:`~sslsplit.splicer.PayloadNeeded` per digest stub, both hooks called for
each), as before.  The client receives the same bytes either way.

Run ``python -m sslsplit.proxy --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from testbed import cli
from tls12.errors import TLSError

from ..cache import CacheHierarchy, CacheMiss, DiskCache, LocalCache, MemoryCache
from ..splicer import PayloadMismatch, PayloadNeeded, PayloadsNeeded, Splicer, TruncatedMessage
from ..wire import IDEncoding, Stub
from .cli import close_servers, hostport, wait_for_signal
from .payloads import PayloadClient, ResetAwareReader, open_connection, serve_payloads, start_server

__all__ = ["SplittingProxy", "ProxyStats", "main"]

logger = logging.getLogger("sslsplit.proxy")
READ_SIZE = 65536
BATCH = 32
"""Messages per run of the splicer's batch mode: up to 32 records of 16 KiB, 512 KiB per write,
within a core's L2 cache (runs of 8 to 128 measured alike, within the noise of a shared machine)."""


@dataclass
class ProxyStats:
    connections: int = 0
    failed: int = 0
    bytes_from_server: int = 0
    bytes_to_client: int = 0
    bytes_from_client: int = 0


class SplittingProxy:
    """Accepts HTTPS clients and splices records from a splitting server's stubs and a cache."""

    DRAIN_GRACE = 2.0
    """Seconds the client may keep sending after its connection failed."""

    def __init__(
        self,
        server: tuple[str, int],
        hierarchy: CacheHierarchy,
        *,
        rng: Callable[[int], bytes] = os.urandom,
        idle_timeout: float = 60.0,
        source_host: str | None = None,
    ) -> None:
        """``source_host`` binds connections to the server to that address (a Barnraising
        volunteer connects from the address it is known by)."""
        self.server = server
        self.source_host = source_host
        self.hierarchy = hierarchy
        self.rng = rng
        self.idle_timeout = idle_timeout
        self.stats = ProxyStats()
        self._servers: list[asyncio.AbstractServer] = []
        self.port = 0
        self.cache_port = 0

    # --- override points (an adversarial proxy in the tests changes these) ----------

    async def payload_for(self, stub: Stub) -> bytes:
        """The payload a digest stub names, from the cache hierarchy."""
        return await self.hierarchy.get(stub.encoding, stub.ident)

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        """The client record for a digest stub (the hierarchy already checked the payload's id)."""
        return splicer.rebuild(stub, payload, checked=True)

    @property
    def batched(self) -> bool:
        """Does this proxy splice in runs?  Not when a subclass overrides a per-stub hook."""
        cls = type(self)
        return cls.payload_for is SplittingProxy.payload_for and cls.record_for is SplittingProxy.record_for

    async def payloads_for(self, keys: Sequence[tuple[IDEncoding, bytes]]) -> list[bytes]:
        """The payloads of a run's digest stubs by ``(encoding, id)``, in order: one batch lookup in
        the local levels, then each miss from the remote sources (:class:`CacheMiss` if none has it)."""
        found = self.hierarchy.lookup_local_many(keys, count=True)
        if None in found:
            for i, payload in enumerate(found):
                if payload is None:
                    found[i] = await self.hierarchy.get_remote(*keys[i])
        return found  # type: ignore[return-value]  # no None is left

    def new_splicer(self) -> Splicer:
        """The splicer of one connection: batch mode unless a per-stub hook is overridden."""
        return Splicer(self.rng, batch=BATCH if self.batched else 0)

    # --- the two directions -------------------------------------------------------

    async def _client_to_server(self, reader: ResetAwareReader, writer: asyncio.StreamWriter) -> None:
        """Relay the client's records verbatim until the client ends its side; then half-close.

        Once the server is gone, what the client still sends is read and dropped: leaving it
        unread would make the proxy's socket answer with a reset (see :meth:`_handle`).
        """
        server_gone = False
        while data := await reader.read(READ_SIZE):
            self.stats.bytes_from_client += len(data)
            if server_gone:
                continue
            writer.write(data)  # client records are relayed verbatim
            try:
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                server_gone = True  # the other direction reports how the server ended
        _write_eof(writer)

    async def _send(self, splicer: Splicer, writer: asyncio.StreamWriter) -> bool:
        """Write the records the splicer has for the client; False if the client went away."""
        out = splicer.data_to_send_view()
        if out:
            self.stats.bytes_to_client += len(out)
            writer.write(out)  # a view of the splicer's buffer: the transport copies only what the socket does not take
            del out
            transport = writer.transport
            if not transport.get_write_buffer_size() and not transport.is_closing():
                return True  # the socket took it all: drain() would not wait (no timer to arm)
            try:
                async with asyncio.timeout(self.idle_timeout):
                    await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                return False
        return True

    async def _server_to_client(self, reader: ResetAwareReader, writer: asyncio.StreamWriter) -> None:
        """Splice the server's messages into records for the client until the server ends its side."""
        splicer = self.new_splicer()
        while True:
            async with asyncio.timeout(self.idle_timeout):
                data = await reader.read(READ_SIZE)
            if not data:
                break
            self.stats.bytes_from_server += len(data)
            events = splicer.receive_data(data)
            while events:  # a digest stub holds the messages after it until its record is in
                event = events.pop(0)
                if isinstance(event, PayloadsNeeded):
                    if not await self._send(splicer, writer):  # the runs before leave meanwhile
                        return
                    events += splicer.supply_many(event.keys, await self.payloads_for(event.keys), checked=True)
                elif isinstance(event, PayloadNeeded):
                    stub = event.stub
                    events += splicer.resume(self.record_for(splicer, stub, await self.payload_for(stub)))
            if not await self._send(splicer, writer):
                return  # the client went away
        try:
            splicer.receive_data(b"")  # end of the server's stream
        except TruncatedMessage as exc:
            if reader.reset is not None:
                raise ConnectionResetError(f"server reset the connection inside a message ({exc.pending} B of it)") from None
            # a FIN inside a message: end the client's side; it sees the truncation
        else:
            if reader.reset is not None:
                logger.info("server reset the connection after its last message; all of it was relayed")
        _write_eof(writer)

    async def _handle(self, client_reader: ResetAwareReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        server_writer: asyncio.StreamWriter | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            server_reader, writer = await asyncio.wait_for(open_connection(*self.server, local_host=self.source_host), 10)
            server_writer = writer
            up = asyncio.create_task(self._client_to_server(client_reader, writer))
            down = asyncio.create_task(self._server_to_client(server_reader, client_writer))
            tasks = [up, down]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if not down.done() and up.exception() is None:
                # Half-close: the client has said all it will, but the server may still be sending
                # a response it committed to.  Relay it to the end (each step has a timeout).
                await asyncio.wait([down])
            # The server has ended.  After a clean end the client has a FIN behind the last record:
            # wait for it to close its side (a lingering close -- closing first, with its last bytes
            # unread, would reset the connection and destroy records still queued for it).  After a
            # failure, only a short grace, e.g. for the client's fatal alert to reach the server.
            clean = down.done() and not down.cancelled() and down.exception() is None
            await asyncio.wait(tasks, timeout=self.idle_timeout if clean else self.DRAIN_GRACE)
            for task in tasks:
                if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
                    raise exc
        except (TLSError, CacheMiss, PayloadMismatch, TimeoutError, ConnectionError, OSError) as exc:
            self.stats.failed += 1
            logger.warning("connection failed: %s: %s", type(exc).__name__, exc)
        except asyncio.CancelledError:
            pass  # the proxy is shutting down
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (client_writer, server_writer):
                if w is not None:
                    w.close()

    async def start(self, host: str = "127.0.0.1", port: int = 0, cache_port: int | None = None) -> None:
        """Listen for clients; with ``cache_port`` also serve the local caches to other proxies."""
        server = await start_server(self._handle, host, port)
        self._servers = [server]
        self.port = server.sockets[0].getsockname()[1]
        if cache_port is not None:
            peer = await serve_payloads(self.hierarchy.lookup_local, host, cache_port)
            self._servers.append(peer)
            self.cache_port = peer.sockets[0].getsockname()[1]

    async def close(self) -> None:
        await close_servers(self._servers)
        self._servers = []
        await self.hierarchy.close()


def _write_eof(writer: asyncio.StreamWriter) -> None:
    """Half-close: the peer learns that this direction ended (it may be gone already)."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=cli.program_name("sslsplit.proxy"),
        description="SSL-splitting proxy: serves HTTPS clients from its cache; the origin sends only "
        "handshakes, MACs and payload ids. Clients need no change.",
    )
    p.add_argument("--server", required=True, type=hostport, help="splitting server HOST:PORT")
    p.add_argument("--store", required=True, type=hostport, help="the server's record store HOST:PORT (cache misses)")
    p.add_argument("--listen", type=hostport, default=("127.0.0.1", 4433), help="HOST:PORT for clients (default 127.0.0.1:4433)")
    p.add_argument("--memory-mb", type=cli.non_negative_float, default=256.0, help="memory cache size in MiB (default 256)")
    p.add_argument("--disk-cache", type=cli.directory, help="directory of an on-disk cache level")
    p.add_argument("--peer", type=hostport, action="append", default=[], help="another proxy's cache HOST:PORT (repeatable)")
    p.add_argument("--serve-cache", type=cli.port, metavar="PORT", help="serve this proxy's caches to peers on PORT")
    p.add_argument("-v", "--verbose", action="store_true", help="log every connection")
    return p


async def _run(args: argparse.Namespace) -> None:
    local: list[LocalCache] = [MemoryCache(int(args.memory_mb * (1 << 20)))]
    if args.disk_cache:
        local.append(DiskCache(args.disk_cache))
    remote = [PayloadClient(h, p, name=f"peer {h}:{p}") for h, p in args.peer]
    remote.append(PayloadClient(*args.store, name="origin"))
    proxy = SplittingProxy(args.server, CacheHierarchy(local, remote))
    host, port = args.listen
    await proxy.start(host, port, cache_port=args.serve_cache)
    print(f"splitting proxy on {args.listen[0]}:{proxy.port} -> server {args.server[0]}:{args.server[1]}", flush=True)
    await wait_for_signal()
    await proxy.close()
    s, h = proxy.stats, proxy.hierarchy.stats
    print(f"{s.connections} connections ({s.failed} failed); {s.bytes_from_server} B from server, "
          f"{s.bytes_to_client} B to clients; cache hits {h.hits}, poisoned {h.poisoned}, misses {h.misses}")


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_run(args))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when a port is in use)."""
    return cli.run_main(build_parser(), _main, argv)

