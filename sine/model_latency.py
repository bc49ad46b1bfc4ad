"""SimPy model of the SINE testbed (Section IV of the paper), driven by measured CPU costs.

Topology (units: bit/s, seconds, bytes)::

    client --(client link: 100 Mbit/s LAN, or 128 kbit/s .. 100 Mbit/s in Fig. 5)-- proxy
    proxy  --(WAN: ~4 Mbit/s, 50 ms one way; the paper's US campus <-> PlanetLab France)-- server

A *direct* protocol (``http``, ``https``, ``sine``, ``sineb``, ``sinex``) crosses both links
end to end; a ``-proxy`` variant talks to the proxy over the client link and, on a cold cache,
the proxy fetches the object over the WAN first (store and forward).  ``https`` always goes
direct (a cache cannot serve it).  Every flight is a TCP transfer of
:class:`netsim.tcp.TcpConnection` (slow start, ACK clocking) on :class:`netsim.link.Link`.

Per request:

=============  ===========================================================================
http           TCP open; GET; header + body
https          TCP open; TLS full handshake (2 round trips + measured handshake CPU); GET;
               body in TLS records (+ measured record CPU)
sine           TCP open; GET; header + SINE stream (``stream_length``); client CPU: one
               signature verification + hashing the stream (measured)
sineb          as sine without the signature; plus one round trip over the (already open)
               TLS session to the origin for ``AT_sign``
sinex          as sine without the signature (amortized by the Forward Authenticator)
=============  ===========================================================================

Client verification CPU is added *after* the last byte arrives (no overlap with the transfer):
conservative for SINE, which in reality verifies while receiving.  :class:`Costs` holds the
CPU costs; :func:`sine.experiments.measure_sine_costs` measures them on this machine with
the real implementation (``sine.verifier``, ``cryptography``, Python ``ssl``).

The byte counts above are typed in :class:`Scenario`.  :mod:`sine.model_driver` runs the same
scenario with the real objects instead (the origin's response bytes, a cache holding them, the
streaming verifier, ``tls12`` for HTTPS) over byte-accurate TCP; ``sine.experiments``'
``figure*_driver`` functions set the two side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy
from simpy.events import ProcessGenerator

from netsim.link import Link, LinkParams
from netsim.tcp import TcpConnection, TcpParams

from .format import block_count

__all__ = ["Costs", "Scenario", "PROTOCOLS", "fetch_latency", "portal_latency",
           "sine_bytes"]

PROTOCOLS = ("http", "http-proxy", "https", "sine", "sine-proxy", "sineb", "sineb-proxy",
             "sinex", "sinex-proxy")


@dataclass(frozen=True)
class Costs:
    """CPU seconds of the operations on a request's critical path (measured or assumed)."""

    signature_verify: float = 3e-5      #: one RSA-PSS-2048 verification
    hash_per_byte: float = 1 / 150e6    #: client stream verification, 1 KiB blocks
    tls_handshake: float = 2e-3         #: full TLS handshake, client + server CPU
    tls_per_byte: float = 1 / 400e6     #: TLS record protection + removal
    source: str = "defaults"


@dataclass(frozen=True)
class Scenario:
    """Network and protocol constants; the defaults follow the paper's setup."""

    client_bw: float = 100e6
    client_delay: float = 0.0005
    wan_bw: float = 4e6
    wan_delay: float = 0.050
    tcp: TcpParams = field(default_factory=TcpParams)
    costs: Costs = field(default_factory=Costs)
    request: int = 350          #: GET request bytes
    header: int = 250           #: response header bytes
    tls_client_flights: tuple[int, int] = (150, 330)   #: ClientHello; CKE + CCS + Finished
    tls_server_flights: tuple[int, int] = (1600, 60)   #: ServerHello..Done; CCS + Finished
    tls_record_overhead: int = 45                      #: header + MAC + IV + padding / record
    tag_bytes: int = 370        #: Y_0 with an RSA-2048 signature and a short path
    block_size: int = 1024
    digest_size: int = 32


def sine_bytes(size: int, sc: Scenario) -> int:
    """Bytes of the ``Content-Encoding: sine`` body for a ``size``-byte document."""
    n = block_count(size, sc.block_size)
    return sc.tag_bytes + n * sc.block_size + max(n - 1, 0) * sc.digest_size


