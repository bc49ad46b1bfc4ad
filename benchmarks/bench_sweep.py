"""Benchmark the sweep helper: the month-long trace replay split by day on 1 vs 2 Dask workers.

The representative sweep is :func:`sslsplit.trace_experiments.two_weeks_warmth` on a
synthetic ``www.lcs``-like trace: one independent cost-model replay per daytime chunk, each
behind a cache preloaded with the two weeks before it. Prints, for the same run and machine,
the wall time of

1. the in-process loop (the reference, ``scheduler=None``);
2. the same sweep on a LocalCluster of 1 Dask worker, then of 2 workers
   (:func:`netsim.sweep.sweep`; the time includes starting and stopping the cluster and
   sending the trace to the workers, as a user of ``--scheduler local`` would see it);

and the speedups 2 workers vs 1 and 2 workers vs in process. Each run's table is checked
equal to the in-process one before any time is reported. With 2 cores and 2 workers the
ideal speedup is 2; cluster start-up (about a second or two) and shipping the trace bound it
for short sweeps, hence the full size.

Usage::

    python benchmarks/bench_sweep.py            # 90 days, up to 200 chunks
    python benchmarks/bench_sweep.py --quick    # 40 days, about 30 chunks
    python benchmarks/bench_sweep.py --json results/benchmarks/sweep.json

The Reverse SSL DoS sweep is not included: it runs inside :mod:`reverse_ssl.dos` and has not
been moved onto the sweep helper.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import timed  # noqa: E402

from netsim.synth import LCS_LIKE, generate, scaled  # noqa: E402
from sslsplit import trace_experiments as ex  # noqa: E402

BENCH = "bench_sweep"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace, fewer chunks")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    scale, days = (0.03, 40.0) if args.quick else (0.3, 90.0)
    works = {ex.SYNTHETIC: generate(replace(scaled(LCS_LIKE, scale), days=days))}
    quick = args.quick  # quick: ~30 chunks per trace, else ~200

    def run(scheduler: str | None, workers: int | None) -> pd.DataFrame:
        return ex.two_weeks_warmth(quick=quick, workloads=works, scheduler=scheduler,
                                   workers=workers)

    ref, t_serial = timed(lambda: run(None, None))
    one, t_one = timed(lambda: run("local", 1))
    two, t_two = timed(lambda: run("local", 2))
    pd.testing.assert_frame_equal(ref, one)
    pd.testing.assert_frame_equal(ref, two)

    result = {
        "sweep": "sslsplit two_weeks_warmth (trace replay by day)",
        "requests": int(len(works[ex.SYNTHETIC])), "days": days, "chunks": int(len(ref)),
        "cpus": os.cpu_count(), "in_process_s": t_serial, "dask_1_worker_s": t_one,
        "dask_2_workers_s": t_two, "speedup_2_vs_1": t_one / t_two,
        "speedup_2_vs_in_process": t_serial / t_two,
    }
    print(f"{BENCH}: {result['chunks']} chunks of a {days:.0f}-day trace "
          f"({result['requests']:,} requests), {os.cpu_count()} CPUs")
    print(f"  in process        {t_serial:8.2f} s")
    print(f"  Dask, 1 worker    {t_one:8.2f} s")
    print(f"  Dask, 2 workers   {t_two:8.2f} s")
    print(f"  speedup 2 vs 1 worker: {result['speedup_2_vs_1']:.2f}x; "
          f"2 workers vs in process: {result['speedup_2_vs_in_process']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
