"""SINE Figures 4-6 on the real objects: the origin's bytes, a cache, the verifier, in SimPy.

:mod:`sine.model_latency` replays each fetch as hand-typed byte counts (a 350-byte request, a 250-byte
header, a 370-byte tag).  This module runs the same scenario (:class:`sine.model_latency.Scenario`:
client link, WAN, TCP constants, CPU costs) with the real code, over the byte-accurate
:class:`netsim.tcp.TcpConnection` moved by :class:`netsim.drive.Driver`:

* the **origin** is a real :class:`sine.origin.Origin` on a real signed document root
  (:func:`sine.site.sign_site`); :class:`OriginEndpoint` feeds it requests through h11 and puts
  :meth:`~sine.origin.Origin.respond`'s bytes on the wire -- the very bytes its socket
  listener writes;
* the **client** is :class:`HttpFetch`: the request :class:`sine.aio.client.SineClient` sends, and
  the response body fed to the real :class:`sine.verifier.StreamVerifier` as it arrives;
* the **cache** (:class:`HttpCache`, :class:`ProxyEndpoint`) stores the origin's response bytes
  verbatim under ``(path, Accept-Encoding)`` (the origin says ``Vary: Accept-Encoding``) and
  serves a hit from the cache host; a miss is fetched over the WAN first (store and forward,
  as :mod:`sine.model_latency` assumes; Squid would also add ``Via`` / ``X-Cache`` / ``Age`` headers,
  about 100 bytes, which are left out);
* **HTTPS** is a real ``tls12`` handshake and HTTP over its records, to the TLS listener of
  the same origin; **SINEB** first fetches ``AT_sign`` over an already open ``tls12`` session
  (its handshake is done before the clock starts, as in the model), then the SINE stream with
  the digest as trust anchor; **SINEX** verifies against a digest known from a Forward
  Authenticator (no signature).

CPU (:class:`FetchCpu`): the client's verification costs :class:`sine.model_latency.Costs` (measured by
:func:`sine.experiments.measure_sine_costs`): ``hash_per_byte`` for every body byte as it arrives and one
``signature_verify`` per signature the verifier checked; TLS endpoints are priced by
:class:`netsim.cpu.Tls12Cpu` (a :class:`netsim.cpu.CostTable`).  Unlike the model, the client
verifies *while* receiving (that is what the verifier does), so its CPU overlaps the transfer.

Latency of a fetch: from the first SYN (SINEB: from the moment the TLS session is ready) until
the client has the whole document verified, its last step's CPU included.
:func:`driver_fetch_latency` and :func:`driver_portal_latency` mirror
:func:`sine.model_latency.fetch_latency` and :func:`sine.model_latency.portal_latency`.

What should later move into :mod:`netsim`: :class:`HttpCache` / :class:`ProxyEndpoint` (an
HTTP cache middlebox is protocol-agnostic) and a driver seam for a side whose bytes become
ready without input (:meth:`ProxyEndpoint.deliver` writes to the side's transport itself).
"""

from __future__ import annotations

import random
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import simpy
from simpy.events import ProcessGenerator

from netsim.cpu import DEFAULT_COSTS, CostTable, CpuModel, Tls12Cpu
from netsim.drive import Driver, Flight, Side

from .algorithms import SigAlg, SigningKey
from .errors import SineError
from .model_latency import PROTOCOLS, Costs, Scenario, _Net
from .origin import Origin
from .site import STORE_DIR, load_signed, sign_site
from .verifier import BlockVerified, StreamVerifier, TagVerified

__all__ = ["SimSite", "OriginEndpoint", "HttpFetch", "HttpCache", "ProxyEndpoint", "CacheMiss",
           "FetchCpu", "FetchFailed", "SimRun", "driver_fetch_latency", "driver_portal_latency",
           "SIM_NOW", "HOST"]

#: The simulated wall clock (Unix seconds): tags are signed at it and verified against it.
SIM_NOW = 1_700_000_000.0
#: The origin's name in requests (``Host``) and in absolute targets sent to the cache.
HOST = "origin.example"


