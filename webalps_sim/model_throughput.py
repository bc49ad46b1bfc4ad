"""SimPy model of Figure 4: requests/s against load for a WebALPS host and a plain HTTPS host.

Scenario (the paper's section 4.2.2, WebBench e-commerce suite): ``clients`` closed-loop clients
with no think time; each request is plain HTTP with probability ``1 - secure_fraction`` (0.92)
and secure otherwise (0.08), one connection per request. Time unit: seconds.

What a request costs, from the measured runs (:func:`webalps_sim.experiments.calibrate_model`):

* **host CPU** (a resource with ``cores`` servers): ``http_cpu_s`` for HTTP, ``https_cpu_s`` for
  an HTTPS request served by the host alone (handshake, records, file), ``webalps_host_cpu_s``
  for a WebALPS request (relaying, HTTP parsing, file; no crypto);
* **the card** (one server, FIFO: the coprocessor does one thing at a time): ``card_s`` per
  WebALPS request, the guardian's own work plus the cost model's modelled 4758 time;
* **the load generator's CPU** per kind (``*_client_cpu_s``): with ``loopback=True`` it
  competes for the same cores *and* for one interpreter lock (a Python load generator runs its
  client threads one at a time), as in the measured loopback runs; with ``loopback=False``
  (clients on other machines, as in the paper's WebBench set-up) it costs nothing here;
* **the rest** per kind (``*_latency_s``): what a lone client waits for beyond all of the
  above. With ``loopback=True`` there is no wire: that time is the kernel's loopback TCP, the
  system calls and the scheduler, i.e. work on the same cores, so it queues for a core. With
  ``loopback=False`` it is a fixed, non-queueing network delay.

The model does not know about caches or TCP: with ``loopback=False`` it answers "how would
requests/s grow if the server had its measured per-request costs and more clients came", for
loads beyond what two shared cores can generate.
Metrics are appended to lists during the run and returned as a DataFrame.

Example::

    params = ServerParams(http_cpu_s=1e-3, https_cpu_s=5e-3, webalps_host_cpu_s=2e-3,
                          card_s=0.09, http_latency_s=2e-4, https_latency_s=1e-3,
                          webalps_latency_s=1e-3)
    simulate(params, clients=24, secure="webalps", seconds=60).rps
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass, fields

import pandas as pd
import simpy

__all__ = ["Run", "ServerParams", "simulate", "sweep"]


@dataclass(frozen=True)
class ServerParams:
    """Per-request service demands (seconds) and the host's size."""

    http_cpu_s: float
    https_cpu_s: float
    webalps_host_cpu_s: float
    card_s: float
    http_latency_s: float = 0.0
    https_latency_s: float = 0.0
    webalps_latency_s: float = 0.0
    http_client_cpu_s: float = 0.0
    https_client_cpu_s: float = 0.0
    webalps_client_cpu_s: float = 0.0
    cores: int = 2
    secure_fraction: float = 0.08
    loopback: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise ValueError(f"{f.name} must not be negative, not {value!r}")
        if self.cores < 1:
            raise ValueError("cores must be at least 1")
        if not 0 <= self.secure_fraction <= 1:
            raise ValueError("secure_fraction must be within [0, 1]")


@dataclass(frozen=True)
class Run:
    """Result of one simulated run: completions per kind after the warm-up."""

    clients: int
    secure: str
    seconds: float
    http: int
    secure_done: int
    card_busy: float
    cpu_busy: float

    @property
    def rps(self) -> float:
        return (self.http + self.secure_done) / self.seconds


