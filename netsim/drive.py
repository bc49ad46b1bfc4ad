"""Drive real sans-IO protocol objects over simulated TCP, in simulated time.

The testbed's first principle is that one protocol object serves a real network, a
simulation and a lesson. This module is the simulation half: a :class:`Driver` takes the two
endpoints of a connection -- any objects with the sans-IO shape below -- and moves the bytes
they produce over a byte-accurate :class:`~netsim.tcp.TcpConnection` on
:class:`~netsim.link.Link` models, charging each endpoint's host CPU for what it did.

The sans-IO shape (``tls12.ClientConnection`` / ``ServerConnection``, ``sslsplit``'s
:class:`~sslsplit.splicer.Splicer`, SINE's :class:`~sine.verifier.StreamVerifier`)::

    events = obj.receive_data(data)   # bytes that arrived -> list of events
    out = obj.data_to_send()          # bytes to put on the wire now (b"" if none)

**End of stream** is signalled the same way everywhere: ``obj.receive_data(b"")`` means the
transport delivered its last byte (the peer's FIN). The object answers with its final events
or raises its typed error: a TLS connection returns ``ConnectionClosed(clean=False)`` unless a
close_notify came first (then nothing); the SINE verifier raises ``TruncatedDocument`` unless
every block arrived; the splicer raises ``TruncatedMessage`` inside a message. A
:class:`Driver` calls ``receive_data(b"")`` when the peer's FIN (or a RST) arrives; asyncio
adapters do the same at ``eof_received``.

What happens in one *step* of an endpoint (a chunk of in-order bytes arrived):

1. ``events = obj.receive_data(chunk)``; each event is logged and handed to the endpoint's
   application callback ``app(side, event)``, which may act on the object (``send_data``,
   ``close``) and on the transport (:meth:`Side.shutdown`: FIN after the pending bytes;
   :meth:`Side.abort`: RST). The first step of each side, once TCP is open, has no chunk:
   the callback gets a :class:`Started` event instead (a side that speaks first acts on it);
2. ``out = obj.data_to_send()``;
3. the endpoint's CPU model (:mod:`netsim.cpu`) prices the step from ``chunk`` and ``out``;
   the job runs on the endpoint's :class:`~netsim.host.Host` (a SimPy resource: concurrent
   connections on one host queue for its cores);
4. ``out`` is written to TCP (one *flight*, logged with its time and size), then the FIN if
   the application asked for it.

A remote error raised by ``receive_data`` is recorded on the side (``side.error``); events
carried on it (``exc.events``) are still delivered, the alert the object queued is sent and
the side shuts its transport down (fail closed); bytes arriving later are counted and dropped.
Any other exception (a bug, local misuse) propagates out of ``env.run()``.

**Middleboxes** live in :mod:`netsim.relay`: a :class:`~netsim.relay.Relay` terminates the
client's connection and opens its own to the server (a proxy): two drivers, the relay's side of
each an internal object whose bytes go to a :class:`~netsim.relay.RelayApplication` that decides
what to forward and when -- :class:`~netsim.relay.Forward` cuts through or stores and forwards
whole units (:func:`tls_records`); a protocol-aware relay (``sslsplit.model_driver.SplitProxy``)
rewrites the stream. The relay's work runs on its own host.
A side can also be stepped from outside its connection (:meth:`Side.wake`), e.g. when a
payload fetched on another connection lets it send.

Metrics (appended during the run): ``driver.flights`` (:class:`Flight`: time, side, bytes),
``driver.events`` (:class:`Logged`: time, side, event), per side ``bytes_sent`` /
``bytes_received`` (application bytes, i.e. what the objects produced and consumed; TCP/IP
headers are on the links) and the host's job log (:meth:`~netsim.host.Host.jobs_frame`).

Example: a real TLS 1.2 handshake and one HTTP/1.0 GET over a 160 kbit/s line::

    >>> import simpy
    >>> from tls12 import ClientConnection, ServerConnection
    >>> from tls12.certs import generate_self_signed
    >>> from tls12.config import ClientConfig, ServerConfig
    >>> from netsim.link import Duplex, LinkParams
    >>> from netsim.tcp import TcpConnection
    >>> env = simpy.Environment()
    >>> wire = Duplex(env, LinkParams(160e3, 0.010))
    >>> conn = TcpConnection(env, (wire.ab,), (wire.ba,))
    >>> server_creds = generate_self_signed(key_size=1024)
    >>> client = ClientConnection(ClientConfig())
    >>> server = ServerConnection(ServerConfig(credentials=server_creds))
    >>> get = HttpGetClient("/index.html")
    >>> d = Driver(env, conn, client, server, client_app=get,
    ...            server_app=HttpFileServer(b"x" * 3000))
    >>> env.run()
    >>> get.body == b"x" * 3000, d.finished_at > 0.3, d.client.error is None
    (True, True, True)
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
import simpy
from simpy.events import ProcessGenerator

from tls12.record import split_records

from .cpu import CpuModel, NoCpu
from .host import Host
from .link import LAN, Duplex, LinkParams, now_event
from .tcp import HalfConnection, TcpConnection, TcpParams

if TYPE_CHECKING:
    from os import PathLike

    from .pcap import PcapWriter

__all__ = ["SansIO", "Side", "Driver", "Flight", "Logged", "Started", "Application",
           "ByteSource", "HttpGetClient", "HttpFileServer", "run_pair", "tls_records"]

_WAKE = object()
"""Inbox marker: step the side with no bytes received (someone queued bytes for it)."""


class SansIO(Protocol):
    """What the driver needs of a protocol object (see the module docstring)."""

    def receive_data(self, data: bytes) -> list[Any]: ...

    def data_to_send(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Started:
    """Driver event, passed to each side's application once TCP is open (not logged)."""


