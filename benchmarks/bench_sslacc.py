"""Benchmark the SSLACC model: the quick Figure 28/29 sweep in process and on 1 vs 2 Dask workers.

The sweep is :func:`sslacc_sim.experiments.fig28_29` at quick size: 7 cluster sizes x 2 cards
(200 and 600 RSA/s) x 3 lines ("norm", "proj", "agg"), 42 points, each a SimPy run of real
``tls12`` handshakes (:mod:`sslacc_sim.model_load`).  Prints, for the same run and machine,

1. the wall time of the in-process sweep (the reference; issue 11 asks for under 60 s) and the
   simulated connections per wall second (every connection the load generator opened, all
   points together, over that wall time);
2. the same sweep on a LocalCluster of 1 Dask worker, then of 2 (:func:`testbed.sweep.sweep`;
   the time includes starting and stopping the cluster, as ``--scheduler local`` would), and
   the speedups 2 workers vs 1 and vs in process.

The runs are repeated ``--repeats`` times (default 5), interleaved (in process, 1 worker,
2 workers, again), and each time and speedup prints as ``median (min–max, n)``; the < 60 s
target counts as met only when the median is below it.  Each Dask table is checked equal to the in-process one before any time is reported.  The
handshake rates themselves are *modelled* (see :mod:`sslacc_sim.experiments`); only the wall
times here are measurements, noisy on a shared machine.

Usage::

    python benchmarks/bench_sslacc.py
    python benchmarks/bench_sslacc.py --no-dask            # in-process sweep only
    python benchmarks/bench_sslacc.py --json results/benchmarks/sslacc.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, rounds, timed, workers_that_ran, write_json  # noqa: E402

from sslacc_sim import experiments as ex  # noqa: E402

BENCH = "bench_sslacc"
TARGET_S = 60.0
"""The in-process quick sweep's wall-time target (met when the median of the repeats is below it)."""
#: Columns that must agree between the in-process and the Dask runs.
COMPARED = ["nodes", "card", "variant", "handshakes_per_s", "completed", "started"]


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--no-dask``, ``--cpu-scale``, ``--json``, ``--repeats``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-dask", action="store_true", help="only the in-process sweep")
    ap.add_argument("--cpu-scale", type=float, default=1.0,
                    help="multiply the measured CPU costs (default 1; the paper-era clock "
                         f"ratio is {ex.PAPER_CPU_SCALE:g})")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    add_repeats_option(ap)
    return ap


def measure(args: argparse.Namespace) -> tuple[dict[str, Repeated], pd.DataFrame, dict[str, int]]:
    """Interleaved rounds (in process, 1 worker, 2 workers, again): wall seconds per sweep.

    Returns the repeated times, the in-process table and, per Dask run, how
    many workers computed points.  Every Dask table must equal the in-process
    one (:data:`COMPARED` columns), or the run stops with an ``AssertionError``.
    """

    def run(scheduler: str, workers: int | None) -> pd.DataFrame:
        return ex.fig28_29(quick=True, cpu_scale=args.cpu_scale, scheduler=scheduler,
                           workers=workers)

    tables: dict[str, pd.DataFrame] = {}
    ran_on: dict[str, int] = {}

    def timed_run(key: str, scheduler: str, workers: int | None) -> float:
        tables[key], seconds = timed(lambda: run(scheduler, workers))
        if key != "serial":
            pd.testing.assert_frame_equal(tables["serial"][COMPARED], tables[key][COMPARED])
        if workers:
            ran_on[key] = workers_that_ran(BENCH, tables[key], workers)
        return seconds

    steps = {"serial": lambda: timed_run("serial", "serial", None)}
    if not args.no_dask:
        steps.update({"one": lambda: timed_run("one", "local", 1), "two": lambda: timed_run("two", "local", 2)})
    got = {k: Repeated.of(v) for k, v in rounds(steps, args.repeats).items()}  # serial, 1, 2 workers, again
    return got, tables["serial"], ran_on


def report_dask(got: dict[str, Repeated], result: dict[str, object]) -> None:
    """Add the 1- and 2-worker times and the speedups to ``result``; print them."""
    t_serial, t_one, t_two = got["serial"], got["one"], got["two"]
    result.update({"dask_1_worker_s": t_one.to_json(), "dask_2_workers_s": t_two.to_json(),
                   "speedup_2_vs_1": t_one.over(t_two).to_json(),
                   "speedup_2_vs_in_process": t_serial.over(t_two).to_json()})
    print(f"  Dask, 1 worker    {t_one.text()} s")
    print(f"  Dask, 2 workers   {t_two.text()} s")
    print(f"  speedup 2 vs 1 worker: {t_one.over(t_two).text()}x; "
          f"2 workers vs in process: {t_serial.over(t_two).text()}x")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    began = time.perf_counter()
    if args.cpu_scale <= 0:
        ap.error(f"--cpu-scale must be positive, got {args.cpu_scale}")

    got, ref, ran_on = measure(args)
    t_serial = got["serial"]
    connections = int(ref["started"].sum())
    per_wall = t_serial.map(lambda t: connections / t)
    result: dict[str, object] = {
        "sweep": "sslacc_sim fig28_29 (quick)", "points": int(len(ref)),
        "variants": sorted(set(ref["variant"])), "cpu_scale": args.cpu_scale,
        "cpus": os.cpu_count(), "in_process_s": t_serial.to_json(),
        "simulated_connections": connections,
        "connections_per_wall_s": per_wall.to_json(),
        "target_s": TARGET_S, "target_met": t_serial.median < TARGET_S,
        "workers_that_ran_points": ran_on,
    }
    print(f"{BENCH}: Figure 28/29 sweep, {len(ref)} points, {os.cpu_count()} CPUs "
          f"(rates modelled, wall times measured); median (min–max, n) of {args.repeats} interleaved repeats")
    print(f"  in process        {t_serial.text()} s  ({connections} simulated connections, "
          f"{per_wall.text('.0f')} per wall second)")
    if not args.no_dask:
        report_dask(got, result)
    wall = time.perf_counter() - began
    print(f"  wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, result, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
