"""Many clients at once: a saturating handshake load and a bulk-transfer load on one cluster.

The failover tests drive one connection; the paper's performance section (5.8) measures a
cluster under load.  This module offers many real :class:`tls12.ClientConnection` clients
(:class:`~sslacc_sim.TlsClient`) to an ``n``-node :class:`~sslacc_sim.Cluster` running the
:class:`~sslacc_sim.Relay`, and counts what completes per simulated second.

**Handshake load** (:func:`handshake_load`, Figures 28/29).  Clients arrive as a Poisson
process at ``overload`` times the cluster's card capacity (``n * rsa_ops_per_s``), each with a
fresh source port, so their 4-tuples hash into buckets spread over every node.  Each runs a
full RSA handshake and fetches a trivial page (the paper's "pure handshake load").  A load
generator has a finite number of connections in flight: an arrival that finds
``max_outstanding`` connections open is refused (counted, not queued), so the offered rate
stays above capacity without an unbounded backlog.  The result is the rate of fetches
completed byte-identically, timed over a fixed number of completions after a warm-up of a
fixed number (so a slow cluster is measured as long as a fast one needs, in completions).

**Multicast updates** (``multicast=True``, the default here; the model's own
:class:`~sslacc_sim.cluster.Lan` sends each update to the mirror only).  In AlchemyOS
"the state of each SSL connection is shared across the entire cluster" and cluster messages
may be multicast (section 3); the paper's explanation of the plateau -- "an increasing amount
of CPU time is spent handling messages from other nodes", "update ACKs" taking more of the
wire as nodes are added -- needs every member to receive and acknowledge every update.
:class:`MulticastLan` adds exactly that on top of the model: an update frame (a message whose
payload is the update's bytes) goes on the wire once, as before; every live node other than
the sender and the mirror also takes the receive interrupt and parses it
(``interrupt_cpu`` plus ``message_cpu(size)`` per update in it, as the mirror in
:mod:`sslacc_sim.updates`) and answers with an acknowledgement of the mirror's size on the
wire, whose arrival costs the sender ``interrupt_cpu``.  An aggregated message
(``ClusterParams.aggregate``) is one frame, one interrupt and one acknowledgement per member.
So per unaggregated update the cluster spends ``(n - 2) * (2 * interrupt_cpu +
message_cpu(size))`` more CPU seconds and ``n - 2`` more acknowledgements cross the wire: the
cost that grows with ``n``.  With ``multicast=False`` the
model is used as it is (unicast to the mirror).

**Bulk load** (:func:`bulk_load`, section 5.8's throughput paragraph).  ``clients`` clients
each download ``body`` bytes; client data and cluster messages cross the *same* shared wire
(the cluster's LAN link is on every client route, both directions: one half-duplex 100 Mbit/s
medium as on the paper's units), and the result is the response goodput in bit/s.

Everything here is modelled: CPU and card costs are :class:`~sslacc_sim.ClusterParams`
fields (see its docstring for which are measured and which are named values), times are
simulated seconds, and only the TLS bytes are real.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy
from simpy.events import ProcessGenerator

from netsim.link import Duplex, LinkParams

from . import Cluster, ClusterParams, FourTuple, Lan, Node, Origin, Relay, TlsClient
from .errors import SslaccError
from .updates import ACK_BASE, ACK_PER_UPDATE, decode_batch

__all__ = ["LoadError", "LoadResult", "MulticastLan", "bulk_load", "handshake_load",
           "server_config_factory", "client_config"]

#: The client network of the handshake load: fast enough never to be the bottleneck.
CLIENT_NET = LinkParams(1e9, 100e-6)


class LoadError(SslaccError, ValueError):
    """A load was asked for with impossible settings (no nodes, no clients, no time)."""


class MulticastLan(Lan):
    """The model's :class:`~sslacc_sim.cluster.Lan` with updates multicast to every member.

    Counters: ``overheard`` (update receptions by members other than the mirror) and
    ``extra_acks`` (their acknowledgements, which are also counted in ``messages`` and
    ``bytes`` because they cross the wire).  See the module docstring.
    """

    def __init__(self, env: simpy.Environment, params: ClusterParams, cluster: Cluster) -> None:
        super().__init__(env, params)
        self.cluster = cluster
        self.overheard = 0
        self.extra_acks = 0

    @staticmethod
    def is_update(payload: Any) -> bool:
        """Whether a message carries update bytes (keepalives carry a node id, ACKs nothing).

        Only the relay's updates travel on this LAN as bytes in these loads; session
        replication (also bytes) already goes to every node and is not used here."""
        return isinstance(payload, bytes | bytearray)

    def send(self, src: Node, dst: Node, payload_size: int,
             on_arrive: Callable[[Any], object], payload: Any = None) -> None:
        if not self.is_update(payload):
            super().send(src, dst, payload_size, on_arrive, payload)
            return
        sizes = self._update_sizes(payload)

        def arrive(data: Any) -> None:
            on_arrive(data)
            for other in self.cluster.nodes:
                if other.alive and other is not src and other is not dst:
                    self.overheard += 1
                    other.spawn(self._overhear(other, src, sizes))

        super().send(src, dst, payload_size, arrive, payload)

    def _update_sizes(self, payload: bytes) -> list[int]:
        """Sizes of the updates in one message (several when aggregated)."""
        if getattr(self.params, "aggregate", False):
            return [len(m) for m in decode_batch(bytes(payload))]
        return [len(payload)]

    def _overhear(self, node: Node, sender: Node, sizes: list[int]) -> ProcessGenerator:
        p = self.params
        try:
            with node.cpu.request() as req:         # one interrupt, then parse each update
                yield req
                yield self.env.timeout(p.interrupt_cpu + sum(p.message_cpu(n) for n in sizes))
            self.extra_acks += 1
            super().send(node, sender, ACK_BASE + ACK_PER_UPDATE * len(sizes),
                         self._ack_arrived, sender)
        except simpy.Interrupt:
            return

    def _ack_arrived(self, sender: Node) -> None:
        sender.spawn(self._ack_interrupt(sender))

    def _ack_interrupt(self, node: Node) -> ProcessGenerator:
        try:
            with node.cpu.request() as req:
                yield req
                yield self.env.timeout(self.params.interrupt_cpu)
        except simpy.Interrupt:
            return


def make_cluster(env: simpy.Environment, n: int, params: ClusterParams,
                 multicast: bool) -> Cluster:
    """A cluster of ``n`` nodes; with ``multicast`` its LAN is a :class:`MulticastLan`.

    The LAN is replaced before anything is sent on it (nodes look it up on every send).
    """
    cluster = Cluster(env, n, params)
    if multicast:
        cluster.lan = MulticastLan(env, params, cluster)
    return cluster


def server_config_factory(seed: int) -> Callable[[int, int], Any]:
    """``server_config(node, conn)`` for the relay: the test credentials, AES-128-CBC-SHA."""
    from tls12 import CipherSuite, ServerConfig
    from tls12.testing import credentials, seeded_rng

    cred = credentials()
    suites = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)

    def server_config(node: int, conn: int) -> ServerConfig:
        return ServerConfig(credentials=cred, cipher_suites=suites,
                            rng=seeded_rng(f"load{seed}/node{node}/conn{conn}"))

    return server_config


def client_config(seed: int, i: int) -> Any:
    """The ``i``-th client's configuration (its own seeded RNG, AES-128-CBC-SHA)."""
    from tls12 import CipherSuite, ClientConfig
    from tls12.testing import seeded_rng

    return ClientConfig(rng=seeded_rng(f"load{seed}/client{i}"),
                        cipher_suites=(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,))