_STARTED = Started()


@dataclass(frozen=True, slots=True)
class Flight:
    """``nbytes`` the ``side`` wrote to TCP at ``time`` (one ``data_to_send()``)."""

    time: float
    side: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class Logged:
    """An event ``side``'s object returned at ``time``."""

    time: float
    side: str
    event: Any


class Side:
    """One endpoint as its application callback sees it: the object and its transport."""

    def __init__(self, env: simpy.Environment, name: str, obj: SansIO, tx: HalfConnection,
                 app: Application | None, host: Host, cpu: CpuModel) -> None:
        self.env = env
        self.name = name
        self.obj = obj
        self.tx = tx
        self.app = app
        self.host = host
        self.cpu = cpu
        bind = getattr(cpu, "bind", None)
        if bind is not None:        # the model charges what the object reports (netsim.cpu)
            bind(obj)
        self.inbox = _Inbox(env)
        self.bytes_sent = 0
        self.bytes_received = 0
        self.cpu_seconds = 0.0
        self.error: Exception | None = None
        self.reset = False
        self.finished = False
        self.linger = False   #: keep stepping after the peer's FIN until our own FIN is out
        self._shutdown = False

    @property
    def now(self) -> float:
        return self.env.now

    def shutdown(self) -> None:
        """Send a FIN once the bytes of the current step are written (idempotent)."""
        self._shutdown = True

    def abort(self) -> None:
        """Reset the TCP connection at once (a RST to the peer, unless suppressed)."""
        self.tx.abort()
        self.finished = True

    def deliver(self, item: object) -> None:
        """Put ``item`` (a chunk that arrived, ``None`` for a RST, or a wake) in the inbox."""
        self.inbox.put(item)

    def wake(self) -> None:
        """Step this side soon with no bytes received: its object has bytes to send.

        For objects fed from outside the connection (a relay's halves, a client whose
        request is queued by another process); a wake with nothing to send costs nothing.
        """
        self.deliver(_WAKE)

    @property
    def _done(self) -> bool:
        if not self.finished:
            return False
        return not self.linger or self.tx.seq.fin_sent or self.tx.seq.reset


class _Inbox:
    """What arrived for a side and is not yet stepped: an unbounded ``simpy.Store`` with one getter.

    It schedules the events such a store does, at the same points -- a put's event, whose
    processing hands the head item to a waiting ``get``; a ``get`` that fires at once when an
    item is queued -- so a side steps exactly when it would on a store, with none of the
    store's queues of put and get requests around each.
    """

    __slots__ = ("env", "items", "_getter")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.items: deque[object] = deque()
        self._getter: simpy.Event | None = None

    def put(self, item: object) -> None:
        self.items.append(item)
        now_event(self.env, self._serve)

    def _serve(self, _: simpy.Event) -> None:
        getter = self._getter
        if getter is not None and self.items:
            self._getter = None
            getter.succeed(self.items.popleft())

    def get(self) -> simpy.Event:
        """An event whose value is the next item (at once if one is queued)."""
        event = simpy.Event(self.env)
        if self.items:
            event.succeed(self.items.popleft())
        else:
            self._getter = event
        return event


#: An application callback: ``app(side, event)`` for every event of that side's object.
Application = Callable[[Side, Any], None]