class SimSite:
    """A signed document root served by a real :class:`~sine.origin.Origin`.

    ``documents`` maps URL paths to sizes (bytes of seeded random content); ``doc_path`` and
    ``portal_paths`` name the documents the figures use.  The tags are signed at ``now`` with
    an RSA-PSS key; the server's clock is fixed at ``now`` too, so responses are reproducible
    byte for byte.  Use as a context manager (the files live in a temporary directory).
    """

    def __init__(self, documents: dict[str, int], *, now: float = SIM_NOW, seed: int = 0,
                 key: SigningKey | None = None) -> None:
        rng = random.Random(seed)
        self._tmp = tempfile.TemporaryDirectory(prefix="sine-sim-")
        self.root = Path(self._tmp.name)
        for path, size in documents.items():
            file = Path(self.root, path.lstrip("/"))
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(rng.randbytes(size))
        self.now = now
        self.key = key or SigningKey.generate(SigAlg.RSA_PSS_SHA256)
        sign_site(self.root, self.key, now)
        self.origin = Origin(self.root, clock=lambda: now)
        self.documents = dict(documents)
        self._tls_credentials: Any = None

    @staticmethod
    def doc_path(size: int) -> str:
        return f"/doc-{size}.bin"

    @staticmethod
    def portal_paths(hosts: int, size: int) -> list[str]:
        return [f"/portal/h{i}-{size}.bin" for i in range(hosts)]

    @classmethod
    def for_figures(cls, sizes: list[int], hosts: int = 22, portal_size: int = 15_000,
                    **kwargs: Any) -> SimSite:
        docs = {cls.doc_path(s): s for s in sizes}
        docs.update({p: portal_size for p in cls.portal_paths(hosts, portal_size)})
        return cls(docs, **kwargs)

    def at_sign(self, path: str) -> bytes:
        """``AT_sign`` of ``path`` (what a SINEX Forward Authenticator lists for it)."""
        at = load_signed(self.root, path)
        if at is None:
            raise KeyError(path)
        return at.tag.info.at_sign()

    @property
    def tls_credentials(self) -> Any:
        """An RSA-2048 self-signed ``tls12`` credential for the TLS listener (made once), its
        serial fixed (:data:`tls12.certs.SIM_SERIAL`): one certificate size, one latency."""
        if self._tls_credentials is None:
            from tls12.certs import SIM_SERIAL, generate_self_signed
            self._tls_credentials = generate_self_signed(key_size=2048, serial=SIM_SERIAL)
        return self._tls_credentials

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> SimSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FetchFailed(SineError, RuntimeError):
    """A simulated fetch did not deliver a verified document (the cause is chained)."""


# -- sans-IO HTTP endpoints --------------------------------------------------------------------


class _ServerEndpoint(ABC):
    """One server connection (sans-IO): h11 parses the requests, a subclass answers each.

    :meth:`receive_data` returns h11's events; when a request is complete it calls
    :meth:`_complete`, which queues response bytes (``self._out``) and/or adds events of its
    own. :meth:`data_to_send` hands the queued bytes over.
    """

    def __init__(self) -> None:
        self._conn = h11.Connection(h11.SERVER)
        self._out = bytearray()
        self._request: h11.Request | None = None

    def receive_data(self, data: bytes) -> list[Any]:
        conn = self._conn
        conn.receive_data(data)
        events: list[Any] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return events
            events.append(event)
            if isinstance(event, h11.Request):
                self._request = event
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                request, self._request = self._request, None
                self._complete(request, events)
            elif isinstance(event, h11.ConnectionClosed):
                return events

    @abstractmethod
    def _complete(self, request: h11.Request, events: list[Any]) -> None:
        """Answer ``request``, whose body has ended (append to ``events`` what the driver
        must see)."""

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out


