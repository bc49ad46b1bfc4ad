"""Figure 12 on the driver: the real HTTP, HTTPS and SSL-splitting objects over the ADSL testbed.

:mod:`sslsplit.model_latency` replays each protocol's flights as hand-typed byte counts. This module
runs the objects that produce those flights instead, with :mod:`netsim.drive` moving their
bytes over the byte-accurate TCP in simulated time, on the same topology (§6.1):

* **HTTP** -- a plain byte stream (:class:`PlainStream`) from client to origin over the LAN
  and the server's ADSL line;
* **HTTPS** -- the real ``tls12`` client and server, TLS_RSA_WITH_AES_128_CBC_SHA (RSA key
  exchange, as in the paper), same path;
* **SSL splitting** -- the real ``tls12`` client talks over the LAN to a proxy
  (:class:`~netsim.relay.Relay`) running the real :class:`~sslsplit.splicer.Splicer`
  (:class:`SplitProxy`); the proxy holds a TCP connection over the ADSL line to the real
  splitting server (``tls12`` server with the :class:`~sslsplit.writer.SplittingRecordWriter`,
  built as :class:`sslsplit.aio.server.SplittingServer` builds it). A digest stub whose payload
  is not in the proxy's cache (*cold*) is fetched from the origin's record store over a second
  keep-alive ADSL connection, one HTTP/1.1 request per payload, exactly as the real proxy's
  :class:`~sslsplit.aio.PayloadClient` does (:class:`PayloadFetcher` and
  :class:`PayloadServer` speak the same bytes with ``h11``); *warm*, every payload is cached
  (a previous cold download of the same file filled the cache).

The origin answers with the bytes of the testbed's HTTP layer
(:class:`testbed.apps.file_handler.HTTPFileHandler`: same head, same writes; the head in its own
record for splitting), the client asks as ``http.client`` does (HTTP/1.1, ``Connection:
close``). So the bytes on the ADSL uplink equal those a loopback run of the real servers
sends -- a test checks it. CPU: the origin spends ``rsa_seconds`` on the premaster decryption
(:class:`netsim.cpu.Tls12Cpu` with only that cost), nothing else is charged, as in the old
model.

Latency is from the client's SYN to the last byte of the response body.
:func:`figure12_driver` returns it per protocol and size, beside the old model's.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11
import numpy as np
import pandas as pd
import simpy

from netsim.cpu import CostTable, Tls12Cpu
from netsim.drive import Driver, Side, Started
from netsim.host import Host
from netsim.link import Link
from netsim.relay import Relay
from netsim.tcp import TcpConnection
from testbed.apps.file_handler import CHUNK_SIZE, SERVER_NAME
from tls12 import ClientConfig, ClientConnection, ServerConnection
from tls12.certs import SIM_SERIAL, Credentials, generate_self_signed
from tls12.config import ServerConfig
from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete
from tls12.keylog import KeyLog
from tls12.session import InMemorySessionStore
from tls12.suites import CipherSuite

from .cache import CacheMiss
from .model_latency import AdslTestbed, request_latency, uplink_bytes
from .splicer import PayloadNeeded, Splicer, StreamEnded
from .store import RecordStore
from .wire import IDEncoding, Stub, payload_path
from .writer import SplittingRecordWriter, suites_for_mode

__all__ = ["DRIVER_PROTOCOLS", "SUITE", "PlainStream", "FileClient", "FileOrigin",
           "PayloadFetcher", "PayloadArrived", "PayloadServer", "SplitProxy", "Download",
           "simulate_download", "figure12_driver"]

#: Protocols :func:`simulate_download` runs.
DRIVER_PROTOCOLS = ("http", "https", "split_cold", "split_warm")
#: The paper's key exchange (RSA), with the AES-CBC suite the testbed uses.
SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
CONTENT_TYPE = "application/octet-stream"


class PlainStream:
    """A sans-IO plain TCP stream with the ``tls12`` API (HTTP's "no protocol" baseline).

    ``send_data`` queues bytes as they are; received bytes come back as ``ApplicationData``;
    the peer's FIN as ``ConnectionClosed(clean=True)``. The client application sees it as
    already handshaken: it acts on :class:`~netsim.drive.Started`.
    """

    plain = True

    def __init__(self) -> None:
        self._out = bytearray()

    def receive_data(self, data: bytes) -> list[Any]:
        return [ApplicationData(data)] if data else [ConnectionClosed(clean=True)]

    def send_data(self, data: bytes) -> None:
        self._out += data

    def close(self) -> None:
        """Nothing to send: the FIN is the transport's (the application shuts it down)."""

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


class FileClient:
    """Client application: one ``GET path`` as ``http.client`` sends it, body parsed with h11.

    ``done_at`` is the simulated time the last body byte arrived; ``body`` the body. The
    transport is shut down when the connection closes.
    """

    def __init__(self, path: str = "/file", host: str = "127.0.0.1") -> None:
        self.path = path
        self.host = host
        self.body = bytearray()
        self.status: int | None = None
        self.done_at: float | None = None
        self._h11 = h11.Connection(h11.CLIENT)

    def _request(self, side: Side) -> None:
        req = h11.Request(method="GET", target=self.path,
                          headers=[("Host", self.host), ("Accept-Encoding", "identity"),
                                   ("Connection", "close")])
        side.obj.send_data(self._h11.send(req) + self._h11.send(h11.EndOfMessage()))  # type: ignore[attr-defined]  # the driver's SansIO is minimal; this app's objects are connections

    def __call__(self, side: Side, event: Any) -> None:
        if isinstance(event, Started) and getattr(side.obj, "plain", False):
            self._request(side)
        elif isinstance(event, HandshakeComplete):
            self._request(side)
        elif isinstance(event, ApplicationData):
            self._h11.receive_data(event.data)
            while (ev := self._h11.next_event()) is not h11.NEED_DATA:
                if isinstance(ev, h11.Response):
                    self.status = ev.status_code
                elif isinstance(ev, h11.Data):
                    self.body += ev.data
                elif isinstance(ev, h11.EndOfMessage):
                    self.done_at = side.now
                elif ev is h11.PAUSED or isinstance(ev, h11.ConnectionClosed):
                    break
        elif isinstance(event, ConnectionClosed):
            side.shutdown()


class FileOrigin:
    """Origin application: answers one GET with ``body`` as the testbed's HTTP layer does.

    The same head (``Server``, ``Content-Length``, ``Content-Type``) and the same writes as
    :class:`testbed.apps.file_handler.HTTPFileHandler`: with ``coalesce`` the head shares the
    first ``CHUNK_SIZE`` write with the body, otherwise (SSL splitting) it is written alone;
    then the TLS connection is closed (close_notify) and the transport shut down.
    """

    def __init__(self, body: bytes, *, coalesce: bool = True) -> None:
        self.body = bytes(body)
        self.coalesce = coalesce
        self._h11 = h11.Connection(h11.SERVER)
        self.requests = 0

    def _respond(self, side: Side) -> None:
        obj: Any = side.obj
        conn = self._h11
        size = len(self.body)
        headers = [("Server", SERVER_NAME), ("Content-Length", str(size)),
                   ("Content-Type", CONTENT_TYPE)]
        pending = b"".join(conn.send_with_data_passthrough(
            h11.Response(status_code=200, headers=headers, reason=b"OK")) or ())
        if not self.coalesce:
            obj.send_data(pending)
            pending = b""
        sent = 0
        while sent < size:
            room = CHUNK_SIZE - len(pending) if len(pending) < CHUNK_SIZE else CHUNK_SIZE
            chunk = self.body[sent:sent + min(room, size - sent)]
            data = b"".join(conn.send_with_data_passthrough(h11.Data(data=chunk)) or ())
            obj.send_data(pending + data)
            pending = b""
            sent += len(chunk)
        tail = pending + b"".join(conn.send_with_data_passthrough(h11.EndOfMessage()) or ())
        if tail:
            obj.send_data(tail)
        obj.close()
        side.shutdown()

    def __call__(self, side: Side, event: Any) -> None:
        if isinstance(event, ApplicationData):
            self._h11.receive_data(event.data)
            while (ev := self._h11.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
                if isinstance(ev, h11.EndOfMessage) and not self.requests:
                    self.requests += 1          # one request, then Connection: close
                    self._respond(side)
                elif isinstance(ev, h11.ConnectionClosed):
                    break
        elif isinstance(event, ConnectionClosed):
            side.shutdown()


@dataclass(frozen=True, slots=True)
class PayloadArrived:
    """The payload source answered the oldest open request (``payload`` None: a 404)."""

    ident: bytes
    payload: bytes | None


class PayloadFetcher:
    """Sans-IO keep-alive client of the cache-miss protocol (:class:`~sslsplit.aio.PayloadClient`).

    ``request(encoding, ident)`` queues ``GET /payload/<enc>/<hex id>``; answers come back from
    ``receive_data`` as :class:`PayloadArrived`, in order.
    """

    def __init__(self, name: str = "origin") -> None:
        self.name = name
        self._h11 = h11.Connection(h11.CLIENT)
        self._out = bytearray()
        self._asked: list[bytes] = []
        self._queue: list[tuple[IDEncoding, bytes]] = []
        self._status = 0
        self._body = bytearray()
        self.requests = 0

    def request(self, encoding: IDEncoding, ident: bytes) -> None:
        self._queue.append((encoding, ident))
        self._next()

    def _next(self) -> None:
        if self._asked or not self._queue:
            return   # requests are serialised, as in PayloadClient
        encoding, ident = self._queue.pop(0)
        self._asked.append(ident)
        self.requests += 1
        req = h11.Request(method="GET", target=payload_path(encoding, ident),
                          headers=[("Host", self.name)])
        self._out += self._h11.send(req) + self._h11.send(h11.EndOfMessage())

    def receive_data(self, data: bytes) -> list[Any]:
        self._h11.receive_data(data)
        events: list[Any] = []
        while (ev := self._h11.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
            if isinstance(ev, h11.Response):
                self._status, self._body = ev.status_code, bytearray()
            elif isinstance(ev, h11.Data):
                self._body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                ident = self._asked.pop(0)
                events.append(PayloadArrived(ident, bytes(self._body) if self._status == 200
                                             else None))
                self._h11.start_next_cycle()
                self._next()
            elif isinstance(ev, h11.ConnectionClosed):
                break
        return events

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


class PayloadServer:
    """Sans-IO origin side of the cache-miss protocol: the bytes :func:`sslsplit.aio.serve_payloads` sends."""

    def __init__(self, lookup: Callable[[bytes], bytes | None]) -> None:
        self._lookup = lookup
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=8192)
        self._out = bytearray()
        self._target = b""

    def receive_data(self, data: bytes) -> list[Any]:
        self._h11.receive_data(data)
        while (ev := self._h11.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
            if isinstance(ev, h11.Request):
                self._target = ev.target
            elif isinstance(ev, h11.EndOfMessage):
                self._answer()
            elif isinstance(ev, h11.ConnectionClosed):
                break
        return []

    def _answer(self) -> None:
        ident = bytes.fromhex(self._target.rsplit(b"/", 1)[-1].decode())
        found = self._lookup(ident)
        status, body = (200, found) if found is not None else (404, b"not found\n")
        headers = [("Content-Length", str(len(body))), ("Content-Type", CONTENT_TYPE)]
        conn = self._h11
        for event in (h11.Response(status_code=status, headers=headers,
                                   reason=HTTPStatus(status).phrase.encode()),
                      h11.Data(data=body), h11.EndOfMessage()):
            self._out += conn.send(event) or b""
        conn.start_next_cycle()

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


class SplitProxy:
    """Relay application of the SSL-splitting proxy (:class:`sslsplit.aio.proxy.SplittingProxy`).

    Client records go to the server verbatim (cut through). The server's messages go through
    the real :class:`~sslsplit.splicer.Splicer`; a digest stub's payload comes from ``cache``
    (a dict id -> payload, filled as payloads arrive) or, on a miss, from the origin's record
    store over a keep-alive connection that ``connect_store()`` opens on the first miss. The
    records for the client leave as the splicer produces them (message by message: a stub is
    rebuilt once all of it has arrived). ``misses`` counts the fetches; a payload the origin
    does not have raises :class:`~sslsplit.cache.CacheMiss` (the real proxy's error).
    """

    def __init__(self, cache: dict[bytes, bytes], connect_store: Callable[[], TcpConnection],
                 store: PayloadServer, *, origin_host: Host | None = None,
                 rng: Callable[[int], bytes] = os.urandom) -> None:
        self.cache = cache
        self.splicer = Splicer(rng)
        self._connect_store = connect_store
        self._store = store
        self._origin_host = origin_host
        self._fetcher = PayloadFetcher()
        self.fetch: Driver | None = None
        self._relay: Relay | None = None
        self.misses = 0

    def from_client(self, relay: Relay, data: bytes) -> None:
        self._relay = relay
        if data:
            relay.send_to_server(data)
        else:
            relay.close_server()

    def from_server(self, relay: Relay, data: bytes) -> None:
        self._relay = relay
        self._handle(self.splicer.receive_data(data))

    def _handle(self, events: list[Any]) -> None:
        relay = self._relay
        assert relay is not None
        while events:
            event = events.pop(0)
            if isinstance(event, PayloadNeeded):
                payload = self.cache.get(event.stub.ident)
                if payload is None:
                    self._miss(relay, event.stub)
                    break      # the splicer waits for this payload
                events += self.splicer.supply(event.stub, payload)
            elif isinstance(event, StreamEnded):
                relay.send_to_client(self.splicer.data_to_send())
                relay.close_client()
        relay.send_to_client(self.splicer.data_to_send())

    def _miss(self, relay: Relay, stub: Stub) -> None:
        self.misses += 1
        self._fetcher.request(stub.encoding, stub.ident)
        if self.fetch is None:
            self.fetch = Driver(relay.env, self._connect_store(), self._fetcher, self._store,
                                client_app=self._arrived, client_host=relay.host,
                                server_host=self._origin_host, capture=relay.capture, port=80)
            self.fetch.client.name = "relay"
            self.fetch.server.name = "store"
        else:
            self.fetch.client.wake()

    def _arrived(self, side: Side, event: Any) -> None:
        if isinstance(event, PayloadArrived):
            stub = self.splicer.waiting
            if event.payload is None or stub is None or stub.ident != event.ident:
                raise CacheMiss(f"the origin has no payload {event.ident.hex()[:16]}")
            self.cache[event.ident] = event.payload
            self._handle(self.splicer.supply(stub, event.payload))


@dataclass
class Download:
    """One simulated download: latency and the bytes on the ADSL uplink."""

    protocol: str
    size: int
    latency_s: float
    uplink_bytes: int          #: TCP payload bytes the origin sent (stubs + miss payloads)
    uplink_wire_bytes: int     #: bytes on the ADSL uplink link, TCP/IP headers included
    body_ok: bool
    misses: int = 0            #: cache-miss requests to the origin's record store
    #: one row per flight (time, side, nbytes, connection: 0 client--origin or client--proxy,
    #: 1 proxy--origin, 2 the proxy's cache-miss connection)
    flights: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)


def _server_config(credentials: Credentials, split: bool, session_cache: bool,
                   rng: random.Random) -> ServerConfig:
    suites = suites_for_mode("auto") if split else (SUITE,)
    return ServerConfig(credentials=credentials, cipher_suites=suites, rng=rng.randbytes,
                        session_store=InMemorySessionStore() if session_cache else None)


def simulate_download(protocol: str, body: bytes, params: AdslTestbed | None = None, *,
                      credentials: Credentials | None = None,
                      cache: dict[bytes, bytes] | None = None, session_cache: bool = False,
                      seed: int = 0, pcap: str | os.PathLike[str] | None = None,
                      keylog: KeyLog | None = None) -> Download:
    """Simulate one GET of ``body`` with ``protocol`` (one of :data:`DRIVER_PROTOCOLS`).

    ``credentials``: the origin's key and certificate (default: a fresh 1024-bit RSA key, the
    paper's size); ``cache``: the split proxy's payload cache (``split_warm`` without one
    first runs a cold download to fill it); ``session_cache``: whether the origin issues
    session ids (default ``False``, like the servers of the loopback
    :class:`~sslsplit.aio.testbed.Testbed` the byte counts are checked against). ``seed`` seeds
    every RNG of the run. ``pcap``: write every packet of the run to this file
    (:class:`netsim.pcap.PcapWriter`: the client, the proxy and the origin are hosts ``client``,
    ``relay`` and ``server``; TLS on port 443, HTTP and the cache-miss fetches on 80);
    ``keylog``: the client's key-log sink (:mod:`tls12.keylog`), to decrypt that capture.
    """
    if protocol not in DRIVER_PROTOCOLS:
        raise ValueError(f"protocol must be one of {DRIVER_PROTOCOLS}, got {protocol!r}")
    p = params or AdslTestbed()
    creds = credentials or generate_self_signed(key_size=1024, serial=SIM_SERIAL)
    if protocol == "split_warm" and cache is None:
        cache = {}
        simulate_download("split_cold", body, p, credentials=creds, cache=cache,
                          session_cache=session_cache, seed=seed + 1)
    rng = random.Random(seed)
    env = simpy.Environment()
    lan_cp, lan_pc = Link(env, p.lan, "lan:c->p"), Link(env, p.lan, "lan:p->c")
    adsl_down, adsl_up = Link(env, p.server_down, "adsl:->s"), Link(env, p.server_up, "adsl:s->")
    origin = Host(env, "server")
    paper_cpu = CostTable(rsa_private=p.rsa_seconds, source="paper testbed")
    get = FileClient("/file")
    split = protocol.startswith("split")
    client, server, store = _endpoints(protocol, creds, session_cache, rng, keylog)
    origin_app = FileOrigin(body, coalesce=not split)
    server_cpu = Tls12Cpu(paper_cpu) if protocol != "http" else None
    proxy: SplitProxy | None = None
    capture = _capture(pcap)
    if not split:
        conn = TcpConnection(env, (lan_cp, adsl_down), (adsl_up, lan_pc), p.tcp)
        top = Driver(env, conn, client, server, client_app=get, server_app=origin_app,
                     server_host=origin, server_cpu=server_cpu, capture=capture,
                     port=80 if protocol == "http" else 443)
        drivers, origin_sides = [top], [top.server]
    else:
        front = TcpConnection(env, (lan_cp,), (lan_pc,), p.tcp)
        back = TcpConnection(env, (adsl_down,), (adsl_up,), p.tcp)
        proxy = SplitProxy(cache if cache is not None else {},
                           lambda: TcpConnection(env, (adsl_down,), (adsl_up,), p.tcp),
                           PayloadServer(store.get), origin_host=origin, rng=rng.randbytes)
        relay = Relay(env, front, back, client, server, proxy, client_app=get,
                      server_app=origin_app, server_host=origin, server_cpu=server_cpu,
                      capture=capture)
    _run(env, capture)
    if split:
        drivers = relay.drivers + ([proxy.fetch] if proxy and proxy.fetch else [])
        origin_sides = [d.server for d in drivers[1:]]
    return _download(protocol, body, get, drivers, origin_sides, adsl_up, proxy)


def _capture(pcap: str | os.PathLike[str] | None) -> Any:
    """A :class:`netsim.pcap.PcapWriter` on ``pcap``, or ``None`` (no import: no cost)."""
    if pcap is None:
        return None
    from netsim.pcap import PcapWriter

    return PcapWriter(pcap)


def _run(env: simpy.Environment, capture: Any) -> None:
    """Run the simulation to its end; close the capture (if any) even if it raised."""
    try:
        env.run()
    finally:
        if capture is not None:
            capture.close()


def _endpoints(protocol: str, creds: Credentials, session_cache: bool, rng: random.Random,
               keylog: KeyLog | None = None) -> tuple[Any, Any, RecordStore]:
    """Client and server objects of one download (plain streams for HTTP, the real tls12
    connections otherwise, the server with the splitting record writer for ``split_*``) and
    the record store the writer publishes to."""
    store = RecordStore()
    if protocol == "http":
        return PlainStream(), PlainStream(), store
    split = protocol.startswith("split")
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,), rng=rng.randbytes,
                                           keylog=keylog))
    config = _server_config(creds, split, session_cache, rng)
    writer = SplittingRecordWriter(store, IDEncoding.DIGEST_SHA256) if split else None
    server = ServerConnection(config, record_writer=writer) if split else ServerConnection(config)
    return client, server, store


