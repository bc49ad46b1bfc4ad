"""Benchmark the SSLACC model: the quick Figure 28/29 sweep in process and on 1 vs 2 Dask workers.

The sweep is :func:`sslacc_sim.experiments.fig28_29` at quick size: 7 cluster sizes x 2 cards
(200 and 600 RSA/s) x 3 lines ("norm", "proj", "agg"), 42 points, each a SimPy run of real
``tls12`` handshakes (:mod:`sslacc_sim.load`).  Prints, for the same run and machine,

1. the wall time of the in-process sweep (the reference; issue 11 asks for under 60 s) and the
   simulated connections per wall second (every connection the load generator opened, all
   points together, over that wall time);
2. the same sweep on a LocalCluster of 1 Dask worker, then of 2 (:func:`netsim.sweep.sweep`;
   the time includes starting and stopping the cluster, as ``--scheduler local`` would), and
   the speedups 2 workers vs 1 and vs in process.

Each Dask table is checked equal to the in-process one before any time is reported.  The
handshake rates themselves are *modelled* (see :mod:`sslacc_sim.experiments`); only the wall
times here are measurements, noisy on a shared machine.

Usage::

    python benchmarks/bench_sslacc.py
    python benchmarks/bench_sslacc.py --no-dask            # in-process sweep only
    python benchmarks/bench_sslacc.py --json results/benchmarks/sslacc.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import timed  # noqa: E402

from sslacc_sim import experiments as ex  # noqa: E402

BENCH = "bench_sslacc"
#: Columns that must agree between the in-process and the Dask runs.
COMPARED = ["nodes", "card", "variant", "handshakes_per_s", "completed", "started"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-dask", action="store_true", help="only the in-process sweep")
    ap.add_argument("--cpu-scale", type=float, default=1.0,
                    help="multiply the measured CPU costs (default 1; the paper-era clock "
                         f"ratio is {ex.PAPER_CPU_SCALE:g})")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    if args.cpu_scale <= 0:
        ap.error(f"--cpu-scale must be positive, got {args.cpu_scale}")

    def run(scheduler: str, workers: int | None) -> pd.DataFrame:
        return ex.fig28_29(quick=True, cpu_scale=args.cpu_scale, scheduler=scheduler,
                           workers=workers)

    ref, t_serial = timed(lambda: run("serial", None))
    connections = int(ref["started"].sum())
    result: dict[str, object] = {
        "sweep": "sslacc_sim fig28_29 (quick)", "points": int(len(ref)),
        "variants": sorted(set(ref["variant"])), "cpu_scale": args.cpu_scale,
        "cpus": os.cpu_count(), "in_process_s": t_serial,
        "simulated_connections": connections,
        "connections_per_wall_s": connections / t_serial,
    }
    print(f"{BENCH}: Figure 28/29 sweep, {len(ref)} points, {os.cpu_count()} CPUs "
          f"(rates modelled, wall times measured)")
    print(f"  in process        {t_serial:8.2f} s  ({connections} simulated connections, "
          f"{connections / t_serial:.0f} per wall second)")
    if not args.no_dask:
        one, t_one = timed(lambda: run("local", 1))
        two, t_two = timed(lambda: run("local", 2))
        pd.testing.assert_frame_equal(ref[COMPARED], one[COMPARED])
        pd.testing.assert_frame_equal(ref[COMPARED], two[COMPARED])
        result.update({"dask_1_worker_s": t_one, "dask_2_workers_s": t_two,
                       "speedup_2_vs_1": t_one / t_two,
                       "speedup_2_vs_in_process": t_serial / t_two})
        print(f"  Dask, 1 worker    {t_one:8.2f} s")
        print(f"  Dask, 2 workers   {t_two:8.2f} s")
        print(f"  speedup 2 vs 1 worker: {t_one / t_two:.2f}x; "
              f"2 workers vs in process: {t_serial / t_two:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