class OriginEndpoint(_ServerEndpoint):
    """The origin's side of one connection (sans-IO): h11 in, the server's response bytes out.

    End of stream is ``receive_data(b"")`` (h11's ``ConnectionClosed`` comes out);
    :meth:`app` is the driver callback that answers it with a FIN.
    """

    def __init__(self, origin: Origin, is_tls: bool = False) -> None:
        super().__init__()
        self.origin, self.is_tls = origin, is_tls

    def _complete(self, request: h11.Request, events: list[Any]) -> None:
        conn = self._conn
        self._out += b"".join(self.origin.respond(conn, request, self.is_tls))
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()

    @staticmethod
    def app(side: Side, event: Any) -> None:
        if isinstance(event, h11.ConnectionClosed):
            side.shutdown()


class HttpFetch:
    """A client's side of one GET (sans-IO), as :class:`sine.aio.client.SineClient` sends it.

    The request is ``GET target`` with ``Host`` and, if ``sine``, ``Accept-Encoding: sine``
    (``target`` defaults to ``path``; through a cache the client sends the absolute URL).
    With a ``verifier`` every body byte goes to it as it arrives and its events come out with
    h11's; ``verified`` holds the verified plaintext.  ``response`` keeps every byte received.
    ``request`` replaces the built request with bytes of the same shape (a proxy forwarding).
    ``complete`` turns true at the response's end (verified, if there is a verifier);
    ``done_at`` is set by :class:`FetchCpu` once that step's CPU time is spent.
    """

    def __init__(self, path: str, *, host: str = HOST, sine: bool = True,
                 target: str | None = None, verifier: StreamVerifier | None = None,
                 request: bytes | None = None) -> None:
        self.path = path
        self._conn = h11.Connection(h11.CLIENT)
        headers = [("Host", host)] + ([("Accept-Encoding", "sine")] if sine else [])
        built = (self._conn.send(h11.Request(method="GET", target=target or path,
                                             headers=headers))
                 + self._conn.send(h11.EndOfMessage()))
        self.request = built if request is None else request
        self._out = self.request
        self.verifier = verifier
        self.response = bytearray()
        self.body = bytearray()
        self.verified = bytearray()
        self.status = 0
        self.complete = False
        self.done_at: float | None = None
        self.signatures = 0        #: signature verifications the verifier performed
        self.unpriced = 0          #: body bytes received since the CPU model last looked

    def receive_data(self, data: bytes) -> list[Any]:
        self.response += data
        conn = self._conn
        conn.receive_data(data)
        events: list[Any] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return events
            events.append(event)
            if isinstance(event, h11.Response):
                self.status = event.status_code
            elif isinstance(event, h11.Data):
                self.body += event.data
                self.unpriced += len(event.data)
                if self.verifier is not None:
                    events += self._verify(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                if self.verifier is not None:
                    events += self._verify(b"")          # end of the stream
                self.complete = True
            elif isinstance(event, h11.ConnectionClosed):
                return events

    def _verify(self, data: bytes) -> list[Any]:
        assert self.verifier is not None
        events = self.verifier.receive_data(data)
        for event in events:
            if isinstance(event, TagVerified) and event.method == "signature":
                self.signatures += 1
            elif isinstance(event, BlockVerified):
                self.verified += event.data
        return events

    def data_to_send(self) -> bytes:
        out, self._out = self._out, b""
        return out

    @staticmethod
    def app(side: Side, event: Any) -> None:
        """Driver callback: FIN once the response is complete or the server closed."""
        if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            side.shutdown()


class FetchCpu:
    """CPU model of a fetching client: :class:`~sine.model_latency.Costs` for verification, plus an
    optional inner model (``Tls12Cpu`` for HTTPS); stamps ``fetch.done_at``."""

    def __init__(self, env: simpy.Environment, fetch: HttpFetch, costs: Costs,
                 inner: CpuModel | None = None) -> None:
        self.env, self.fetch, self.costs, self.inner = env, fetch, costs, inner
        self._signatures = 0

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        fetch, c = self.fetch, self.costs
        ops = self.inner.charge(received, sent) if self.inner is not None else []
        if fetch.verifier is not None and fetch.unpriced:
            ops.append(("sine_verify", fetch.unpriced * c.hash_per_byte))
        fetch.unpriced = 0
        if fetch.signatures > self._signatures:
            ops.append(("signature_verify", (fetch.signatures - self._signatures)
                        * c.signature_verify))
            self._signatures = fetch.signatures
        if fetch.complete and fetch.done_at is None:
            fetch.done_at = self.env.now + sum(s for _, s in ops)
        return ops


# -- the cache ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CacheMiss:
    """Proxy event: the request (origin-form bytes to forward) is not in the cache."""

    key: tuple[str, bool]
    request: bytes


class HttpCache:
    """Response bytes stored verbatim by ``(path, accepts SINE)``; hit and miss counters."""

    def __init__(self) -> None:
        self.store: dict[tuple[str, bool], bytes] = {}
        self.hits = 0
        self.misses = 0

    def prefill(self, origin: Origin, path: str, sine: bool, host: str = HOST) -> None:
        """Warm the cache with the origin's response to the request a client would send."""
        endpoint = OriginEndpoint(origin)
        endpoint.receive_data(HttpFetch(path, host=host, sine=sine).request)
        self.store[(path, sine)] = endpoint.data_to_send()


class ProxyEndpoint(_ServerEndpoint):
    """The cache's side of a client connection (sans-IO): serves hits at once, reports misses.

    On a miss the proxy's process (:meth:`app`) fetches the origin-form request over its own
    upstream connection, stores the response and writes it with :meth:`deliver`.
    """

    def __init__(self, cache: HttpCache,
                 upstream: Callable[[CacheMiss], simpy.Event] | None = None) -> None:
        super().__init__()
        self.cache, self.upstream = cache, upstream
        self.driver: Driver | None = None

    def _complete(self, request: h11.Request, events: list[Any]) -> None:
        events.append(self._lookup(request))

    def _lookup(self, req: h11.Request) -> Any:
        target = req.target.decode()
        path = "/" + target.split("://", 1)[1].split("/", 1)[1] if "://" in target else target
        accept = b",".join(v for k, v in req.headers if k == b"accept-encoding")
        key = (path, b"sine" in accept)
        stored = self.cache.store.get(key)
        if stored is not None:
            self.cache.hits += 1
            self._out += stored
            return None
        self.cache.misses += 1
        fwd = h11.Connection(h11.CLIENT)
        headers = [(k, v) for k, v in req.headers.raw_items()]
        request = (fwd.send(h11.Request(method=req.method, target=path, headers=headers))
                   + fwd.send(h11.EndOfMessage()))
        return CacheMiss(key, request)

    def deliver(self, side: Side, data: bytes) -> None:
        """Write ``data`` to the client now (bytes that became ready without client input)."""
        side.tx.send(data)
        side.bytes_sent += len(data)
        if self.driver is not None:
            self.driver.flights.append(Flight(side.env.now, side.name, len(data)))

    def app(self, side: Side, event: Any) -> None:
        if isinstance(event, CacheMiss):
            side.env.process(self._miss(side, event))
        elif isinstance(event, h11.ConnectionClosed):
            side.shutdown()

    def _miss(self, side: Side, miss: CacheMiss) -> ProcessGenerator:
        if self.upstream is None:
            raise FetchFailed(f"cache miss for {miss.key[0]} and no upstream configured")
        response = yield self.upstream(miss)
        self.cache.store[miss.key] = response
        self.deliver(side, response)


# -- scenarios ----------------------------------------------------------------------------------


class SimRun:
    """One simulated run: the links of :class:`sine.model_latency.Scenario`, the site, one cache.

    Call :meth:`fetch` for each document (all start at time 0 and share the links), then
    :meth:`run`.  Afterwards: ``latencies`` (seconds, in completion order), ``fetches`` (the
    clients' :class:`HttpFetch` objects, SINEB's document fetches included once started),
    ``drivers`` (every connection's :class:`~netsim.drive.Driver`) and ``cache``.
    """

    def __init__(self, site: SimSite, sc: Scenario,
                 tls_costs: CostTable = DEFAULT_COSTS) -> None:
        self.env = simpy.Environment()
        self.net = _Net(self.env, sc)
        self.site, self.sc, self.tls_costs = site, sc, tls_costs
        self.cache = HttpCache()
        self.latencies: list[float] = []
        self.fetches: list[HttpFetch] = []
        self.drivers: list[Driver] = []

    def upstream(self, miss: CacheMiss) -> simpy.Event:
        """Fetch ``miss.request`` from the origin over the WAN; the event's value: its bytes."""
        env = self.env
        done = env.event()
        fetch = HttpFetch(miss.key[0], request=miss.request)

        def app(side: Side, event: Any) -> None:
            HttpFetch.app(side, event)
            if isinstance(event, h11.EndOfMessage):
                done.succeed(bytes(fetch.response))

        origin = OriginEndpoint(self.site.origin)
        self.drivers.append(Driver(env, self.net.proxy_to_server(), fetch, origin,
                                   client_app=app, server_app=origin.app))
        return done

    def fetch(self, protocol: str, path: str, warm: bool) -> None:
        """Start one fetch of ``path``; its latency is appended to ``latencies`` when done."""
        base, _, via = protocol.partition("-")
        proxied = via == "proxy"
        sine = base.startswith("sine")
        if proxied and warm:
            self.cache.prefill(self.site.origin, path, sine)
        if base == "https":
            self._https(path)
        elif base == "sineb":
            self._sineb(path, proxied)
        else:
            trusted = self.site.at_sign(path) if base == "sinex" else None
            self._plain(path, sine, proxied, trusted, start=self.env.now)

    def _verifier(self, path: str, trusted: bytes | None) -> StreamVerifier:
        pk = None if trusted else self.site.key.verifying_key()
        return StreamVerifier(path, self.site.now, public_key=pk, trusted_digest=trusted)

    def _plain(self, path: str, sine: bool, proxied: bool, trusted: bytes | None,
               start: float) -> None:
        env = self.env
        verifier = self._verifier(path, trusted) if sine else None
        fetch = HttpFetch(path, sine=sine, verifier=verifier,
                          target=f"http://{HOST}{path}" if proxied else None)

        def app(side: Side, event: Any) -> None:
            HttpFetch.app(side, event)
            if isinstance(event, h11.EndOfMessage):
                env.process(self._record(fetch, start))

        self.fetches.append(fetch)
        cpu = FetchCpu(env, fetch, self.sc.costs)
        if proxied:
            proxy = ProxyEndpoint(self.cache, self.upstream)
            d = Driver(env, self.net.to_proxy(), fetch, proxy, client_app=app,
                       server_app=proxy.app, client_cpu=cpu)
            proxy.driver = d
        else:
            origin = OriginEndpoint(self.site.origin)
            d = Driver(env, self.net.direct(), fetch, origin, client_app=app,
                       server_app=origin.app, client_cpu=cpu)
        self.drivers.append(d)

    def _record(self, fetch: HttpFetch, start: float) -> ProcessGenerator:
        yield self.env.timeout(0)      # the step's CPU charge runs after the callback
        if fetch.status != 200 or fetch.done_at is None:
            raise FetchFailed(f"fetch of {fetch.path} failed (HTTP {fetch.status})")
        self.latencies.append(fetch.done_at - start)

    def _tls_pair(self, fetch: HttpFetch, on_ready: Callable[[Side], None],
                  on_done: Callable[[Side], None]) -> None:
        from tls12 import ClientConnection, ServerConnection
        from tls12.config import ClientConfig, ServerConfig
        from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete

        env = self.env
        server = ServerConnection(ServerConfig(credentials=self.site.tls_credentials))
        http = OriginEndpoint(self.site.origin, is_tls=True)

        def server_app(side: Side, event: Any) -> None:
            if isinstance(event, ApplicationData):
                http.receive_data(event.data)
                out = http.data_to_send()
                if out:
                    side.obj.send_data(out)  # type: ignore[attr-defined]  # SansIO declares no send_data; these sides are connections that have it
            elif isinstance(event, ConnectionClosed):
                side.shutdown()

        def client_app(side: Side, event: Any) -> None:
            if isinstance(event, HandshakeComplete):
                on_ready(side)
                side.obj.send_data(fetch.data_to_send())  # type: ignore[attr-defined]  # SansIO declares no send_data; these sides are connections that have it
            elif isinstance(event, ApplicationData):
                fetch.receive_data(event.data)
                if fetch.complete:
                    on_done(side)
                    side.obj.close()  # type: ignore[attr-defined]  # SansIO declares no close; these sides are connections that have it
                    side.shutdown()
            elif isinstance(event, ConnectionClosed):
                side.shutdown()

        cpu = FetchCpu(env, fetch, self.sc.costs, Tls12Cpu(self.tls_costs))
        self.drivers.append(Driver(
            env, self.net.direct(), ClientConnection(ClientConfig()), server,
            client_app=client_app, server_app=server_app, client_cpu=cpu,
            server_cpu=Tls12Cpu(self.tls_costs)))

    def _https(self, path: str) -> None:
        fetch = HttpFetch(path, sine=False)
        self.fetches.append(fetch)
        start = self.env.now
        self._tls_pair(fetch, lambda side: None,
                       lambda side: self._start_record(side, fetch, start))

    def _start_record(self, side: Side, fetch: HttpFetch, start: float) -> None:
        side.env.process(self._record(fetch, start))

    def _sineb(self, path: str, proxied: bool) -> None:
        sign = HttpFetch(f"/{STORE_DIR}/sign{path}", sine=False)
        began: list[float] = []

        def ready(side: Side) -> None:
            began.append(side.env.now)

        def signed(side: Side) -> None:
            trusted = bytes.fromhex(sign.body.decode().strip())
            self._plain(path, True, proxied, trusted, start=began[0])

        self._tls_pair(sign, ready, signed)

    def run(self) -> None:
        """Run to the end; a client that failed (its verifier raised) is :class:`FetchFailed`."""
        self.env.run()
        for d in self.drivers:
            if d.client.error is not None:
                raise FetchFailed(f"a simulated fetch failed: {d.client.error!r}") \
                    from d.client.error


def _check(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}")


def driver_fetch_latency(protocol: str, size: int, sc: Scenario | None = None,
                         warm: bool = True, *, site: SimSite | None = None,
                         tls_costs: CostTable = DEFAULT_COSTS) -> float:
    """Seconds until the client holds the verified ``size``-byte document (real objects).

    ``site`` must hold :meth:`SimSite.doc_path` of ``size``; by default one is made (and
    signed) for this call.
    """
    _check(protocol)
    own = site is None
    site = site or SimSite({SimSite.doc_path(size): size})
    try:
        world = SimRun(site, sc or Scenario(), tls_costs)
        world.fetch(protocol, SimSite.doc_path(size), warm)
        world.run()
        return world.latencies[0]
    finally:
        if own:
            site.close()


def driver_portal_latency(protocol: str, hosts: int = 22, size: int = 15_000,
                          sc: Scenario | None = None, warm: bool = True, *,
                          site: SimSite | None = None,
                          tls_costs: CostTable = DEFAULT_COSTS) -> float:
    """Seconds until all ``hosts`` documents of ``size`` bytes are verified, fetched in
    parallel over shared links (the slowest fetch, as :func:`sine.model_latency.portal_latency`)."""
    _check(protocol)
    own = site is None
    paths = SimSite.portal_paths(hosts, size)
    site = site or SimSite(dict.fromkeys(paths, size))
    try:
        world = SimRun(site, sc or Scenario(), tls_costs)
        for path in paths:
            world.fetch(protocol, path, warm)
        world.run()
        if len(world.latencies) != hosts:
            raise FetchFailed(f"{len(world.latencies)} of {hosts} fetches completed")
        return max(world.latencies)
    finally:
        if own:
            site.close()