@dataclass
class LoadResult:
    """What one load run measured (simulated seconds, counts, bytes)."""

    nodes: int
    completed: int                 #: fetches finished byte-identically inside the window
    window: float                  #: seconds of the measuring window
    offered: int                   #: arrivals in the whole run
    refused: int                   #: arrivals refused at the connection limit
    errors: int                    #: clients that failed (TLS error, reset, timeout)
    lan_messages: int              #: cluster messages on the wire in the whole run
    lan_bytes: int                 #: their bytes (headers included)
    overheard: int                 #: multicast receptions by non-mirrors
    started: int                   #: connections opened
    response_bytes: int = 0        #: response bytes delivered inside the window (bulk)
    #: other counts: ``updates`` (cluster updates the relay sent, all connections)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Completed fetches per simulated second."""
        return self.completed / self.window


def _four_tuple(i: int) -> FourTuple:
    """Client ``i``'s 4-tuple: addresses and ports vary, so buckets spread over the nodes."""
    return FourTuple(f"10.{1 + (i >> 16) % 250}.{(i >> 8) & 255}.{i & 255}",
                     1024 + (i * 7919) % 60000, "198.51.100.1", 443)


def _handshake_limits(n: int, target: int, overload: float, horizon: float,
                      max_outstanding: int | None, skip: int | None) -> tuple[int, int]:
    """The connection limit and the number of warm-up completions (:func:`handshake_load`)."""
    if n < 1 or target < 1 or overload <= 0 or horizon <= 0:
        raise LoadError("need n >= 1, target >= 1, overload > 0 and horizon > 0")
    limit = max_outstanding if max_outstanding is not None else 8 * n
    if limit < 1:
        raise LoadError("max_outstanding must be at least 1")
    first = skip if skip is not None else limit + 20
    if first < 0:
        raise LoadError("skip must be >= 0")
    return limit, first


