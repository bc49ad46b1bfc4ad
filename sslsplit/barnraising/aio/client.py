"""The volunteer's (and the origin's) side of the join protocol, on asyncio.

:class:`BrokerClient` sends one request at a time over a keep-alive HTTP/1.1 connection
(h11) to the broker a ``barnraising://`` URI names, and returns the typed reply or raises the
broker's typed error (:mod:`~sslsplit.barnraising.protocol`).  :class:`Membership` is what a volunteer runs: join,
renew every third of the lease (so two renewals may fail before the lease ends), join again if
the broker forgot it (lease lost, broker database replaced), and leave when stopped.
``python -m sslsplit.volunteer URI`` (:mod:`sslsplit.volunteer`) runs it beside a
:class:`~sslsplit.aio.proxy.SplittingProxy` configured from the broker's reply.

The broker publishes the address a join *comes from*; a volunteer serving on a particular
address binds its connection to it with ``local_host`` (on loopback: 127.0.0.2, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import h11

from ..protocol import (
    Join,
    JoinReply,
    Leave,
    LeaveReply,
    Lookup,
    LookupReply,
    MalformedMessage,
    ProtocolError,
    Renew,
    RenewReply,
    Reply,
    Report,
    ReportReply,
    Request,
    SiteInfo,
    UnknownVolunteer,
    encode_request,
    parse_reply,
)
from ..uri import BarnraisingURI, parse_uri

__all__ = ["BrokerClient", "Membership"]

logger = logging.getLogger("sslsplit.barnraising.aio.client")
MAX_REPLY = 1 << 20  # a lookup lists every peer: ~25 B each


class BrokerClient:
    """Requests to the broker of ``uri`` (a string or :class:`BarnraisingURI`)."""

    def __init__(self, uri: str | BarnraisingURI, *, local_host: str | None = None,
                 timeout: float = 10.0) -> None:
        self.uri = parse_uri(uri) if isinstance(uri, str) else uri
        self.local_host = local_host
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._conn: h11.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def site(self) -> str:
        return self.uri.site

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        self._reader = self._writer = self._conn = None

    async def _connect(self) -> None:
        local = (self.local_host, 0) if self.local_host else None
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.uri.broker_host, self.uri.broker_port,
                                    local_addr=local), self.timeout)
        self._conn = h11.Connection(h11.CLIENT)

    async def request(self, request: Request) -> Reply:
        """Send ``request``; the reply, or the broker's :class:`ProtocolError` raised.

        A connection the broker closed between requests is reopened once; an ``OSError`` or
        ``TimeoutError`` means the broker cannot be reached.
        """
        async with self._lock:
            for attempt in (0, 1):
                fresh = self._conn is None
                if fresh:
                    await self._connect()
                try:
                    return await asyncio.wait_for(self._exchange(request), self.timeout)
                except (ConnectionError, asyncio.IncompleteReadError, h11.ProtocolError):
                    await self.close()
                    if fresh or attempt:
                        raise ConnectionError("the broker closed the connection") from None
                except BaseException:
                    await self.close()
                    raise
        raise AssertionError("unreachable")

    async def _exchange(self, request: Request) -> Reply:
        assert self._conn is not None and self._writer is not None and self._reader is not None
        conn = self._conn
        path, body = encode_request(request)
        host = self.uri.broker_host
        self._writer.write(conn.send(h11.Request(method="POST", target=path, headers=[
            ("host", f"[{host}]" if ":" in host else host),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ])) or b"")
        self._writer.write(conn.send(h11.Data(data=body)) or b"")
        self._writer.write(conn.send(h11.EndOfMessage()) or b"")
        await self._writer.drain()
        status = 0
        payload = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await self._reader.read(65536)
                if not data and conn.their_state is h11.SEND_RESPONSE and status == 0:
                    raise ConnectionError("broker closed the connection")
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                payload += event.data
                if len(payload) > MAX_REPLY:
                    raise MalformedMessage(f"reply larger than {MAX_REPLY} bytes")
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("broker closed the connection")
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:  # the broker closes after this reply
            await self.close()
        return parse_reply(request.OP, status, bytes(payload))

    async def join(self, port: int, *, host: str | None = None, capacity: float = 1000.0,
                   cache_port: int | None = None) -> JoinReply:
        reply = await self.request(Join(self.site, port, host, capacity, cache_port))
        assert isinstance(reply, JoinReply)
        return reply

    async def renew(self, volunteer_id: str) -> RenewReply:
        reply = await self.request(Renew(self.site, volunteer_id))
        assert isinstance(reply, RenewReply)
        return reply

    async def leave(self, volunteer_id: str) -> bool:
        reply = await self.request(Leave(self.site, volunteer_id))
        assert isinstance(reply, LeaveReply)
        return reply.removed

    async def report(self, host: str, token: str, *, port: int | None = None,
                     reason: str = "") -> int:
        reply = await self.request(Report(self.site, host, port, reason, token))
        assert isinstance(reply, ReportReply)
        return reply.removed

    async def lookup(self) -> LookupReply:
        reply = await self.request(Lookup(self.site))
        assert isinstance(reply, LookupReply)
        return reply


class Membership:
    """Keeps one volunteer registered: :meth:`start` joins, a task renews, :meth:`stop` leaves.

    ``site`` always holds the latest parameters the broker sent (they come with every
    renewal, so a site can change them without touching volunteers).
    """

    def __init__(self, client: BrokerClient, port: int, *, capacity: float = 1000.0,
                 cache_port: int | None = None, host: str | None = None) -> None:
        self.client = client
        self.port = port
        self.capacity = capacity
        self.cache_port = cache_port
        self.host = host
        self.volunteer_id = ""
        self.lease_seconds = 0.0
        self.site: SiteInfo | None = None
        self.renewals = 0
        self._task: asyncio.Task[None] | None = None

    async def _join(self) -> None:
        reply = await self.client.join(self.port, host=self.host, capacity=self.capacity,
                                       cache_port=self.cache_port)
        self.volunteer_id, self.lease_seconds, self.site = (
            reply.volunteer_id, reply.lease_seconds, reply.site)

    async def start(self) -> SiteInfo:
        """Join (errors propagate) and start renewing; return the site's parameters."""
        await self._join()
        self._task = asyncio.create_task(self._renew_loop())
        assert self.site is not None
        return self.site

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                reply = await self.client.renew(self.volunteer_id)
                self.lease_seconds, self.site = reply.lease_seconds, reply.site
                self.renewals += 1
            except UnknownVolunteer:
                logger.warning("the broker forgot this volunteer; joining again")
                with contextlib.suppress(ProtocolError, OSError, TimeoutError):
                    await self._join()
            except (ProtocolError, OSError, TimeoutError) as exc:
                logger.warning("renewal failed: %s", exc)

    async def pause(self) -> None:
        """Stop renewing without leaving (what a crashed volunteer looks like to the broker)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def stop(self) -> None:
        """Stop renewing and leave the site (best effort); close the connection."""
        await self.pause()
        if self.volunteer_id:
            with contextlib.suppress(ProtocolError, OSError, TimeoutError):
                await self.client.leave(self.volunteer_id)
        await self.client.close()