class _Server:
    """The host's cores and (for WebALPS) the card, with busy-time counters."""

    def __init__(self, env: simpy.Environment, params: ServerParams) -> None:
        self.env = env
        self.params = params
        self.cpu = simpy.Resource(env, capacity=params.cores)
        self.card = simpy.Resource(env, capacity=1)
        self.gil = simpy.Resource(env, capacity=1)
        self.cpu_busy = 0.0
        self.card_busy = 0.0

    def use(self, resource: simpy.Resource, seconds: float,
            counter: str) -> Generator[simpy.Event, None, None]:
        """Queue for ``resource``, hold it ``seconds``, add the time to ``counter``."""
        if seconds <= 0:
            return
        with resource.request() as req:
            yield req
            yield self.env.timeout(seconds)
        setattr(self, counter, getattr(self, counter) + seconds)

    def rest(self, seconds: float) -> Generator[simpy.Event, None, None]:
        """The unattributed remainder: core time on loopback, a plain delay otherwise."""
        if self.params.loopback:
            yield from self.use(self.cpu, seconds, "cpu_busy")
        elif seconds > 0:
            yield self.env.timeout(seconds)

    def client_cpu(self, seconds: float) -> Generator[simpy.Event, None, None]:
        """The load generator's share: on loopback it needs the interpreter lock and a core."""
        if seconds <= 0 or not self.params.loopback:
            return
        with self.gil.request() as gil:
            yield gil
            with self.cpu.request() as core:
                yield core
                yield self.env.timeout(seconds)


def _client(env: simpy.Environment, server: _Server, rng: random.Random, secure: str,
            warmup: float, done: dict[str, list[float]]) -> Generator[simpy.Event, None, None]:
    p = server.params
    while True:
        if rng.random() < p.secure_fraction:
            kind = "secure"
            if secure == "webalps":
                yield env.process(server.client_cpu(p.webalps_client_cpu_s))
                yield env.process(server.use(server.cpu, p.webalps_host_cpu_s, "cpu_busy"))
                yield env.process(server.use(server.card, p.card_s, "card_busy"))
                yield env.process(server.rest(p.webalps_latency_s))
            else:
                yield env.process(server.client_cpu(p.https_client_cpu_s))
                yield env.process(server.use(server.cpu, p.https_cpu_s, "cpu_busy"))
                yield env.process(server.rest(p.https_latency_s))
        else:
            kind = "http"
            yield env.process(server.client_cpu(p.http_client_cpu_s))
            yield env.process(server.use(server.cpu, p.http_cpu_s, "cpu_busy"))
            yield env.process(server.rest(p.http_latency_s))
        if env.now >= warmup:
            done[kind].append(env.now)


def simulate(params: ServerParams, *, clients: int, secure: str = "webalps",
             seconds: float = 60.0, warmup: float = 5.0, seed: int = 1) -> Run:
    """Run ``clients`` closed-loop clients for ``warmup + seconds`` simulated seconds.

    ``secure`` is ``"webalps"`` (secure requests go through the card) or ``"https"`` (the host
    serves them itself). One ``random.Random(seed)`` draws every request's kind.
    """
    if secure not in ("webalps", "https"):
        raise ValueError(f"secure must be 'webalps' or 'https', not {secure!r}")
    if clients < 1 or seconds <= 0:
        raise ValueError("clients must be at least 1 and seconds positive")
    env = simpy.Environment()
    server = _Server(env, params)
    rng = random.Random(seed)
    done: dict[str, list[float]] = {"http": [], "secure": []}
    for _ in range(clients):
        env.process(_client(env, server, rng, secure, warmup, done))
    env.run(until=warmup + seconds)
    horizon = warmup + seconds
    return Run(clients, secure, seconds, len(done["http"]), len(done["secure"]),
               server.card_busy / horizon, server.cpu_busy / (horizon * params.cores))


def sweep(params: ServerParams, loads: list[int], *, seconds: float = 60.0, warmup: float = 5.0,
          seed: int = 1, hosts: tuple[str, ...] = ("webalps", "https")) -> pd.DataFrame:
    """Requests/s per load and host kind: columns clients, host, rps, secure_rps, card_util,
    cpu_util."""
    rows = []
    for clients in loads:
        for host in hosts:
            run = simulate(params, clients=clients, secure=host, seconds=seconds, warmup=warmup,
                           seed=seed)
            rows.append({"clients": clients, "host": host, "rps": run.rps,
                         "secure_rps": run.secure_done / run.seconds,
                         "card_util": run.card_busy, "cpu_util": run.cpu_busy})
    return pd.DataFrame(rows)