class _HandshakeArrivals:
    """Poisson arrivals of handshake clients at ``rate`` per second, at most ``limit`` open.

    Each completion whose response is byte-identical is timed in ``finished``; ``stop``
    fires at the ``stop_after``-th.  ``counts`` holds arrivals offered, refused at the limit
    and completed with a wrong response.
    """

    def __init__(self, env: simpy.Environment, relay: Relay, origin: Origin, rate: float,
                 limit: int, stop_after: int, seed: int, timeout: float) -> None:
        self.env, self.relay, self.origin = env, relay, origin
        self.rate, self.limit, self.stop_after = rate, limit, stop_after
        self.seed, self.timeout = seed, timeout
        self.net = Duplex(env, CLIENT_NET, name="clients")
        self.rng = random.Random(seed)
        self.clients: list[TlsClient] = []
        self.finished: list[float] = []
        self.counts = {"offered": 0, "refused": 0, "bad": 0}
        self.stop = env.event()

    def _watch(self, client: TlsClient, deliver: Callable[[bytes], object]
               ) -> Callable[[bytes], None]:
        def on_data(chunk: bytes) -> None:
            was_open = client.done_at is None and client.error is None
            deliver(chunk)
            if was_open and client.done_at is not None:
                if bytes(client.response) != self.origin.response:
                    self.counts["bad"] += 1
                    return
                self.finished.append(self.env.now)
                if len(self.finished) == self.stop_after and not self.stop.triggered:
                    self.stop.succeed()
        return on_data

    def run(self) -> ProcessGenerator:
        """The arrival process (start it with ``env.process``)."""
        i = 0
        while True:
            yield self.env.timeout(self.rng.expovariate(self.rate))
            self.counts["offered"] += 1
            # finished and failed clients no longer count against the limit
            open_now = sum(1 for c in self.clients[-4 * self.limit:]
                           if c.done_at is None and c.error is None)
            if open_now >= self.limit:
                self.counts["refused"] += 1
                continue
            conn = self.relay.connect(_four_tuple(i), (self.net.ab,), (self.net.ba,))
            client = TlsClient(self.env, conn.tcp, client_config(self.seed, i), timeout=self.timeout)
            deliver = conn.tcp.b.on_data
            assert deliver is not None  # TlsClient's constructor set it
            conn.tcp.b.on_data = self._watch(client, deliver)
            self.clients.append(client)
            i += 1


