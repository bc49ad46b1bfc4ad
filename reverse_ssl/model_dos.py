"""A SimPy model of a handshake flood against an SSL server, with and without Reverse SSL puzzles.

**Scenario.**  One server with ``server_cores`` CPUs accepts handshakes in
FIFO order from a listen backlog of ``backlog`` connections.  Legitimate
clients arrive as a Poisson process at ``legit_rate`` per second; an attacker
sends handshake requests as a Poisson process at ``attack_rate`` per second
from ``attacker_cores`` CPUs.  A connection that waits longer than
``timeout`` seconds for the CPU is dropped by the server's handshake timeout
(it then costs nothing more); a connection arriving at a full backlog is
refused.  A legitimate client succeeds if its handshake is served.

**Without puzzles** (the standard RSA handshake) every request, legitimate or
not, costs the server ``cost_original`` CPU seconds (a private-key
decryption plus protocol overhead), and costs the attacker only
``attack_request_cost`` (it may send the same garbage ciphertext every time).

**With puzzles** (Reverse SSL, §6) a request gets served only with a solved
puzzle.  Solving takes ``solve_time`` CPU seconds; the attacker's cores can
solve at most ``attacker_cores / solve_time`` puzzles per second, and every
other request it sends carries a bogus solution that the server rejects in
``cost_reject`` seconds (Figure 3: the cheap checks first).  A served
handshake costs ``cost_reverse`` (one public-key operation, a one-time
signature, overhead).  Legitimate clients solve too: ``solve_time`` is added
to their latency, on their own CPU.

All times are seconds; rates are per second.  Parameters live in the frozen
:class:`DoSParams` (calibrate them with measured costs: see
:func:`reverse_ssl.experiments.calibrated_dos_params`); one
``random.Random(seed)`` drives the whole run, so a run is reproducible.
Metrics are appended to lists during the run and summarised by
:func:`run_dos` into a dict: legitimate success rate, server utilisation,
the attacker's CPU seconds per handshake the server completed for it.

:mod:`reverse_ssl.model_dos_driver` runs the same scenario with the bytes of real handshakes on
:mod:`netsim.drive` and explains where the two differ.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import simpy
from simpy.events import ProcessGenerator

__all__ = ["DoSParams", "run_dos", "sweep_attack_rates"]


@dataclass(frozen=True)
class DoSParams:
    server_cores: int = 1
    cost_original: float = 0.004
    """Server CPU seconds per standard handshake (RSA private-key decryption + overhead)."""
    cost_reverse: float = 0.001
    """Server CPU seconds per Reverse SSL puzzle handshake."""
    cost_reject: float = 0.00002
    """Server CPU seconds to reject a bogus puzzle solution (pre-image / range check)."""
    cost_issue: float = 0.00005
    """Server CPU seconds to answer a ClientHello with a puzzle."""
    solve_time: float = 0.3
    """Client CPU seconds to solve one puzzle."""
    attack_request_cost: float = 0.00005
    """Attacker CPU seconds per request without puzzles (send a ClientKeyExchange)."""
    legit_rate: float = 50.0
    attack_rate: float = 0.0
    attacker_cores: int = 4
    puzzles: bool = False
    timeout: float = 5.0
    backlog: int = 1024
    duration: float = 60.0
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("cost_original", "cost_reverse", "cost_reject", "solve_time", "timeout", "duration"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.server_cores < 1 or self.attacker_cores < 0 or self.backlog < 1:
            raise ValueError("cores and backlog must be positive")
        if self.legit_rate < 0 or self.attack_rate < 0:
            raise ValueError("rates must be non-negative")


class _Server:
    """The CPU as a FIFO resource; jobs carry their cost and arrival time."""

    def __init__(self, env: simpy.Environment, p: DoSParams) -> None:
        self.env = env
        self.p = p
        self.cpu = simpy.Resource(env, capacity=p.server_cores)
        self.busy = 0.0
        self.served: list[tuple[str, float, float]] = []  # (kind, arrival time, latency)
        self.dropped: list[str] = []

    def submit(self, kind: str, cost: float, started: float) -> ProcessGenerator:
        if len(self.cpu.queue) >= self.p.backlog:
            self.dropped.append(kind)
            return
        with self.cpu.request() as req:
            yield req
            if self.env.now - started > self.p.timeout:
                self.dropped.append(kind)  # the handshake timeout fired while queued
                return
            yield self.env.timeout(cost)
            self.busy += cost
            self.served.append((kind, started, self.env.now - started))


def _legit_client(env: simpy.Environment, server: _Server, p: DoSParams) -> ProcessGenerator:
    started = env.now
    if p.puzzles:
        yield env.process(server.submit("issue", p.cost_issue, started))
        yield env.timeout(p.solve_time)  # the client's own CPU
        yield env.process(server.submit("legit", p.cost_reverse, started))
    else:
        yield env.process(server.submit("legit", p.cost_original, started))


def _attacker(env: simpy.Environment, server: _Server, rng: random.Random, p: DoSParams, spent: list[float]) -> ProcessGenerator:
    """Sends at ``attack_rate``; with puzzles, only what its cores can solve carries a valid solution."""
    solve_capacity = p.attacker_cores / p.solve_time if p.puzzles else 0.0
    credit = 0.0
    last = env.now
    while True:
        yield env.timeout(rng.expovariate(p.attack_rate))
        if not p.puzzles:
            spent.append(p.attack_request_cost)
            env.process(server.submit("attack", p.cost_original, env.now))
            continue
        credit = min(credit + (env.now - last) * solve_capacity, p.attacker_cores)
        last = env.now
        env.process(server.submit("issue", p.cost_issue, env.now))
        if credit >= 1.0:
            credit -= 1.0
            spent.append(p.solve_time)
            env.process(server.submit("attack", p.cost_reverse, env.now))
        else:
            spent.append(p.attack_request_cost)
            env.process(server.submit("bogus", p.cost_reject, env.now))


def run_dos(p: DoSParams) -> dict[str, float]:
    """Simulate ``p.duration`` seconds; return the summary metrics."""
    env = simpy.Environment()
    rng = random.Random(p.seed)
    server = _Server(env, p)
    spent: list[float] = []
    # only clients that arrive early enough to finish before the end are counted (no edge effect)
    cutoff = p.duration - p.timeout - (p.solve_time if p.puzzles else 0.0)
    if cutoff <= 0:
        raise ValueError("duration must exceed timeout + solve_time")
    arrivals = {"legit": 0}
    if p.legit_rate > 0:

        def counted(env: simpy.Environment = env) -> ProcessGenerator:
            while True:
                yield env.timeout(rng.expovariate(p.legit_rate))
                arrivals["legit"] += env.now <= cutoff
                env.process(_legit_client(env, server, p))

        env.process(counted())
    if p.attack_rate > 0:
        env.process(_attacker(env, server, rng, p, spent))
    env.run(until=p.duration)
    legit_ok = [lat for kind, t0, lat in server.served if kind == "legit" and t0 <= cutoff]
    attack_ok = sum(1 for kind, _, _ in server.served if kind == "attack")
    return {
        "legit_arrivals": float(arrivals["legit"]),
        "legit_success_rate": len(legit_ok) / arrivals["legit"] if arrivals["legit"] else float("nan"),
        "legit_mean_latency_s": sum(legit_ok) / len(legit_ok) if legit_ok else float("nan"),
        "server_utilisation": server.busy / (p.duration * p.server_cores),
        "attack_handshakes": float(attack_ok),
        "attacker_cpu_s": sum(spent),
        "attacker_cpu_per_accepted_s": sum(spent) / attack_ok if attack_ok else float("inf"),
    }


def sweep_attack_rates(base: DoSParams, rates: list[float]) -> list[dict[str, float]]:
    """``run_dos`` for each attack rate, with and without puzzles (same seed: common random numbers)."""
    rows = []
    for puzzles in (False, True):
        for rate in rates:
            result = run_dos(replace(base, attack_rate=rate, puzzles=puzzles))
            rows.append({"puzzles": float(puzzles), "attack_rate": rate, **result})
    return rows
