"""Latency of one request over the paper's testbed, simulated packet by packet (Figure 12).

Topology (§6.1): the client and the proxy share a 100 Mbit/s LAN; the server sits behind a
residential ADSL line (160 kbit/s upstream). Plain HTTP and HTTPS go from the client straight
to the server (the LAN, then the ADSL line); SSL splitting goes client → proxy over the LAN
and proxy → server over the ADSL line, with the proxy terminating both TCP connections.

Each request is the exact sequence of *flights* of its protocol, every flight a TCP transfer
on :class:`~netsim.tcp.TcpConnection` (slow start and all), byte counts from
:class:`~sslsplit.costmodel.WireParams`:

HTTP
    TCP open; GET; response header + body.
HTTPS (TLS 1.0, RSA key exchange, full handshake)
    TCP open; ClientHello; ServerHello..ServerHelloDone; ClientKeyExchange+CCS+Finished
    (the server spends ``rsa_seconds`` decrypting the premaster secret); CCS+Finished; GET;
    header and data records.
SSL splitting, cold cache
    the same handshake relayed by the proxy (which connects to the server as soon as the client
    has connected); the server answers the GET with stubs; for a file large
    enough to have cacheable records the proxy asks the server's miss handler for the missing
    payloads (one more round trip on the ADSL line) and receives them; it then sends the
    rebuilt records to the client. The proxy forwards a flight only once it has all of it
    (store and forward), which is what makes cold splitting slower for large files.

Requests run one at a time on an idle network, as in the paper (no congestion effects).

:mod:`sslsplit.model_driver` runs the real objects that produce these flights over the same
topology (:func:`sslsplit.model_driver.figure12_driver` puts both side by side);
:func:`uplink_bytes` gives the bytes this model puts on the server's line, for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy
from simpy.events import ProcessGenerator

from netsim.host import Host
from netsim.link import LAN, Link, LinkParams
from netsim.tcp import HalfConnection, TcpConnection, TcpParams

from .costmodel import WireParams
from .params import ADSL_DOWN, ADSL_UP

__all__ = ["AdslTestbed", "request_latency", "uplink_bytes", "LATENCY_PROTOCOLS"]

#: Protocols :func:`request_latency` simulates.
LATENCY_PROTOCOLS = ("http", "https", "split_cold")


@dataclass(frozen=True)
class AdslTestbed:
    """Everything the latency simulation depends on."""

    server_up: LinkParams = ADSL_UP
    server_down: LinkParams = ADSL_DOWN
    lan: LinkParams = LAN
    tcp: TcpParams = field(default_factory=TcpParams)
    wire: WireParams = field(default_factory=WireParams)
    client_hello: int = 100          #: bytes
    client_key_exchange: int = 200   #: ClientKeyExchange + CCS + Finished, bytes
    server_finished: int = 60        #: server CCS + Finished, bytes
    miss_request: int = 80           #: proxy's miss-handler request, bytes
    rsa_seconds: float = 0.015       #: server RSA-1024 decryption on the paper's 500 MHz K6
    proxy_seconds: float = 0.0       #: proxy processing per relayed flight


def _response_bytes(size: int, w: WireParams, tls: bool) -> int:
    if not tls:
        return w.http_header + size
    if size < w.header_split_bytes:
        return w.http_header + size + w.record_overhead
    rec = w.large_file_record if size > w.large_file_bytes else w.record_payload
    n = -(-size // rec)
    return w.http_header + w.record_overhead + size + n * w.record_overhead


def _stub_bytes(size: int, w: WireParams) -> tuple[int, int]:
    """(stub bytes on the connection, payload bytes via the miss handler) for a cold proxy."""
    if size < w.header_split_bytes:
        return w.stub_overhead + w.http_header + size, 0
    rec = w.large_file_record if size > w.large_file_bytes else w.record_payload
    n = -(-size // rec)
    return (1 + n) * w.stub_overhead + w.http_header, size + n * w.miss_overhead


def uplink_bytes(protocol: str, size: int, params: AdslTestbed | None = None) -> int:
    """TCP payload bytes the server sends on its ADSL line in :func:`request_latency`'s flights.

    The sum of the server's flights (handshake, response; for cold splitting the key-expose
    messages, the stubs and the miss handler's payloads) -- what the driver measures from the
    real objects in :func:`sslsplit.model_driver.figure12_driver`.
    """
    if protocol not in LATENCY_PROTOCOLS:
        raise ValueError(f"protocol must be one of {LATENCY_PROTOCOLS}, got {protocol!r}")
    p = params or AdslTestbed()
    w = p.wire
    if protocol == "http":
        return _response_bytes(size, w, False)
    if protocol == "https":
        return w.tls_handshake + _response_bytes(size, w, True)
    stubs, payload = _stub_bytes(size, w)
    return w.tls_handshake + 2 * w.key_expose + stubs + payload


def request_latency(protocol: str, size: int, params: AdslTestbed | None = None) -> float:
    """Seconds from the client's SYN to the last byte of the response body."""
    if protocol not in LATENCY_PROTOCOLS:
        raise ValueError(f"protocol must be one of {LATENCY_PROTOCOLS}, got {protocol!r}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    run = _Run(params or AdslTestbed())
    if protocol == "split_cold":
        run.env.process(run.split(size))
    else:
        run.env.process(run.direct(size, tls=protocol == "https"))
    run.env.run()
    return run.done_at


class _Run:
    """One download on the §6.1 topology: the LAN, the server's ADSL line, the server host.

    :meth:`direct` (HTTP, HTTPS: client to server) and :meth:`split` (client to proxy on the
    LAN, proxy to server over ADSL, plus the miss handler's connection) are SimPy processes
    that send each flight's byte count in turn and record the end in :attr:`done_at`.
    """

    def __init__(self, p: AdslTestbed) -> None:
        self.p = p
        self.env = env = simpy.Environment()
        self.lan_cp = Link(env, p.lan, "lan:c->p")
        self.lan_pc = Link(env, p.lan, "lan:p->c")
        self.adsl_down = Link(env, p.server_down, "adsl:->s")
        self.adsl_up = Link(env, p.server_up, "adsl:s->")
        self.server = Host(env, "server")
        self.done_at = float("nan")

    def direct(self, size: int, tls: bool) -> ProcessGenerator:
        p, w = self.p, self.p.wire
        conn = TcpConnection(self.env, (self.lan_cp, self.adsl_down), (self.adsl_up, self.lan_pc),
                             p.tcp, "c-s")
        yield conn.open()
        if tls:
            yield conn.a.send(p.client_hello)
            yield conn.b.send(w.tls_handshake - p.server_finished)
            yield conn.a.send(p.client_key_exchange)
            yield self.server.compute(p.rsa_seconds, "rsa")
            yield conn.b.send(p.server_finished)
            yield conn.a.send(w.http_request + w.record_overhead)
        else:
            yield conn.a.send(w.http_request)
        yield conn.b.send(_response_bytes(size, w, tls))
        self.done_at = self.env.now

    def _relay(self, first: HalfConnection, second: HalfConnection, nbytes: int
               ) -> ProcessGenerator:
        """One flight through the proxy: in on ``first``, the proxy's time, out on ``second``."""
        yield first.send(nbytes)
        if self.p.proxy_seconds:
            yield self.env.timeout(self.p.proxy_seconds)
        yield second.send(nbytes)

    def split(self, size: int) -> ProcessGenerator:
        p, w, env, relay = self.p, self.p.wire, self.env, self._relay
        cp = TcpConnection(env, (self.lan_cp,), (self.lan_pc,), p.tcp, "c-p")
        ps = TcpConnection(env, (self.adsl_down,), (self.adsl_up,), p.tcp, "p-s")
        miss = TcpConnection(env, (self.adsl_down,), (self.adsl_up,), p.tcp, "p-s:miss")
        yield cp.open()
        yield ps.open()  # the proxy connects to the server as soon as the client connects
        yield from relay(cp.a, ps.a, p.client_hello)
        yield from relay(ps.b, cp.b, w.tls_handshake - p.server_finished + w.key_expose)
        yield from relay(cp.a, ps.a, p.client_key_exchange)
        yield self.server.compute(p.rsa_seconds, "rsa")
        yield from relay(ps.b, cp.b, p.server_finished + w.key_expose)
        yield from relay(cp.a, ps.a, w.http_request + w.record_overhead)
        stubs, payload = _stub_bytes(size, w)
        yield ps.b.send(stubs)
        if payload:
            yield miss.open()
            yield miss.a.send(p.miss_request)
            yield miss.b.send(payload)
        yield cp.b.send(_response_bytes(size, w, True))
        self.done_at = env.now