def handshake_load(n: int, params: ClusterParams, *, multicast: bool = True,
                   overload: float = 1.5, max_outstanding: int | None = None,
                   target: int = 100, skip: int | None = None, seed: int = 0,
                   timeout: float = 5.0, horizon: float = 60.0) -> LoadResult:
    """Saturate ``n`` nodes with full handshakes plus a trivial fetch (module docstring).

    ``max_outstanding`` (default ``8 * n``) bounds the connections in flight.  The first
    ``skip`` completions (default ``max_outstanding + 20``: the pool has turned over once and
    the queues have filled) are the warm-up; the rate is ``target`` completions divided by the
    simulated time they took after it.  The run stops there, or at ``horizon`` simulated
    seconds if the cluster is that slow (then the rate counts what completed).
    """
    limit, first = _handshake_limits(n, target, overload, horizon, max_outstanding, skip)
    env = simpy.Environment()
    cluster = make_cluster(env, n, params, multicast)
    origin = Origin(b"ok\n")
    relay = Relay(env, cluster, origin, server_config_factory(seed), seed=seed)
    capacity = n * params.rsa_ops_per_s
    load = _HandshakeArrivals(env, relay, origin, overload * capacity, limit, first + target,
                              seed, timeout)
    env.process(load.run())
    env.run(until=load.stop | env.timeout(horizon))
    finished = load.finished
    start = finished[first - 1] if 0 < first <= len(finished) else 0.0
    got = max(0, len(finished) - first)
    window = (finished[-1] if got == target else env.now) - start
    lan = cluster.lan
    return LoadResult(
        nodes=n, completed=got, window=max(window, 1e-12), offered=load.counts["offered"],
        refused=load.counts["refused"],
        errors=sum(1 for c in load.clients if c.error is not None) + load.counts["bad"],
        lan_messages=lan.messages, lan_bytes=lan.bytes,
        overheard=getattr(lan, "overheard", 0), started=len(load.clients),
        extra={"updates": float(sum(len(c.checkpoints) for c in relay.conns)),
               "capacity": capacity, "end": env.now})


def bulk_load(n: int, params: ClusterParams, *, clients: int = 4, body: int = 1 << 20,
              multicast: bool = True, duration: float = 0.5, warmup: float = 0.1,
              seed: int = 0, access: LinkParams | None = None) -> LoadResult:
    """``clients`` clients download ``body`` bytes each, over the cluster's shared wire.

    Every client route crosses the cluster's LAN link in both directions, so client data,
    updates, their acknowledgements and keepalives share one medium of
    ``params.lan_bandwidth`` bit/s.  A client that finishes starts the next download at once
    (closed loop).  ``response_bytes`` counts decrypted response bytes that reached clients
    between ``warmup`` and ``warmup + duration``.
    """
    if n < 1 or clients < 1 or body < 1 or duration <= 0 or warmup < 0:
        raise LoadError("need n, clients, body and duration positive, warmup >= 0")
    env = simpy.Environment()
    cluster = make_cluster(env, n, params, multicast)
    origin = Origin(bytes(range(256)) * (body // 256) + bytes(body % 256))
    relay = Relay(env, cluster, origin, server_config_factory(seed), seed=seed)
    access_link = access if access is not None else LinkParams(1e9, 100e-6)
    end = warmup + duration
    got = {"bytes": 0, "completed": 0, "errors": 0, "started": 0}

    def one_client(k: int) -> ProcessGenerator:
        wire = Duplex(env, access_link, name=f"client{k}", seed=seed + 2 * k)
        j = 0
        while True:
            i = k + clients * j
            j += 1
            lan_link = cluster.lan.link
            conn = relay.connect(_four_tuple(i), (wire.ab, lan_link), (lan_link, wire.ba))
            client = TlsClient(env, conn.tcp, client_config(seed, i), timeout=30.0)
            got["started"] += 1
            deliver = conn.tcp.b.on_data
            seen = [0]

            def counted(chunk: bytes, client: TlsClient = client, deliver: Any = deliver,
                        seen: list[int] = seen) -> None:
                deliver(chunk)
                if warmup <= env.now < end:
                    got["bytes"] += len(client.response) - seen[0]
                seen[0] = len(client.response)

            conn.tcp.b.on_data = counted
            while client.done_at is None and client.error is None:
                yield env.timeout(0.005)
            if client.error is not None:
                got["errors"] += 1
            elif warmup <= env.now < end:
                got["completed"] += 1

    for k in range(clients):
        env.process(one_client(k))
    env.run(until=end)
    lan = cluster.lan
    return LoadResult(
        nodes=n, completed=got["completed"], window=duration, offered=got["started"],
        refused=0, errors=got["errors"], lan_messages=lan.messages, lan_bytes=lan.bytes,
        overheard=getattr(lan, "overheard", 0), started=got["started"],
        response_bytes=got["bytes"])
