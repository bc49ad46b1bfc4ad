"""Benchmark the trace pipeline and the SimPy network models.

Prints, for the same run and machine:

1. cost-model replay throughput (requests/s) on the largest available real trace and on a
   synthetic ``www.lcs``-like trace of 10^7 requests (target: >= 10^6 requests/s, i.e. a
   month-long trace in seconds); generation and parsing speeds are printed alongside;
2. SimPy events per second of the TCP/link model (a 1 MB transfer over the ADSL preset, and
   two competing flows), next to the raw SimPy event rate of a trivial model (one process
   yielding timeouts) measured in the same run, and their ratio.

Each rate is measured ``--repeats`` times (default 5; the SimPy models interleaved, trivial
first) and printed as ``median (min–max, n)``.

Usage::

    python benchmarks/bench_traces.py            # full: 10^7 synthetic requests
    python benchmarks/bench_traces.py --quick    # 10^6 requests, fewer repetitions
    python benchmarks/bench_traces.py --json results/bench_traces.json

The references (a trivial SimPy model, the cost model's own speed) run in the
same process and cannot be missing; the real trace can: without any usable
trace (the bundled samples under ``testbed/traces/bundled/`` or ``TRACES_DIR``) the benchmark
exits with status 1 and one line instead of replaying only the synthetic one.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, rounds, write_json  # noqa: E402

from netsim.link import Link  # noqa: E402
from netsim.tcp import TcpConnection  # noqa: E402
from sslsplit.costmodel import paper_model  # noqa: E402
from sslsplit.experiments.traces import available_traces  # noqa: E402
from sslsplit.params import ADSL_DOWN, ADSL_UP  # noqa: E402
from sslsplit.replay import replay  # noqa: E402
from sslsplit.synth import LCS_LIKE, generate, scaled  # noqa: E402
from testbed.traces.catalogue import load_trace  # noqa: E402
from testbed.traces.workload import preprocess  # noqa: E402

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


def rates(fn: Callable[[], object], count: float, repeats: int) -> Repeated:
    """``count`` / wall seconds of each of ``repeats`` calls of ``fn`` (per second, measured)."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(count / (time.perf_counter() - t))
    return Repeated.of(out)


def bench_replay(quick: bool, repeats: int) -> dict[str, object]:
    model = paper_model()
    out: dict[str, object] = {}
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
        real = rates(lambda: replay(work, model), n, repeats)
        out["replay_real_req_per_s"] = real.to_json()
        out["replay_real_trace"] = name
        out["replay_real_requests"] = float(n)
        print(f"replay  {name:24s} {n:>10,} requests {real.text(',.0f')} req/s "
              f"({real.median / TARGET_REQ_PER_S:.2f} x target, median)")
    n_req = 1e6 if quick else 1e7
    params = scaled(LCS_LIKE, n_req / LCS_LIKE.expected_requests)
    t = time.perf_counter()
    synth = generate(replace(params, seed=7), progress=True)
    gen_s = time.perf_counter() - t
    synthetic = rates(lambda: replay(synth, model), len(synth), repeats)
    secs = len(synth) / synthetic.median
    out["synthetic_requests"] = float(len(synth))
    out["synthetic_generate_req_per_s"] = len(synth) / gen_s
    out["replay_synthetic_req_per_s"] = synthetic.to_json()
    month = len(synth) / params.days * 30
    print(f"generate synthetic-lcs          {len(synth):>10,} requests "
          f"{len(synth) / gen_s:>12,.0f} req/s")
    print(f"replay  synthetic-lcs          {len(synth):>10,} requests "
          f"{synthetic.text(',.0f')} req/s ({synthetic.median / TARGET_REQ_PER_S:.2f} x "
          f"target, median); a month ({month:,.0f} requests) replays in {month / (len(synth) / secs):.2f} s")
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


def bench_simpy(quick: bool, repeats: int) -> dict[str, object]:
    n = 50_000 if quick else 300_000
    events: dict[str, int] = {}

    def tcp(nbytes: int, flows: int, key: str) -> float:
        rate, events[key] = tcp_rate(nbytes, flows)
        return rate

    got = rounds({  # trivial, 1 flow, 2 flows, trivial, ...: each ratio pairs runs of one round
        "trivial": lambda: trivial_rate(n),
        "tcp1": lambda: tcp(1_000_000 if quick else 5_000_000, 1, "tcp1"),
        "tcp2": lambda: tcp(500_000 if quick else 2_500_000, 2, "tcp2"),
    }, repeats)
    raw, one, two = (Repeated.of(got[k]) for k in ("trivial", "tcp1", "tcp2"))
    print(f"simpy   trivial model (timeouts)   {raw.text(',.0f')} events/s")
    print(f"simpy   TCP over ADSL, 1 flow      {one.text(',.0f')} events/s ({events['tcp1']:,} events; "
          f"{one.over(raw).text()} x trivial)")
    print(f"simpy   TCP over ADSL, 2 flows     {two.text(',.0f')} events/s ({events['tcp2']:,} events; "
          f"{two.over(raw).text()} x trivial)")
    return {"simpy_trivial_events_per_s": raw.to_json(), "simpy_tcp_events_per_s": one.to_json(),
            "simpy_tcp2_events_per_s": two.to_json(), "simpy_tcp_vs_trivial": one.over(raw).to_json()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="10^6 synthetic requests, fewer runs")
    add_repeats_option(ap)
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = ap.parse_args(argv)
    began = time.perf_counter()
    if not available_traces():
        raise SystemExit(f"{BENCH}: no usable access-log trace found (bundled under testbed/traces/bundled/ or in TRACES_DIR);"
                         " see testbed/traces/bundled/README.md")
    results = {**bench_replay(args.quick, args.repeats), **bench_simpy(args.quick, args.repeats)}
    wall = time.perf_counter() - began
    print(f"median (min–max, n) of {args.repeats} repeats (measured); wall time {wall:.0f} s")
    if args.json:
        write_json(Path(args.json), results, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
