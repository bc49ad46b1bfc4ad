"""WebALPS in simulated time with real connections: the host's delegate seam inside a SimPy model.

:mod:`webalps_sim.model_throughput` charges each request calibrated seconds and never runs a TLS
connection.  This model runs the real objects instead, with :mod:`netsim.drive` moving their
bytes over byte-accurate TCP in simulated time:

* **clients** -- ``clients`` closed-loop clients, each fetching a 2 KB file with one HTTP/1.0
  GET per connection (Table 1's ``http_load`` does; for WebBench's suite it is an assumption),
  over a switched LAN (:data:`netsim.link.LAN`).  A secure request is a real
  :class:`tls12.ClientConnection`; a plain one a byte stream (:class:`PlainStream`);
* **the WebALPS host** -- a real :class:`tls12.ServerConnection` with no private key that asks
  its questions by event (``EventDelegate({"derive_finish", "finish"})``, exactly what
  :func:`webalps_sim.aio.host.webalps_connection` builds).  Every
  :class:`tls12.events.DelegateNeeded` it returns starts a SimPy process (:class:`Seam`) that
  does what the host's asyncio channel (:class:`webalps_sim.aio.channel.GuardianChannel`) does:
  a sealed server Finished that came with the ``DERIVE_FINISH`` reply answers its ``seal`` at
  once (:meth:`webalps_sim.questions.Asker.sealed_ahead`); any other question becomes the
  guardian request (:meth:`~webalps_sim.questions.Asker.message_for`), the real
  :class:`webalps_sim.service.GuardianService` answers its frame (the guardian's own logic, in
  process), the reply becomes the answer (:meth:`~webalps_sim.questions.Asker.answer_from`),
  and the process holds the **card** (one SimPy resource: the 4758 does one thing at a time)
  for the modelled seconds of what the service charged for that request -- :class:`Meter`
  records every ``charge(op, nbytes)``, :meth:`webalps_sim.costmodel.Card4758.seconds` prices
  it, the ``transfer`` charge being the host<->card round trip.  Then
  :func:`webalps_sim.questions.supply` hands the answer in and :meth:`netsim.drive.Side.wake`
  makes the driver send what the connection produced.  A closed connection's handles are
  released (``RELEASE`` frames, charged to the card, nobody waits), as the real host's
  :func:`webalps_sim.aio.host.handle_releaser` does;
* **the HTTPS host** -- a real :class:`tls12.ServerConnection` with the key (no card);
* **the host CPU** -- a :class:`netsim.host.Host` with ``cores`` cores; each connection costs it
  the calibrated per-request seconds of its kind (:class:`HostCost`), charged when its first
  bytes arrive.

What is calibrated and what is judged (a model is never validated against itself):

* :func:`paper_costs` takes the host's per-request CPU from the paper's Table 1 (one client:
  HTTP 858.80 requests/s, HTTPS 67.72 requests/s; the WebALPS host is charged the HTTPS host's
  time, as :mod:`webalps_sim.costmodel` adds the card's time and subtracts nothing), and the
  card's service times are :class:`~webalps_sim.costmodel.Card4758`'s, whose one tuned constant
  makes the calibration profile cost the paper's 86.2 ms extra per WebALPS request.  So the
  one-client rows of Table 1 are **calibration**;
* **judged**: the number and kind of questions per request (counted here at the seam, and by
  the real host's channel for the same workload, in the tests), the card time per request that
  follows from them (against the calibration profile), requests/s against load and where it
  saturates, and Figure 4's claim that under the e-commerce mix (8 % secure) the WebALPS host
  is about 25 % slower than the HTTPS host -- beside :func:`webalps_sim.model_throughput.simulate`
  run with the same calibration (:func:`throughput_params`).

Example::

    run = simulate(clients=4, kind="webalps", seconds=5.0)
    run.rps, run.card_util, run.questions_per_request()
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import simpy
from cryptography import x509

from netsim.drive import Driver, Side
from netsim.host import Host, HostParams
from netsim.link import LAN, Duplex, LinkParams
from netsim.tcp import TcpConnection
from tls12 import ClientConfig, ClientConnection, ServerConnection
from tls12.certs import Credentials
from tls12.config import ServerConfig
from tls12.delegate import DelegateRequest, EventDelegate
from tls12.events import ApplicationData, ConnectionClosed, DelegateNeeded
from tls12.suites import CipherSuite
from tls12.testing import credentials

from . import model_throughput
from . import protocol as p
from .costmodel import Card4758
from .model_web import Fetch, PlainStream
from .questions import OPERATIONS, WEBALPS_SUITES, Asker, supply
from .service import GuardianService

__all__ = ["KINDS", "OPERATIONS", "WEBALPS_SUITES", "FILE_SIZE", "CARD_4758", "HostCost", "Meter",
           "Seam", "Tally", "PlainStream", "Fetch", "FileServer", "Run", "paper_costs",
           "throughput_params", "simulate", "sweep", "figure4_rows", "main"]

KINDS = ("http", "https", "webalps")
"""What a secure request is served by (``http`` = no secure requests at all)."""
FILE_SIZE = 2048
"""Bytes of the file every request fetches (Table 1's 2 KB file)."""
CARD_4758 = Card4758()
"""The calibrated 4758 (:mod:`webalps_sim.costmodel`): every run's card unless told."""
_PAPER_RPS = {"http": 858.7989, "https": 67.7246}
"""Paper, Table 1: requests/s of one client (the calibration of :func:`paper_costs`)."""


@dataclass(frozen=True)
class HostCost:
    """Host CPU seconds per request by kind, and the host's size (the calibration)."""

    http_s: float
    https_s: float
    webalps_s: float
    cores: int = 1

    def __post_init__(self) -> None:
        if min(self.http_s, self.https_s, self.webalps_s) < 0 or self.cores < 1:
            raise ValueError("host seconds must not be negative and cores at least 1")

    def seconds(self, kind: str) -> float:
        return {"http": self.http_s, "https": self.https_s, "webalps": self.webalps_s}[kind]


def paper_costs(cores: int = 1) -> HostCost:
    """Host CPU per request from the paper's one-client Table 1 (see the module docstring)."""
    https = 1 / _PAPER_RPS["https"]
    return HostCost(http_s=1 / _PAPER_RPS["http"], https_s=https, webalps_s=https, cores=cores)


def throughput_params(host: HostCost, card: Card4758 | None, card_s: float,
                      secure_fraction: float) -> model_throughput.ServerParams:
    """The same calibration for :func:`webalps_sim.model_throughput.simulate` (remote clients):
    ``card_s`` is the card time per WebALPS request (e.g. :meth:`Run.card_seconds_per_request`
    of a driver run, or the calibration profile's)."""
    return model_throughput.ServerParams(http_cpu_s=host.http_s, https_cpu_s=host.https_s,
                        webalps_host_cpu_s=host.webalps_s,
                        card_s=card_s if card is not None else 0.0, cores=host.cores,
                        secure_fraction=secure_fraction, loopback=False)


class Meter:
    """A :class:`webalps_sim.app.CostCharger` that records what the guardian charged.

    :meth:`take` returns the card seconds of everything charged since the last call (0 for a
    free card, ``card=None``) and adds the calls to :attr:`calls`."""

    def __init__(self, card: Card4758 | None) -> None:
        self.card = card
        self.calls: Counter[str] = Counter()
        self._pending: list[tuple[str, int]] = []

    def charge(self, op: str, nbytes: int) -> None:
        self._pending.append((op, nbytes))

    def take(self) -> float:
        pending, self._pending = self._pending, []
        self.calls.update(op for op, _ in pending)
        if self.card is None:
            return 0.0
        return sum(self.card.seconds(op, n) for op, n in pending)


@dataclass
class Tally:
    """What one connection asked at the seam: questions by operation, round trips to the
    guardian, card seconds of what the guardian charged for them."""

    questions: Counter[str] = field(default_factory=Counter)
    round_trips: int = 0
    card_seconds: float = 0.0


class Seam:
    """The host's side of the delegate seam in simulated time: one per run, shared by all
    WebALPS connections (as the host's one guardian channel is)."""

    def __init__(self, env: simpy.Environment, service: GuardianService, meter: Meter) -> None:
        self.env = env
        self.service = service
        self.meter = meter
        self.card = simpy.Resource(env, capacity=1)
        self.asker = Asker()
        self.questions: Counter[str] = Counter()
        self.round_trips = 0
        self.card_busy = 0.0
        self._ids = 0

    def _exchange(self, message: p.Message, owner: object, tally: Tally) -> tuple[object, float]:
        """One request frame to the guardian: its reply and the card seconds it costs."""
        self._ids += 1
        frame = p.Frame(message.TYPE, self._ids, message.to_payload())
        reply = self.service.handle_frame(frame, owner)
        seconds = self.meter.take()
        tally.card_seconds += seconds
        return p.decode_message(p.FrameDecoder().feed(reply)[0]), seconds

    def _hold(self, seconds: float) -> Generator[simpy.Event, None, None]:
        """Queue for the card and hold it ``seconds`` (FIFO: one operation at a time)."""
        with self.card.request() as slot:
            yield slot
            yield self.env.timeout(seconds)
        self.card_busy += seconds

    def answer(self, request: DelegateRequest, owner: object, tally: Tally
               ) -> Generator[simpy.Event, None, object]:
        """The answer to one question (an exception value on failure), in simulated time."""
        self.questions[request.op] += 1
        tally.questions[request.op] += 1
        ready = self.asker.sealed_ahead(request)
        if ready is not None:
            return ready
        self.round_trips += 1
        tally.round_trips += 1
        reply, seconds = self._exchange(self.asker.message_for(request), owner, tally)
        yield from self._hold(seconds)
        return self.asker.answer_from(request, reply)

    def release(self, conn: ServerConnection, tally: Tally) -> None:
        """Forget a closed connection's handles (``RELEASE``: card time, nobody waits)."""
        for handle in (conn.key_handle, conn.ephemeral_handle):
            if handle is not None:
                self.asker.forget(handle.id)
                self.questions["release"] += 1
                tally.questions["release"] += 1
                _, seconds = self._exchange(p.Release(handle.id), id(conn), tally)
                self.env.process(self._hold(seconds))


class FileServer:
    """Server application: answers one HTTP/1.0 GET with ``body`` and closes.

    With a :class:`Seam` it is the WebALPS host's adapter: every ``DelegateNeeded`` starts a
    SimPy process that answers it through the seam, supplies the answer, handles the events
    that follow, collects the seals of what it wrote (``take_requests``) and wakes the side;
    the FIN waits until no question is outstanding (the last sealed bytes go first).  Like the
    real host it then closes the connection for good: the client's close_notify, which arrives
    after, is never read (nor opened by the guardian)."""

    def __init__(self, env: simpy.Environment, body: bytes, seam: Seam | None = None) -> None:
        self.env = env
        self.body = body
        self.head = (f"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.seam = seam
        self.outstanding = 0
        self.ending = False
        self._request = bytearray()
        self.answered = False
        self.tally = Tally()

    def __call__(self, side: Side, event: Any) -> None:
        if isinstance(event, DelegateNeeded):
            self._ask(side, event.request)
        elif isinstance(event, ApplicationData) and not self.answered:
            self._request += event.data
            if b"\r\n\r\n" in self._request:
                self.answered = True
                side.obj.send_data(self.head + self.body)  # type: ignore[attr-defined]  # SansIO declares no send_data; these sides are connections that have it
                side.obj.close()  # type: ignore[attr-defined]  # SansIO declares no close; these sides are connections that have it
                self._end(side)
        elif isinstance(event, ConnectionClosed):
            self._end(side)

    def _end(self, side: Side) -> None:
        self.ending = True
        self._flush(side)

    def _flush(self, side: Side) -> None:
        """Ask the seals of what was written; FIN once nothing is outstanding."""
        take = getattr(side.obj, "take_requests", None)
        for request in take() if take is not None and self.seam is not None else ():
            self._ask(side, request)
        if self.ending and not self.outstanding:
            side.shutdown()
            side.finished = True  # the host closes its socket: later client bytes are dropped

    def _ask(self, side: Side, request: DelegateRequest) -> None:
        self.outstanding += 1
        self.env.process(self._answer(side, request))

    def _answer(self, side: Side, request: DelegateRequest
                ) -> Generator[simpy.Event, None, None]:
        assert self.seam is not None
        conn = side.obj
        answer = yield from self.seam.answer(request, id(conn), self.tally)
        self.outstanding -= 1
        try:
            events = supply(conn, request, answer)
        except Exception as exc:  # a remote protocol error: its alert is queued, fail closed
            if not hasattr(exc, "events"):
                raise
            side.error = exc
            events, self.ending = list(exc.events), True
        for event in events:
            self(side, event)
        self._flush(side)
        side.wake()


class _OnceCpu:
    """A :mod:`netsim.cpu` model charging one request's host seconds at its first bytes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.charged = False

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        if self.charged or not received:
            return []
        self.charged = True
        return [("request", self.seconds)]


@dataclass
class Run:
    """One simulated run: completions after the warm-up, questions counted at the seam."""

    clients: int
    kind: str
    seconds: float
    secure_fraction: float
    http: int = 0
    secure: int = 0
    secure_all: int = 0
    """Secure requests completed over the whole run, warm-up included: what ``questions``,
    ``round_trips`` and ``card_seconds`` (summed over those connections) are divided by."""
    bad_bodies: int = 0
    errors: int = 0
    card_util: float = 0.0
    cpu_util: float = 0.0
    card_seconds: float = 0.0
    round_trips: int = 0
    questions: Counter[str] = field(default_factory=Counter)
    guardian_calls: dict[str, int] = field(default_factory=dict)
    """What the guardian charged to its cost model, by operation, over the whole run."""

    @property
    def rps(self) -> float:
        return (self.http + self.secure) / self.seconds

    @property
    def secure_rps(self) -> float:
        return self.secure / self.seconds

    def questions_per_request(self) -> dict[str, float]:
        """Questions by operation per secure request (the seam's counts over the whole run)."""
        n = max(self.secure_all, 1)
        return {op: count / n for op, count in sorted(self.questions.items())}

    def card_seconds_per_request(self) -> float:
        return self.card_seconds / max(self.secure_all, 1)

    def round_trips_per_request(self) -> float:
        return self.round_trips / max(self.secure_all, 1)


@dataclass
class _World:
    """What every client of one run shares."""

    env: simpy.Environment
    kind: str
    host: Host
    cost: HostCost
    link: LinkParams
    body: bytes
    chain: tuple[x509.Certificate, ...]
    server_creds: Credentials
    suite: CipherSuite
    seam: Seam | None
    run: Run
    warmup: float


def _connection(world: _World, secure: bool) -> tuple[Any, Any, str]:
    """Client object, server object and cost kind of one request."""
    if not secure:
        return PlainStream(), PlainStream(), "http"
    client = ClientConnection(ClientConfig(cipher_suites=(world.suite,)))
    if world.kind == "webalps":
        config = ServerConfig(credentials=Credentials.chain_only(world.chain),
                              cipher_suites=WEBALPS_SUITES)
        return client, ServerConnection(config, delegate=EventDelegate(OPERATIONS)), "webalps"
    config = ServerConfig(credentials=world.server_creds, cipher_suites=WEBALPS_SUITES)
    return client, ServerConnection(config), "https"


def _client(world: _World, rng: random.Random, seed: int
            ) -> Generator[simpy.Event, None, None]:
    """One closed-loop client: a request on a new connection, again, with no think time."""
    env, run = world.env, world.run
    while True:
        secure = world.kind != "http" and rng.random() < run.secure_fraction
        client, server, cost = _connection(world, secure)
        wire = Duplex(env, world.link, seed=rng.randrange(2**31) ^ seed)
        fetch = Fetch()
        app = FileServer(env, world.body, world.seam if cost == "webalps" else None)
        driver = Driver(env, TcpConnection(env, (wire.ab,), (wire.ba,)), client, server,
                        client_app=fetch, server_app=app, server_host=world.host,
                        server_cpu=_OnceCpu(world.cost.seconds(cost)))
        driver.server.linger = True
        yield driver.process
        if cost == "webalps" and world.seam is not None:
            world.seam.release(server, app.tally)
        failed = driver.client.error is not None or driver.server.error is not None
        run.errors += failed
        run.bad_bodies += not failed and fetch.body != world.body
        if secure:
            run.secure_all += 1
            run.questions.update(app.tally.questions)
            run.round_trips += app.tally.round_trips
            run.card_seconds += app.tally.card_seconds
        if env.now >= world.warmup and not failed and fetch.body == world.body:
            if secure:
                run.secure += 1
            else:
                run.http += 1


def simulate(*, clients: int, kind: str = "webalps", seconds: float = 5.0, warmup: float = 0.5,
             secure_fraction: float = 1.0, host: HostCost | None = None,
             card: Card4758 | None = CARD_4758, link: LinkParams = LAN,
             suite: CipherSuite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
             file_size: int = FILE_SIZE, seed: int = 1) -> Run:
    """Run ``clients`` closed-loop clients for ``warmup + seconds`` simulated seconds.

    ``kind``: who serves the secure requests -- ``"webalps"`` (through the seam and the card),
    ``"https"`` (the host with its key) or ``"http"`` (no secure requests: every request plain).
    Each request is secure with probability ``secure_fraction`` (1.0: every request; Figure 4's
    e-commerce mix: 0.08).  ``host``: the CPU calibration (default :func:`paper_costs`);
    ``card``: the card's service times (``None``: a card that costs nothing, the negative
    control).  One ``random.Random(seed)`` draws every request's kind.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if clients < 1 or seconds <= 0 or warmup < 0 or not 0 <= secure_fraction <= 1:
        raise ValueError("clients >= 1, seconds > 0, warmup >= 0 and 0 <= secure_fraction <= 1")
    env = simpy.Environment()
    cost = host or paper_costs()
    creds = credentials(bits=1024)
    run = Run(clients, kind, seconds, secure_fraction if kind != "http" else 0.0)
    meter = Meter(card)
    seam = None
    if kind == "webalps":
        assert creds.private_key is not None  # generated credentials hold their key
        service = GuardianService(creds.private_key, tuple(creds.chain_der), b"model",
                                  cost=meter)
        seam = Seam(env, service, meter)
    world = _World(env, kind, Host(env, "server", HostParams(cores=cost.cores)), cost, link,
                   bytes(random.Random(seed).randbytes(file_size)), creds.chain, creds, suite,
                   seam, run, warmup)
    rng = random.Random(seed)
    for i in range(clients):
        env.process(_client(world, rng, i))
    env.run(until=warmup + seconds)
    horizon = warmup + seconds
    run.cpu_util = world.host.busy_time / (horizon * cost.cores)
    if seam is not None:
        run.card_util = seam.card_busy / horizon
        run.guardian_calls = dict(meter.calls)
    return run


def sweep(loads: list[int], kinds: tuple[str, ...] = KINDS, **options: Any) -> pd.DataFrame:
    """Requests/s per load and kind; columns clients, host, rps, secure_rps, card_util,
    cpu_util, errors, and questions per secure request by operation (``q_<op>``)."""
    rows = []
    for clients in loads:
        for kind in kinds:
            run = simulate(clients=clients, kind=kind, **options)
            row = {"clients": clients, "host": kind, "rps": run.rps,
                   "secure_rps": run.secure_rps, "card_util": run.card_util,
                   "cpu_util": run.cpu_util, "errors": run.errors + run.bad_bodies,
                   "card_ms_per_request": run.card_seconds_per_request() * 1e3}
            row.update({f"q_{op}": v for op, v in run.questions_per_request().items()})
            rows.append(row)
    return pd.DataFrame(rows)


#: Figure 4's hosts as :mod:`webalps_sim.experiments` names them.
FIGURE_HOSTS = {"https": "HTTPS", "webalps": "WebALPS-4758"}


def figure4_rows(loads: list[int] | None = None, *, seconds: float = 5.0,
                 secure_fraction: float = 0.08, progress: Any = None,
                 **options: Any) -> pd.DataFrame:
    """Figure 4 on the driver: requests/s against closed-loop clients under the e-commerce mix,
    with the columns of the other :func:`webalps_sim.experiments.figure4_variant` variants
    (``source="driver"``; ``measured_rps`` / ``error`` empty: nothing measured here), the
    seam's questions per secure request (``q_<op>``) and ``throughput_rps``: what
    :func:`webalps_sim.model_throughput.simulate` gives with the same calibration and the card
    time per request the seam measured.  ``progress(row)`` after each point."""
    rows = []
    for clients in loads or [1, 2, 4, 8, 16, 24]:
        for kind, host in FIGURE_HOSTS.items():
            df = sweep([clients], (kind,), seconds=seconds, secure_fraction=secure_fraction,
                       **options)
            row = df.iloc[0].to_dict() | {"host": host, "source": "driver", "seconds": seconds,
                                          "measured_rps": float("nan"), "error": float("nan")}
            params = throughput_params(options.get("host") or paper_costs(),
                                       options.get("card", CARD_4758),
                                       row["card_ms_per_request"] / 1e3, secure_fraction)
            row["throughput_rps"] = model_throughput.simulate(
                params, clients=clients, secure=kind, seconds=seconds,
                warmup=options.get("warmup", 0.5), seed=options.get("seed", 1)).rps
            rows.append(row)
            if progress is not None:
                progress(row)
    return pd.DataFrame(rows)


def _loads(text: str) -> list[int]:
    try:
        loads = [int(x) for x in text.split(",")]
    except ValueError:
        loads = []
    if not loads or min(loads) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,2,4, got {text!r}")
    return loads


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(text.split(","))
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown host {', '.join(unknown)} (choose from "
                                         f"{', '.join(KINDS)})")
    return kinds


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from testbed import cli

    parser = argparse.ArgumentParser(prog=cli.program_name("webalps_sim.model_driver"),
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loads", type=_loads, default=[1, 2, 4, 8, 16],
                        help="closed-loop clients per point, comma-separated (default 1,2,4,8,16)")
    parser.add_argument("--seconds", type=cli.positive_float, default=5.0,
                        help="simulated seconds per point after a 0.5 s warm-up (default 5)")
    parser.add_argument("--mix", type=_fraction, default=1.0,
                        help="fraction of secure requests (default 1.0; Figure 4's mix: 0.08)")
    parser.add_argument("--kinds", type=_kinds, default=KINDS,
                        help="hosts, comma-separated, of http, https, webalps (default all)")
    parser.add_argument("--out", type=cli.output_file, help="also write the table here as CSV")
    return parser


def _run(args: argparse.Namespace) -> int:
    frames = []
    for clients in args.loads:
        frames.append(sweep([clients], args.kinds, seconds=args.seconds,
                            secure_fraction=args.mix))
        print(f"# {clients} clients done", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
    pd.set_option("display.width", 250)
    print(df.to_string(index=False))
    if args.out:
        df.to_csv(args.out, index=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m webalps_sim.model_driver [--loads 1,2,4] [--seconds S] [--mix F] [--out CSV]``."""
    from testbed import cli

    return cli.run_main(build_parser(), _run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
