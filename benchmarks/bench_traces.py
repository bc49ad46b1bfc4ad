"""Benchmark the trace pipeline and the SimPy network models.

Prints, for the same run and machine:

1. cost-model replay throughput (requests/s) on the largest available real trace and on a
   synthetic ``www.lcs``-like trace of 10^7 requests (target: >= 10^6 requests/s, i.e. a
   month-long trace in seconds); generation and parsing speeds are printed alongside;
2. SimPy events per second of the TCP/link model (a 1 MB transfer over the ADSL preset, and
   two competing flows), next to the raw SimPy event rate of a trivial model (one process
   yielding timeouts) measured in the same run, and their ratio.

Usage::

    python benchmarks/bench_traces.py            # full: 10^7 synthetic requests
    python benchmarks/bench_traces.py --quick    # 10^6 requests, fewer repetitions
    python benchmarks/bench_traces.py --json results/bench_traces.json

The references (a trivial SimPy model, the cost model's own speed) run in the
same process and cannot be missing; the real trace can: without any usable
trace (the bundled samples under ``traces/`` or ``TRACES_DIR``) the benchmark
exits with status 1 and one line instead of replaying only the synthetic one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netsim.link import ADSL_DOWN, ADSL_UP, Link  # noqa: E402
from netsim.synth import LCS_LIKE, generate, scaled  # noqa: E402
from netsim.tcp import TcpConnection  # noqa: E402
from netsim.traces import load_trace  # noqa: E402
from netsim.workload import preprocess  # noqa: E402
from sslsplit.costmodel import paper_model  # noqa: E402
from sslsplit.replay import replay  # noqa: E402
from sslsplit.trace_experiments import available_traces  # noqa: E402

TARGET_REQ_PER_S = 1e6
BENCH = "bench_traces"


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts scheduled events."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def schedule(self, event, priority=simpy.core.NORMAL, delay=0):  # type: ignore[no-untyped-def, override]
        self.events += 1
        super().schedule(event, priority, delay)


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Fastest wall time of ``repeat`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_replay(quick: bool) -> dict[str, float]:
    model = paper_model()
    out: dict[str, float] = {}
    traces = available_traces()
    sized = []
    for name in traces:
        t = time.perf_counter()
        table, report = load_trace(name)
        parse_s = time.perf_counter() - t
        t = time.perf_counter()
        work = preprocess(table)
        prep_s = time.perf_counter() - t
        sized.append((len(work), name, work))
        print(f"parse   {name:24s} {report.lines:>10,} lines  {report.lines / parse_s:>12,.0f} "
              f"lines/s   preprocess {len(table) / prep_s:>12,.0f} req/s")
    if sized:
        n, name, work = max(sized, key=lambda x: x[0])
        secs = best_of(lambda: replay(work, model), 3 if quick else 5)
        out["replay_real_req_per_s"] = n / secs
        out["replay_real_trace"] = name  # type: ignore[assignment]
        out["replay_real_requests"] = float(n)
        print(f"replay  {name:24s} {n:>10,} requests {n / secs:>12,.0f} req/s "
              f"({n / secs / TARGET_REQ_PER_S:.2f} x target)")
    n_req = 1e6 if quick else 1e7
    params = scaled(LCS_LIKE, n_req / LCS_LIKE.expected_requests)
    t = time.perf_counter()
    synth = generate(replace(params, seed=7), progress=True)
    gen_s = time.perf_counter() - t
    secs = best_of(lambda: replay(synth, model), 1 if not quick else 2)
    out["synthetic_requests"] = float(len(synth))
    out["synthetic_generate_req_per_s"] = len(synth) / gen_s
    out["replay_synthetic_req_per_s"] = len(synth) / secs
    month = len(synth) / params.days * 30
    print(f"generate synthetic-lcs          {len(synth):>10,} requests "
          f"{len(synth) / gen_s:>12,.0f} req/s")
    print(f"replay  synthetic-lcs          {len(synth):>10,} requests "
          f"{len(synth) / secs:>12,.0f} req/s ({len(synth) / secs / TARGET_REQ_PER_S:.2f} x "
          f"target); a month ({month:,.0f} requests) replays in {month / (len(synth) / secs):.2f} s")
    return out


def trivial_rate(n: int) -> float:
    env = CountingEnvironment()

    def proc(env: simpy.Environment):  # type: ignore[no-untyped-def]
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc(env))
    t = time.perf_counter()
    env.run()
    return env.events / (time.perf_counter() - t)


def tcp_rate(nbytes: int, flows: int) -> tuple[float, int]:
    env = CountingEnvironment()
    up = Link(env, ADSL_UP)
    down = Link(env, ADSL_DOWN)
    conns = [TcpConnection(env, (up,), (down,)) for _ in range(flows)]
    for c in conns:
        c.a.send(nbytes)
    t = time.perf_counter()
    env.run()
    return env.events / (time.perf_counter() - t), env.events


def bench_simpy(quick: bool) -> dict[str, float]:
    n = 50_000 if quick else 300_000
    raw = max(trivial_rate(n) for _ in range(3))
    one, ev1 = max(tcp_rate(1_000_000 if quick else 5_000_000, 1) for _ in range(3))
    two, ev2 = max(tcp_rate(500_000 if quick else 2_500_000, 2) for _ in range(3))
    print(f"simpy   trivial model (timeouts)   {raw:>12,.0f} events/s")
    print(f"simpy   TCP over ADSL, 1 flow      {one:>12,.0f} events/s ({ev1:,} events; "
          f"{one / raw:.2f} x trivial)")
    print(f"simpy   TCP over ADSL, 2 flows     {two:>12,.0f} events/s ({ev2:,} events; "
          f"{two / raw:.2f} x trivial)")
    return {"simpy_trivial_events_per_s": raw, "simpy_tcp_events_per_s": one,
            "simpy_tcp2_events_per_s": two, "simpy_tcp_vs_trivial": one / raw}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="10^6 synthetic requests, fewer runs")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = ap.parse_args(argv)
    if not available_traces():
        raise SystemExit(f"{BENCH}: no usable access-log trace found (bundled under traces/ or in TRACES_DIR);"
                         " see traces/README.md")
    results = {**bench_replay(args.quick), **bench_simpy(args.quick)}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
