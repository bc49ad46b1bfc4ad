"""The authoritative DNS responder on sockets: UDP and TCP (RFC 1035 §4.2) around :class:`Responder`.

Every answer is decided by :class:`~.zone.Responder` and every TCP frame cut by
:class:`~.zone.TCPConnection` (both sans-IO); this module only receives queries and sends
responses.  UDP answers are limited to 512 bytes (or the client's EDNS
payload size) and set TC when cut, so a resolver retries over TCP, where each message has a
two-byte length prefix and a connection may carry several queries.  A malformed datagram is
answered with FORMERR or dropped, and the responder keeps answering everyone else; a TCP
client that sends a broken frame or stays silent for ``tcp_idle`` seconds is disconnected.

The broker starts one with ``--dns-port`` (:mod:`~sslsplit.barnraising.broker`); :class:`DNSServer` also serves any
other ``lookup`` function, which is how the tests and the benchmark use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..zone import Responder, TCPConnection

__all__ = ["DNSServer"]

logger = logging.getLogger("sslsplit.barnraising.dns")
MAX_TCP_CONNECTIONS = 256
READ_SIZE = 65538
"""Bytes read at a time from a TCP client (one largest framed message)."""
UDP_MAX = 4096
"""Largest UDP response, for clients that advertise a larger EDNS payload."""


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport is a DatagramTransport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = self.responder.respond(data, max_size=UDP_MAX)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable
        logger.debug("udp error: %s", exc)


class DNSServer:
    """Answers DNS queries with ``responder`` on UDP and TCP ``host:port`` (port 0: any free)."""

    def __init__(self, responder: Responder, *, tcp_idle: float = 10.0) -> None:
        self.responder = responder
        self.tcp_idle = tcp_idle
        self.port = 0
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Bind UDP and TCP on the same port (chosen by UDP when ``port`` is 0)."""
        loop = asyncio.get_running_loop()
        for _attempt in range(20):
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _UDP(self.responder), local_addr=(host, port))
            bound = transport.get_extra_info("sockname")[1]
            try:
                self._tcp = await asyncio.start_server(self._serve_tcp, host, bound)
            except OSError:
                transport.close()
                if port:  # the caller asked for this port: report it
                    raise
                continue  # UDP got a port whose TCP twin is taken: try another
            self._udp = transport
            self.port = bound
            return
        raise OSError("no port free for both UDP and TCP")

    async def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            for task in list(self._clients):
                task.cancel()
            await self._tcp.wait_closed()
        self._udp = self._tcp = None

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._clients) >= MAX_TCP_CONNECTIONS:
            writer.close()
            return
        self._clients.add(task)
        conn = TCPConnection(self.responder)
        try:
            while not conn.closed:
                conn.receive_data(await asyncio.wait_for(reader.read(READ_SIZE), self.tcp_idle))
                out = conn.data_to_send()
                if out:
                    writer.write(out)
                    await asyncio.wait_for(writer.drain(), self.tcp_idle)
        except (TimeoutError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
