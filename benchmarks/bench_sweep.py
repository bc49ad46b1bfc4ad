"""Benchmark the sweep helper: the month-long trace replay split by day on 1 vs 2 Dask workers.

The representative sweep is :func:`sslsplit.experiments.traces.two_weeks_warmth` on a
synthetic ``www.lcs``-like trace: one independent cost-model replay per daytime chunk, each
behind a cache preloaded with the two weeks before it. Prints, for the same run and machine,
the wall time of

1. the in-process loop (the reference, ``scheduler=None``);
2. the same sweep on a LocalCluster of 1 Dask worker, then of 2 workers
   (:func:`testbed.sweep.sweep`; the time includes starting and stopping the cluster and
   sending the trace to the workers, as a user of ``--scheduler local`` would see it);

and the speedups 2 workers vs 1 and 2 workers vs in process. Each run's table is checked
equal to the in-process one before any time is reported. With 2 cores and 2 workers the
ideal speedup is 2; cluster start-up (about a second or two) and shipping the trace bound it
for short sweeps, hence the full size.  The three runs are repeated ``--repeats`` times
(default 5), interleaved (in process, 1 worker, 2 workers, again), and every time and speedup
prints as ``median (min–max, n)``; a speedup's repeat is one round's ratio.

Usage::

    python benchmarks/bench_sweep.py            # 90 days, up to 200 chunks
    python benchmarks/bench_sweep.py --quick    # 40 days, about 30 chunks
    python benchmarks/bench_sweep.py --json results/benchmarks/sweep.json

The Reverse SSL DoS sweep is not included: it runs inside :mod:`reverse_ssl.model_dos` and has not
been moved onto the sweep helper.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, rounds, timed, workers_that_ran, write_json  # noqa: E402

from sslsplit.experiments import traces as ex  # noqa: E402
from sslsplit.synth import LCS_LIKE, generate, scaled  # noqa: E402

BENCH = "bench_sweep"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace, fewer chunks")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    add_repeats_option(ap)
    args = ap.parse_args(argv)
    began = time.perf_counter()
    scale, days = (0.03, 40.0) if args.quick else (0.3, 90.0)
    works = {ex.SYNTHETIC: generate(replace(scaled(LCS_LIKE, scale), days=days))}
    quick = args.quick  # quick: ~30 chunks per trace, else ~200

    def run(scheduler: str | None, workers: int | None) -> pd.DataFrame:
        return ex.two_weeks_warmth(quick=quick, workloads=works, scheduler=scheduler,
                                   workers=workers)

    tables: dict[str, pd.DataFrame] = {}

    def timed_run(key: str, scheduler: str | None, workers: int | None) -> float:
        tables[key], seconds = timed(lambda: run(scheduler, workers))
        if "serial" in tables:
            pd.testing.assert_frame_equal(tables["serial"], tables[key])  # every run, before any time is used
        if workers:
            ran_on[key] = workers_that_ran(BENCH, tables[key], workers)
        return seconds

    ran_on: dict[str, int] = {}

    got = rounds({"serial": lambda: timed_run("serial", None, None),  # in process, 1, 2 workers, again
                  "one": lambda: timed_run("one", "local", 1),
                  "two": lambda: timed_run("two", "local", 2)}, args.repeats)
    t_serial, t_one, t_two = (Repeated.of(got[k]) for k in ("serial", "one", "two"))
    wall = time.perf_counter() - began
    result = {
        "sweep": "sslsplit two_weeks_warmth (trace replay by day)",
        "requests": int(len(works[ex.SYNTHETIC])), "days": days, "chunks": int(len(tables["serial"])),
        "cpus": os.cpu_count(), "in_process_s": t_serial.to_json(), "dask_1_worker_s": t_one.to_json(),
        "dask_2_workers_s": t_two.to_json(), "speedup_2_vs_1": t_one.over(t_two).to_json(),
        "speedup_2_vs_in_process": t_serial.over(t_two).to_json(),
        "workers_that_ran_points": ran_on,
    }
    print(f"{BENCH}: {result['chunks']} chunks of a {days:.0f}-day trace "
          f"({result['requests']:,} requests), {os.cpu_count()} CPUs; median (min–max, n) of "
          f"{args.repeats} interleaved repeats (measured)")
    print(f"  in process        {t_serial.text()} s")
    print(f"  Dask, 1 worker    {t_one.text()} s")
    print(f"  Dask, 2 workers   {t_two.text()} s")
    print(f"  speedup 2 vs 1 worker: {t_one.over(t_two).text()}x; "
          f"2 workers vs in process: {t_serial.over(t_two).text()}x; wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, result, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