class Driver:
    """Runs ``client`` (endpoint a of ``conn``) and ``server`` (endpoint b) in simulated time.

    ``client_host`` / ``server_host``: the :class:`~netsim.host.Host` whose CPU queue each
    side's work joins (share one host between drivers to model a busy server); by default
    each side gets a private one-core host. ``client_cpu`` / ``server_cpu``: a CPU model per
    side (:class:`netsim.cpu.Tls12Cpu` for TLS; default: no CPU time). ``open``: start with
    the SYN / SYN-ACK round trip (``False`` if the caller opened ``conn``). ``start``: delay
    (seconds) before the client begins. ``capture``: a :class:`~netsim.pcap.PcapWriter` that
    records every packet of ``conn`` (the client end on its host's address and an ephemeral
    port, the server end on ``port``, 443 by default); off by default.
    """

    def __init__(self, env: simpy.Environment, conn: TcpConnection, client: SansIO,
                 server: SansIO, *, client_app: Application | None = None,
                 server_app: Application | None = None, client_host: Host | None = None,
                 server_host: Host | None = None, client_cpu: CpuModel | None = None,
                 server_cpu: CpuModel | None = None, open: bool = True,
                 start: float = 0.0, capture: PcapWriter | None = None,
                 port: int = 443) -> None:
        if start < 0:
            raise ValueError(f"start must be >= 0 s, got {start}")
        self.env = env
        self.conn = conn
        self.client = Side(env, "client", client, conn.a, client_app,
                           client_host or Host(env, "client"), client_cpu or NoCpu())
        self.server = Side(env, "server", server, conn.b, server_app,
                           server_host or Host(env, "server"), server_cpu or NoCpu())
        self.flights: list[Flight] = []
        self.events: list[Logged] = []
        self.started_at = env.now + start
        self.opened_at: float | None = None
        self.finished_at: float | None = None
        self.wall_seconds: float | None = None   #: set by :func:`run_pair`
        if capture is not None:
            capture.attach(conn, self.client.host.name, self.server.host.name, port)
        conn.a.on_data = self.server.deliver
        conn.b.on_data = self.client.deliver
        conn.a.on_reset = lambda: self.server.deliver(None)
        conn.b.on_reset = lambda: self.client.deliver(None)
        self._open = open
        self._start = start
        self.process = env.process(self._run())

    # -- processes --------------------------------------------------------------------------
    def _run(self) -> ProcessGenerator:
        env = self.env
        if self._start:
            yield env.timeout(self._start)
        if self._open:
            yield self.conn.open()
        self.opened_at = env.now
        yield env.process(self._side(self.client)) & env.process(self._side(self.server))
        self.finished_at = env.now

    def _side(self, side: Side) -> ProcessGenerator:
        yield from self._step(side, None)
        while not side._done:
            chunk = yield side.inbox.get()
            if chunk is _WAKE:
                yield from self._step(side, None, wake=True)
                continue
            if chunk is None:                      # RST: the stream ends here
                side.reset = True
                chunk = b""
            while chunk and side.inbox.items and isinstance(side.inbox.items[0], bytes) \
                    and side.inbox.items[0]:
                chunk += (yield side.inbox.get())  # bytes that arrived at the same instant
            yield from self._step(side, chunk)

    def _step(self, side: Side, chunk: bytes | None, wake: bool = False
              ) -> ProcessGenerator:
        events: list[Any] = [_STARTED] if chunk is None and not wake else []
        received = chunk or b""
        if chunk is not None and not side.finished:
            side.bytes_received += len(chunk)
            if side.error is None:        # after an error the object is closed: bytes dropped
                try:
                    events = side.obj.receive_data(chunk)
                except Exception as exc:  # a remote protocol error: deliver what it carries
                    if not hasattr(exc, "events"):
                        raise
                    side.error = exc
                    events = list(exc.events)
                    side.shutdown()
            if not chunk:
                side.finished = True
        for event in events:
            if chunk is not None:
                self.events.append(Logged(self.env.now, side.name, event))
            if side.app is not None:
                side.app(side, event)
        out = side.obj.data_to_send()
        ops = side.cpu.charge(received, out)
        seconds: float = 0
        top = ops[0] if ops else ("", 0.0)
        for op in ops:                     # the sum, and the first of the largest (its label)
            seconds += op[1]
            if op[1] > top[1]:
                top = op
        if seconds > 0:
            side.cpu_seconds += seconds
            yield side.host.compute(seconds, f"{side.name}:{top[0]}")
        tx = side.tx
        if out and not tx.seq.reset and not tx.seq.fin_sent and not side.reset:
            tx.write(out)
            side.bytes_sent += len(out)
            self.flights.append(Flight(self.env.now, side.name, len(out)))
        if side._shutdown and not tx.seq.fin_sent and not tx.seq.reset:
            tx.close_nowait()

    # -- results ----------------------------------------------------------------------------
    def bytes_by_direction(self) -> dict[str, int]:
        """Application bytes written: ``{"client->server": n, "server->client": m}``."""
        return {"client->server": self.client.bytes_sent, "server->client": self.server.bytes_sent}

    def flights_frame(self) -> pd.DataFrame:
        """One row per flight: time, side, nbytes."""
        return pd.DataFrame({"time": [f.time for f in self.flights],
                             "side": [f.side for f in self.flights],
                             "nbytes": [f.nbytes for f in self.flights]})

    def first_event(self, kind: type, side: str | None = None) -> Logged | None:
        """The first logged event of class ``kind`` (on ``side``, if given), or ``None``."""
        for logged in self.events:
            if isinstance(logged.event, kind) and (side is None or logged.side == side):
                return logged
        return None