def _tls_bytes(n: int, sc: Scenario) -> int:
    return n + block_count(n, 16384) * sc.tls_record_overhead


class _Net:
    def __init__(self, env: simpy.Environment, sc: Scenario) -> None:
        self.env, self.sc = env, sc
        self.c_up = Link(env, LinkParams(sc.client_bw, sc.client_delay), "client-up")
        self.c_down = Link(env, LinkParams(sc.client_bw, sc.client_delay), "client-down")
        self.w_up = Link(env, LinkParams(sc.wan_bw, sc.wan_delay), "wan-up")
        self.w_down = Link(env, LinkParams(sc.wan_bw, sc.wan_delay), "wan-down")

    def direct(self) -> TcpConnection:
        return TcpConnection(self.env, (self.c_up, self.w_up), (self.w_down, self.c_down),
                             self.sc.tcp, "client-server")

    def to_proxy(self) -> TcpConnection:
        return TcpConnection(self.env, (self.c_up,), (self.c_down,), self.sc.tcp, "client-proxy")

    def proxy_to_server(self) -> TcpConnection:
        return TcpConnection(self.env, (self.w_up,), (self.w_down,), self.sc.tcp, "proxy-server")


def _fetch(env: simpy.Environment, net: _Net, protocol: str, size: int, warm: bool,
           tls_session: TcpConnection | None) -> ProcessGenerator:
    sc, costs = net.sc, net.sc.costs
    base, _, via = protocol.partition("-")
    proxied = via == "proxy"
    if base == "sineb":
        # AT_sign over the session's open TLS connection, straight to the origin.
        assert tls_session is not None
        yield tls_session.a.send(_tls_bytes(sc.request, sc))
        yield tls_session.b.send(_tls_bytes(sc.header + 65, sc))
    conn = net.to_proxy() if proxied else net.direct()
    yield conn.open()
    if base == "https":
        yield conn.a.send(sc.tls_client_flights[0])
        yield conn.b.send(sc.tls_server_flights[0])
        yield conn.a.send(sc.tls_client_flights[1])
        yield env.timeout(costs.tls_handshake)
        yield conn.b.send(sc.tls_server_flights[1])
        yield conn.a.send(_tls_bytes(sc.request, sc))
    else:
        yield conn.a.send(sc.request)
    body = sine_bytes(size, sc) if base.startswith("sine") else size
    if proxied and not warm:
        up = net.proxy_to_server()
        yield up.open()
        yield up.a.send(sc.request)
        yield up.b.send(sc.header + body)
    if base == "https":
        yield conn.b.send(_tls_bytes(sc.header + body, sc))
        yield env.timeout(costs.tls_per_byte * (sc.header + body))
        return
    yield conn.b.send(sc.header + body)
    if base.startswith("sine"):
        cpu = costs.hash_per_byte * body
        if base == "sine":
            cpu += costs.signature_verify
        yield env.timeout(cpu)


def fetch_latency(protocol: str, size: int, sc: Scenario | None = None, warm: bool = True
                  ) -> float:
    """Seconds from the first SYN until the client holds the verified ``size``-byte object."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}")
    sc = sc or Scenario()
    env = simpy.Environment()
    net = _Net(env, sc)
    session = net.direct() if protocol.startswith("sineb") else None
    done: list[float] = []

    def run() -> ProcessGenerator:
        start = env.now
        yield from _fetch(env, net, protocol, size, warm, session)
        done.append(env.now - start)

    env.process(run())
    env.run()
    return done[0]


def portal_latency(protocol: str, hosts: int = 22, size: int = 15_000,
                   sc: Scenario | None = None, warm: bool = True) -> float:
    """Seconds until all ``hosts`` objects of ``size`` bytes are loaded, one connection each,
    all in parallel and sharing the links (the paper's msn.com portal page)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}")
    sc = sc or Scenario()
    env = simpy.Environment()
    net = _Net(env, sc)
    finished: list[float] = []

    def one(i: int) -> ProcessGenerator:
        session = net.direct() if protocol.startswith("sineb") else None
        if session is not None:  # SINEB: one TLS session per host, opened before the page
            yield session.open()
        start = env.now
        yield from _fetch(env, net, protocol, size, warm, session)
        finished.append(env.now - start)

    for i in range(hosts):
        env.process(one(i))
    env.run()
    return max(finished)