def _download(protocol: str, body: bytes, get: FileClient, drivers: list[Any],
              origin_sides: list[Any], adsl_up: Link, proxy: SplitProxy | None) -> Download:
    """The :class:`Download` of a finished run: latency, uplink bytes, every driver's flights
    (``connection`` numbers them in the order of ``drivers``)."""
    frames = []
    for i, d in enumerate(drivers):
        f = d.flights_frame()
        f["connection"] = i
        frames.append(f)
    return Download(
        protocol=protocol, size=len(body),
        latency_s=float(get.done_at) if get.done_at is not None else float("nan"),
        uplink_bytes=sum(s.bytes_sent for s in origin_sides),
        uplink_wire_bytes=adsl_up.bytes_sent, body_ok=bytes(get.body) == body,
        misses=proxy.misses if proxy else 0,
        flights=pd.concat(frames, ignore_index=True))


def _file(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


#: The old model's name for each protocol (``split_warm`` has none).
_OLD = {"http": "http", "https": "https", "split_cold": "split_cold"}


def figure12_driver(quick: bool = True, sizes: Sequence[int] | None = None,
                    params: AdslTestbed | None = None, seed: int = 0) -> pd.DataFrame:
    """Figure 12, old model beside the driver: one row per protocol and file size.

    Sizes as :func:`sslsplit.experiments.figure12` (12 from 100 B to 2 MB when ``quick``, 40
    otherwise). Columns: ``protocol``, ``size``, ``model_latency_s`` (the flights-as-byte-
    counts model, :func:`sslsplit.model_latency.request_latency`; NaN for ``split_warm``, which it
    does not model), ``driver_latency_s``, ``ratio`` (driver / model), ``model_uplink_bytes``
    and ``driver_uplink_bytes`` (TCP payload the origin sends on its ADSL line),
    ``driver_uplink_wire_bytes`` (with TCP/IP headers, counted on the link), ``misses`` (cache-
    miss fetches), ``kind`` (``modelled``: nothing is timed on a real network).
    """
    p = params or AdslTestbed()
    if sizes is None:
        sizes = np.unique(np.round(np.geomspace(100, 2_000_000, 12 if quick else 40))
                          ).astype(int).tolist()
    creds = generate_self_signed(key_size=1024, serial=SIM_SERIAL)
    rows = []
    for size in sizes:
        body = _file(int(size), seed)
        cache: dict[bytes, bytes] = {}
        for proto in DRIVER_PROTOCOLS:
            d = simulate_download(proto, body, p, credentials=creds,
                                  cache=cache if proto.startswith("split") else None, seed=seed)
            old = _OLD.get(proto)
            rows.append({
                "protocol": proto, "size": int(size),
                "model_latency_s": request_latency(old, int(size), p) if old else np.nan,
                "driver_latency_s": d.latency_s,
                "model_uplink_bytes": uplink_bytes(old, int(size), p) if old else np.nan,
                "driver_uplink_bytes": d.uplink_bytes,
                "driver_uplink_wire_bytes": d.uplink_wire_bytes,
                "misses": d.misses, "body_ok": d.body_ok})
    df = pd.DataFrame(rows)
    df["ratio"] = df["driver_latency_s"] / df["model_latency_s"]
    df["kind"] = "modelled"
    return df