class ByteSource:
    """A sans-IO endpoint that sends ``data`` once and keeps what it receives (a static peer).

    Pass :meth:`ByteSource.app` as the side's callback to end the stream (FIN) after the data.
    """

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self.received = bytearray()
        self.eof = False

    def receive_data(self, data: bytes) -> list[Any]:
        self.received += data
        self.eof = self.eof or not data
        return []

    def data_to_send(self) -> bytes:
        out, self._data = self._data, b""
        return out

    @staticmethod
    def app(side: Side, event: Any) -> None:
        """Application for a source: FIN right after the data."""
        if isinstance(event, Started):
            side.shutdown()


class HttpGetClient:
    """Client application for a TLS object: one HTTP/1.0 GET once the handshake is done.

    Collects the response (``response``; ``body`` after the header) and shuts its transport
    down when the connection closes. Works with any object whose events are ``tls12``'s.
    """

    def __init__(self, path: str = "/", host: str = "localhost") -> None:
        from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete

        self._kinds = (HandshakeComplete, ApplicationData, ConnectionClosed)
        self.request = f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode()
        self.response = bytearray()

    @property
    def body(self) -> bytes:
        head, sep, body = bytes(self.response).partition(b"\r\n\r\n")
        return body if sep else b""

    def __call__(self, side: Side, event: Any) -> None:
        ready, data, closed = self._kinds
        if isinstance(event, ready):
            side.obj.send_data(self.request)  # type: ignore[attr-defined]  # SansIO declares no send_data; this app's sides are connections that have it
        elif isinstance(event, data):
            self.response += event.data
        elif isinstance(event, closed):
            side.shutdown()


class HttpFileServer:
    """Server application for a TLS object: answers one HTTP/1.0 request with ``body``, closes."""

    def __init__(self, body: bytes, content_type: str = "application/octet-stream") -> None:
        from tls12.events import ApplicationData, ConnectionClosed

        self._kinds = (ApplicationData, ConnectionClosed)
        self.body = body
        self.header = (f"HTTP/1.0 200 OK\r\nContent-Type: {content_type}\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode()
        self._request = bytearray()
        self.requests = 0

    def __call__(self, side: Side, event: Any) -> None:
        data, closed = self._kinds
        if isinstance(event, data):
            self._request += event.data
            if b"\r\n\r\n" in self._request and not self.requests:
                self.requests += 1
                side.obj.send_data(self.header + self.body)  # type: ignore[attr-defined]  # SansIO declares no send_data; this app's sides are connections that have it
                side.obj.close()  # type: ignore[attr-defined]  # SansIO declares no close; this app's sides are connections that have it
                side.shutdown()
        elif isinstance(event, closed):
            side.shutdown()


def run_pair(client: SansIO, server: SansIO, *, client_app: Application | None = None,
             server_app: Application | None = None, up: LinkParams = LAN,
             down: LinkParams | None = None, tcp: TcpParams | None = None,
             client_cpu: CpuModel | None = None, server_cpu: CpuModel | None = None,
             seed: int = 0, pcap: str | PathLike[str] | None = None) -> Driver:
    """Run one connection to completion on a fresh environment and a :class:`Duplex` wire.

    ``up`` is the client → server direction (default: the 100 Mbit/s :data:`~netsim.link.LAN`),
    ``down`` the reverse (default: as ``up``); ``tcp`` the TCP constants (default
    :class:`~netsim.tcp.TcpParams`). ``pcap``: write every packet of the connection to this
    file (:class:`~netsim.pcap.PcapWriter`; the server on port 443).
    The returned driver carries the metrics and ``wall_seconds`` (the run's wall-clock time).
    """
    t0 = time.perf_counter()
    env = simpy.Environment()
    wire = Duplex(env, up, down, seed=seed)
    conn = TcpConnection(env, (wire.ab,), (wire.ba,), tcp or TcpParams())
    capture = None
    if pcap is not None:
        from .pcap import PcapWriter

        capture = PcapWriter(pcap)
    try:
        driver = Driver(env, conn, client, server, client_app=client_app,
                        server_app=server_app, client_cpu=client_cpu, server_cpu=server_cpu,
                        capture=capture)
        env.run()
    finally:
        if capture is not None:
            capture.close()
    driver.wall_seconds = time.perf_counter() - t0
    return driver


def tls_records(buffered: bytes) -> int:
    """How many leading bytes of ``buffered`` are whole TLS records (the core's framing,
    :func:`tls12.record.split_records`)."""
    ends = split_records(buffered, partial=True)
    return ends[-1] if ends else 0
