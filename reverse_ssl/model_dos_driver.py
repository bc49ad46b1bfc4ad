"""The handshake-flood model of :mod:`reverse_ssl.model_dos`, rebuilt on :mod:`netsim.drive`.

:mod:`reverse_ssl.model_dos` models the server's CPU as a queue of jobs whose sizes are numbers.
This module keeps its scenario, parameters (:class:`~reverse_ssl.model_dos.DoSParams`) and
summary metrics, but the legitimate handshakes are *connections*: the bytes of real Reverse SSL
handshakes move over simulated TCP (:mod:`netsim.tcp`, :data:`TCP`) on a shared 1 Gbit/s
LAN (:data:`NET`), and the server's CPU is charged per operation for the messages the core
reads in those bytes (:class:`ServerCpu`, through :class:`tls12.trace.WireTrace`: a replayed
connection has no connection object to ask), so the byte counts and the order of the work
come from the real code.

**The hybrid (why, and what exactly runs).**  A real puzzle handshake makes the client solve
a real puzzle (about 0.1 s of Python per 1024-bit key) and the server sign with a real
one-time key; thousands of them per simulated second would take hours.  So each mode is run
for real first and then replayed:

1. :func:`record_scripts` runs real :class:`~reverse_ssl.client_connection.ReverseClientConnection`
   / :class:`~reverse_ssl.server_connection.ReverseServerConnection` pairs through
   :class:`netsim.drive.Driver` (original RSA handshake; Reverse SSL with a puzzle) and
   records, per side, every flight the object wrote and how many bytes it had received
   when it wrote it (a :class:`Script`); it also feeds a real server a bogus PuzzleReply
   to record the refusal (the alert) an attacker gets;
2. :func:`run_driver_dos` replays those scripts with :class:`ReplayEndpoint`, a sans-IO
   object that writes the recorded bytes when the recorded number of bytes has arrived.
   Every simulated legitimate connection is a :class:`~netsim.drive.Driver` over its own TCP
   connection; the CPU models read the replayed bytes exactly as they read the real ones,
   so a replayed connection and a real one cost the server the same and put the same
   bytes on the wire (``real=True`` runs real objects instead, for small checks).

Attackers stay abstract, as the brief of the model allows: they do not open TCP
connections; each attack request charges the server the operations the CPU model finds in
the *real* recorded bytes of an attacker's messages (a real ClientHello; a real
ClientKeyExchange flight without puzzles; with puzzles a real, recorded solution -- at most
``attacker_cores / solve_time`` per second, the old model's budget -- or the real bogus reply).

**The CPU charges** (:class:`HandshakeCosts`, seconds on the reference machine, calibrated
from ``measured_costs.json`` as the old model is; :meth:`HandshakeCosts.from_measured`):

======================  ===================================================================
server receives         charge
======================  ===================================================================
ClientHello             ``answer_hello``: parse it, build ServerHello (+ PuzzleRequest) ...
ClientKeyExchange       ``rsa_key_exchange``: the RSA decryption and the rest of the
                        standard handshake (``cost_original - cost_issue``)
PuzzleReply, accepted   ``key_transport``: Figure 3's checks, the premaster encryption, the
                        one-time signature, the rest (``cost_reverse``)
PuzzleReply, refused    ``reject_reply`` (the server answered with an alert; ``cost_reject``)
Certificate (reverse)   ``key_transport`` (client authentication: no puzzle checks)
======================  ===================================================================

The client is charged ``solve`` (``solve_time``) on its own host when a PuzzleRequest
arrives.  Totals per handshake equal the old model's: ``cost_original`` without puzzles,
``cost_issue + cost_reverse`` with.

**Admission** is the old model's: a job arriving at a full backlog, or getting a core more
than ``timeout`` seconds after its connection began, drops the connection (the server resets
it; it costs nothing more).  What differs, by construction: a standard handshake is two
server jobs a round trip apart (the hello, then the key exchange), not one, and each waits in
the queue; legitimate connections add TCP set-up and flight times (tens of microseconds on
the LAN).  :func:`reverse_ssl.experiments.dos_driver_comparison` puts both models side by side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, cast

import simpy
from simpy.events import ProcessGenerator

from netsim.drive import Driver, SansIO, Side
from netsim.link import Duplex, LinkParams
from netsim.tcp import TcpConnection, TcpParams
from tls12.certs import Credentials
from tls12.config import ClientConfig, ServerConfig
from tls12.events import ConnectionClosed, HandshakeComplete
from tls12.messages import HandshakeType
from tls12.record import ContentType
from tls12.testing import seeded_rng
from tls12.trace import WireTrace

from .aio.pool import SignaturePool
from .client_connection import ReverseClientConnection
from .config import RSA_SUITES, ReverseClientConfig, ReverseServerConfig
from .errors import PuzzleRefused
from .messages import Mode, ReverseHandshakeType
from .model_dos import DoSParams
from .onoff import make_offline_token
from .puzzle import PuzzleParams
from .server_connection import ReverseServerConnection

__all__ = ["HandshakeCosts", "ServerCpu", "ClientCpu", "Script", "Scripts", "ReplayEndpoint",
           "ReplayDone", "Endpoints", "MODES", "record_scripts", "run_driver_dos",
           "NET", "TCP"]

#: The wire between the clients and the server: 1 Gbit/s, 50 µs one way, shared by all.
NET = LinkParams(bandwidth=1e9, delay=50e-6)
#: TCP on that LAN: jumbo frames (9000-byte MTU, MSS 8948), so that a puzzle handshake's
#: 26 KiB server flight is 3 segments rather than 19 (the simulation's cost is per segment;
#: the bytes are the same and the flight time differs by microseconds at 1 Gbit/s).
TCP = TcpParams(mss=8948)


@dataclass(frozen=True)
class HandshakeCosts:
    """CPU seconds per operation (see the module docstring's table)."""

    answer_hello: float
    rsa_key_exchange: float
    key_transport: float
    reject_reply: float
    solve: float
    attack_request: float

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value >= 0.0:
                raise ValueError(f"{name} must be >= 0 s, got {value}")

    @classmethod
    def from_params(cls, p: DoSParams) -> HandshakeCosts:
        """The same service times as the old model's :class:`~reverse_ssl.model_dos.DoSParams`."""
        if p.cost_original < p.cost_issue:
            raise ValueError("cost_original must include answering the ClientHello "
                             f"(cost_issue = {p.cost_issue} s > cost_original = {p.cost_original} s)")
        return cls(p.cost_issue, p.cost_original - p.cost_issue, p.cost_reverse, p.cost_reject,
                   p.solve_time, p.attack_request_cost)

    @classmethod
    def from_measured(cls, costs: dict[str, float]) -> HandshakeCosts:
        """From the dict :func:`reverse_ssl.experiments.measure_costs` returns (seconds)."""
        # the keys name DoSParams' float cost fields; the dataclass rejects any other name
        return cls.from_params(DoSParams(**cast("dict[str, Any]", costs)))


class _Messages:
    """One direction of a TLS stream as the core reads it without keys
    (:class:`tls12.trace.WireTrace`): the handshake message types in clear, and whether an
    alert record went by.  The bytes it cannot read are protected records, which this model
    does not charge."""

    def __init__(self) -> None:
        self._wire = WireTrace()

    def feed(self, data: bytes) -> tuple[list[int], bool]:
        events = self._wire.feed(data)
        types = [e.data["type"] for e in events
                 if e.category == "handshake" and e.data["type"] is not None]
        alert = any(e.category == "record" and e.data["content_type"] == ContentType.ALERT
                    for e in events)
        return types, alert


class ServerCpu:
    """The server's CPU model (a :class:`netsim.cpu.CpuModel`): charges per received message."""

    def __init__(self, costs: HandshakeCosts) -> None:
        self.costs = costs
        self._in, self._out = _Messages(), _Messages()

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        c = self.costs
        types, _ = self._in.feed(received)
        _, refused = self._out.feed(sent)
        ops: list[tuple[str, float]] = []
        for t in types:
            if t == HandshakeType.CLIENT_HELLO:
                ops.append(("answer_hello", c.answer_hello))
            elif t == HandshakeType.CLIENT_KEY_EXCHANGE:
                ops.append(("rsa_key_exchange", c.rsa_key_exchange))
            elif t == ReverseHandshakeType.PUZZLE_REPLY:
                ops.append(("reject_reply", c.reject_reply) if refused
                           else ("key_transport", c.key_transport))
            elif t == HandshakeType.CERTIFICATE:
                ops.append(("key_transport", c.key_transport))
        return ops


class ClientCpu:
    """The client's CPU model: ``solve`` when a PuzzleRequest arrives, nothing else."""

    def __init__(self, costs: HandshakeCosts) -> None:
        self.costs = costs
        self._in = _Messages()

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        types, _ = self._in.feed(received)
        return [("solve", self.costs.solve) for t in types
                if t == ReverseHandshakeType.PUZZLE_REQUEST]


# -- recording and replaying ------------------------------------------------------------------
@dataclass(frozen=True)
class Script:
    """One side of a recorded connection: ``(bytes received so far, bytes written)`` per flight."""

    flights: tuple[tuple[int, bytes], ...]
    expects: int
    """Bytes this side received in the whole handshake (the peer's flights)."""

    @property
    def sent(self) -> int:
        return sum(len(out) for _, out in self.flights)


@dataclass(frozen=True)
class Scripts:
    """What :func:`record_scripts` learned from real handshakes, per mode."""

    client: dict[str, Script]
    server: dict[str, Script]
    attack_hello: dict[str, bytes]
    """The real ClientHello an attacker sends, per mode."""
    attack_follow_up: dict[str, bytes]
    """Without puzzles: the real ClientKeyExchange flight; with: the real PuzzleReply."""
    bogus_reply: bytes
    """A PuzzleReply the real server refused."""
    bogus_answer: bytes
    """What the real server sent back to it (the alert)."""
    server_answer: dict[str, bytes] = field(default_factory=dict)
    """What the real server answered to the attacker's follow-up, per mode."""


@dataclass(frozen=True, slots=True)
class ReplayDone:
    """A :class:`ReplayEndpoint` wrote its last flight and received all it expected."""


class ReplayEndpoint:
    """A sans-IO endpoint that replays a :class:`Script`: same bytes, same moments.

    It writes flight *i* once it has received at least ``flights[i][0]`` bytes.  Like a real
    TLS object it returns its end-of-handshake event (:class:`ReplayDone`) in the step in
    which the last expected byte arrives -- the step whose answer, if any, is its last
    flight -- and a :class:`~tls12.events.ConnectionClosed` at end of stream
    (``receive_data(b"")``).
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.received = 0
        self._next = 0
        self._done = False

    @property
    def handshake_complete(self) -> bool:
        """Every expected byte arrived and every flight was written."""
        return self._done and self._next == len(self.script.flights)

    def receive_data(self, data: bytes) -> list[Any]:
        if not data:
            return [ConnectionClosed(clean=False)]
        self.received += len(data)
        if not self._done and self.received >= self.script.expects:
            self._done = True
            return [ReplayDone()]
        return []

    def data_to_send(self) -> bytes:
        out = bytearray()
        flights = self.script.flights
        while self._next < len(flights) and flights[self._next][0] <= self.received:
            out += flights[self._next][1]
            self._next += 1
        return bytes(out)


class _Recorder:
    """Wraps a real endpoint; keeps each flight it writes with the bytes it had received."""

    def __init__(self, obj: SansIO) -> None:
        self.obj = obj
        self.received = 0
        self.flights: list[tuple[int, bytes]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.obj, name)

    def receive_data(self, data: bytes) -> list[Any]:
        self.received += len(data)
        return self.obj.receive_data(data)

    def data_to_send(self) -> bytes:
        out = self.obj.data_to_send()
        if out:
            self.flights.append((self.received, out))
        return out

    def script(self) -> Script:
        return Script(tuple(self.flights), self.received)


MODES = {"original": (), "puzzle": (Mode.PUZZLE,)}
"""Mode name -> the Reverse SSL modes the client offers."""


@dataclass(frozen=True)
class Endpoints:
    """Makes real client / server objects for a mode (configuration of the recorded runs)."""

    server_credentials: Credentials
    puzzle: PuzzleParams = PuzzleParams()
    pool_size: int = 64
    """Offline-signed one-time keys per :meth:`server_config` (one per handshake; an empty
    pool makes the server sign with plain RSA, which :class:`ServerCpu` does not charge)."""
    seed: int = 1

    def server_config(self) -> ReverseServerConfig:
        creds = self.server_credentials
        pool = SignaturePool(self.pool_size)
        rng = seeded_rng(b"pool%d" % self.seed)
        key = creds.private_key
        assert key is not None  # generated credentials hold their key
        pool.fill(lambda: make_offline_token(key, rng))
        return ReverseServerConfig(ServerConfig(credentials=creds, cipher_suites=RSA_SUITES,
                                                rng=seeded_rng(b"server%d" % self.seed)),
                                   modes=(Mode.PUZZLE,), pool=pool, puzzle=self.puzzle)

    def client(self, mode: str, n: int = 0) -> ReverseClientConnection:
        return ReverseClientConnection(ReverseClientConfig(
            ClientConfig(server_name="localhost", cipher_suites=RSA_SUITES,
                         rng=seeded_rng(b"client%d/%d" % (self.seed, n))), modes=MODES[mode]))


def _end_app(side: Side, event: Any) -> None:
    """Application of both sides: FIN once the handshake is done or the peer closed."""
    if isinstance(event, HandshakeComplete | ReplayDone | ConnectionClosed):
        side.shutdown()


def record_scripts(endpoints: Endpoints, costs: HandshakeCosts) -> Scripts:
    """Run one real handshake per mode through :class:`~netsim.drive.Driver`; keep the bytes.

    Also records an attacker's messages: the real ClientHello and follow-up of each mode, and
    a bogus PuzzleReply (the recorded reply with its modulus outside the window) that a real
    server refuses, with the alert it answers.
    """
    clients, servers, hellos, follow, answers = {}, {}, {}, {}, {}
    cfg = endpoints.server_config()
    for mode in MODES:
        env = simpy.Environment()
        wire = Duplex(env, NET)
        client = _Recorder(endpoints.client(mode))
        server_conn = ReverseServerConnection(cfg)
        server = _Recorder(server_conn)
        d = Driver(env, TcpConnection(env, (wire.ab,), (wire.ba,), TCP), client, server,
                   client_app=_end_app, server_app=_end_app, client_cpu=ClientCpu(costs),
                   server_cpu=ServerCpu(costs))
        env.run()
        if not server_conn.handshake_complete or d.client.error or d.server.error:
            raise RuntimeError(f"recorded {mode} handshake failed: "
                               f"{d.client.error or d.server.error}")
        clients[mode], servers[mode] = client.script(), server.script()
        hellos[mode] = client.flights[0][1]
        follow[mode] = client.flights[1][1]
        answers[mode] = servers[mode].flights[1][1]
    reply = bytearray(follow["puzzle"])
    reply[12] ^= 0x80                        # the modulus' top byte: outside the window
    bogus = bytes(reply)
    victim = ReverseServerConnection(cfg)
    victim.receive_data(hellos["puzzle"])
    victim.data_to_send()
    try:
        victim.receive_data(bogus)
    except PuzzleRefused:          # Figure 3's range check: ModulusOutOfRange, an alert queued
        pass
    else:
        raise RuntimeError("the server accepted the bogus puzzle reply")
    return Scripts(clients, servers, hellos, follow, bogus, victim.data_to_send(), answers)


# -- the server's CPU with the old model's admission rules -------------------------------------
class _ServerQueue:
    """The server's cores (FIFO) with a backlog and a per-connection handshake timeout."""

    def __init__(self, env: simpy.Environment, p: DoSParams) -> None:
        self.env = env
        self.p = p
        self.cpu = simpy.Resource(env, capacity=p.server_cores)
        self.busy = 0.0

    def run(self, seconds: float, started: float) -> ProcessGenerator:
        """Process: one job of a connection that began at ``started``; value True if it ran."""
        if len(self.cpu.queue) >= self.p.backlog:
            return False
        with self.cpu.request() as req:
            yield req
            if self.env.now - started > self.p.timeout:
                return False
            yield self.env.timeout(seconds)
        self.busy += seconds
        return True


class _Slot:
    """What one legitimate connection's server side sees as its host (the driver's ``Host``
    role): jobs go to the shared :class:`_ServerQueue`; a dropped job resets the connection."""

    def __init__(self, queue: _ServerQueue, started: float) -> None:
        self.queue = queue
        self.started = started
        self.dropped = False
        self.side: Side | None = None
        self.last_job_done: float | None = None

    def compute(self, seconds: float, label: str = "job") -> simpy.Process:
        return self.queue.env.process(self._job(seconds))

    def _job(self, seconds: float) -> ProcessGenerator:
        ok = yield self.queue.env.process(self.queue.run(seconds, self.started))
        if ok:
            self.last_job_done = self.queue.env.now
        elif not self.dropped:
            self.dropped = True
            assert self.side is not None
            self.side.abort()


def _attack_jobs(scripts: Scripts, costs: HandshakeCosts) -> dict[str, list[float]]:
    """Server CPU seconds per queue pass of one abstract attack request, by kind.

    The CPU model reads the real recorded bytes.  An attacker that needs no answer pipelines
    its messages (one write, so one server step and one job): without puzzles the ClientHello
    and the recorded ClientKeyExchange flight (``"plain"``); with puzzles the ClientHello and
    a bogus PuzzleReply (``"bogus"``).  A valid solution needs the puzzle first: two jobs, a
    round trip apart (``"solved"``).
    """
    def charge(received: bytes, sent: bytes) -> float:
        return sum(s for _, s in ServerCpu(costs).charge(received, sent))

    def pipelined(mode: str, follow_up: bytes, answer: bytes) -> list[float]:
        return [charge(scripts.attack_hello[mode] + follow_up,
                       scripts.server[mode].flights[0][1] + answer)]

    cpu = ServerCpu(costs)
    solved = [sum(s for _, s in cpu.charge(scripts.attack_hello["puzzle"],
                                           scripts.server["puzzle"].flights[0][1])),
              sum(s for _, s in cpu.charge(scripts.attack_follow_up["puzzle"],
                                           scripts.server_answer["puzzle"]))]
    return {"plain": pipelined("original", scripts.attack_follow_up["original"],
                               scripts.server_answer["original"]),
            "bogus": pipelined("puzzle", scripts.bogus_reply, scripts.bogus_answer),
            "solved": solved}


def _server(d: Driver) -> ReverseServerConnection | ReplayEndpoint:
    """A legitimate connection's server object (``Side`` keeps only its ``SansIO`` view)."""
    # _Flood._pair makes every legitimate server one of these two
    return cast("ReverseServerConnection | ReplayEndpoint", d.server.obj)


def run_driver_dos(p: DoSParams, scripts: Scripts, *, endpoints: Endpoints | None = None,
                   real: bool = False) -> dict[str, float]:
    """Simulate ``p.duration`` seconds on the driver; return :func:`~reverse_ssl.model_dos.run_dos`'s metrics.

    Adds ``legit_connections`` (simulated legitimate connections) and
    ``bytes_per_legit_handshake`` (both directions, application bytes, successful ones).
    ``real=True`` (needs ``endpoints``) makes every legitimate connection a pair of real
    Reverse SSL objects instead of a replay of ``scripts``: slow, for small checks.
    """
    if real and endpoints is None:
        raise ValueError("real=True needs the endpoints that make the real objects")
    cutoff = p.duration - p.timeout - (p.solve_time if p.puzzles else 0.0)
    if cutoff <= 0:
        raise ValueError("duration must exceed timeout + solve_time")
    flood = _Flood(p, scripts, endpoints if real else None)
    if p.legit_rate > 0:
        flood.env.process(flood.legit_arrivals())
    if p.attack_rate > 0:
        flood.env.process(flood.attacker())
    flood.env.run(until=p.duration)
    if real and any(s.used_fallback_signature for s in (_server(d) for _, _, d in flood.legit)
                    if isinstance(s, ReverseServerConnection)):
        raise RuntimeError(f"the signature pool ran dry after {len(flood.legit)} connections: "
                           "raise Endpoints.pool_size (fallback signatures are not charged)")
    return flood.metrics(cutoff)


class _Flood:
    """One run of :func:`run_driver_dos`: legitimate connections on the driver, abstract
    attackers, the server's shared queue, and the metrics of the run."""

    def __init__(self, p: DoSParams, scripts: Scripts, endpoints: Endpoints | None) -> None:
        self.p, self.scripts, self.endpoints = p, scripts, endpoints
        self.mode = "puzzle" if p.puzzles else "original"
        self.costs = HandshakeCosts.from_params(p)
        self.env = simpy.Environment()
        self.rng = random.Random(p.seed)
        self.queue = _ServerQueue(self.env, p)
        self.wire = Duplex(self.env, NET)
        self.legit: list[tuple[float, _Slot, Driver]] = []
        self.server_cfg = endpoints.server_config() if endpoints is not None else None
        self.spent: list[float] = []
        self.attack_ok = 0
        self.jobs = _attack_jobs(scripts, self.costs)

    def _pair(self, n: int) -> tuple[Any, Any]:
        """The n-th legitimate client and its server: real objects, or replays of the scripts."""
        if self.endpoints is not None:
            assert self.server_cfg is not None
            return self.endpoints.client(self.mode, n), ReverseServerConnection(self.server_cfg)
        return (ReplayEndpoint(self.scripts.client[self.mode]),
                ReplayEndpoint(self.scripts.server[self.mode]))

    def legit_arrivals(self) -> ProcessGenerator:
        env, n = self.env, 0
        while True:
            yield env.timeout(self.rng.expovariate(self.p.legit_rate))
            n += 1
            slot = _Slot(self.queue, env.now)
            client, server = self._pair(n)
            d = Driver(env, TcpConnection(env, (self.wire.ab,), (self.wire.ba,), TCP), client,
                       server, client_app=_end_app, server_app=_end_app,
                       server_host=slot,  # type: ignore[arg-type]  # _Slot stands in for a Host: it has what Driver uses
                       client_cpu=ClientCpu(self.costs), server_cpu=ServerCpu(self.costs))
            slot.side = d.server
            self.legit.append((env.now, slot, d))

    def attack(self, jobs: list[float], valid: bool) -> ProcessGenerator:
        started = self.env.now
        for seconds in jobs:
            ok = yield self.env.process(self.queue.run(seconds, started))
            if not ok:
                return
        self.attack_ok += valid

    def attacker(self) -> ProcessGenerator:
        env, p = self.env, self.p
        solve_capacity = p.attacker_cores / p.solve_time if p.puzzles else 0.0
        credit, last = 0.0, env.now
        while True:
            yield env.timeout(self.rng.expovariate(p.attack_rate))
            if not p.puzzles:
                self.spent.append(p.attack_request_cost)
                env.process(self.attack(self.jobs["plain"], True))
                continue
            credit = min(credit + (env.now - last) * solve_capacity, p.attacker_cores)
            last = env.now
            if credit >= 1.0:
                credit -= 1.0
                self.spent.append(p.solve_time)
                env.process(self.attack(self.jobs["solved"], True))
            else:
                self.spent.append(p.attack_request_cost)
                env.process(self.attack(self.jobs["bogus"], False))

    def metrics(self, cutoff: float) -> dict[str, float]:
        """:func:`~reverse_ssl.model_dos.run_dos`'s summary, over connections begun by ``cutoff``."""
        p, spent, attack_ok = self.p, self.spent, self.attack_ok
        counted = [(t, s, d) for t, s, d in self.legit if t <= cutoff]
        ok = [(t, s, d) for t, s, d in counted if _server(d).handshake_complete and not s.dropped]
        latencies = [s.last_job_done - t for t, s, _ in ok if s.last_job_done is not None]
        nbytes = [d.client.bytes_sent + d.server.bytes_sent for _, _, d in ok]
        return {
            "legit_arrivals": float(len(counted)),
            "legit_success_rate": len(ok) / len(counted) if counted else float("nan"),
            "legit_mean_latency_s": sum(latencies) / len(latencies) if latencies else float("nan"),
            "server_utilisation": self.queue.busy / (p.duration * p.server_cores),
            "attack_handshakes": float(attack_ok),
            "attacker_cpu_s": sum(spent),
            "attacker_cpu_per_accepted_s": sum(spent) / attack_ok if attack_ok else float("inf"),
            "legit_connections": float(len(self.legit)),
            "bytes_per_legit_handshake": sum(nbytes) / len(nbytes) if nbytes else float("nan"),
        }
