"""Benchmark the Barnraising SimPy model: one trace day with 10^4 volunteers.

Prints, for the same run and machine:

1. wall-clock seconds to simulate one full day of a bundled real trace (EPA-HTTP, 35,291
   requests; with ``--flash`` also the WorldCup98 day-6 sample, 173,924 requests) with
   10^4 volunteers, 5 % malicious, churn on; the target is < 120 s;
2. the same day against the **origin alone** (no volunteers: one fluid queue), the reference
   measured in the same run, and the ratio of the two -- what the volunteers, the churn and
   the shared cache cost on top of replaying the trace;
3. simulated requests per wall-clock second;
4. with ``--sweep``: the wall time of the volunteer-count sweep
   (:func:`sslsplit.barnraising.experiments.scale_sweep`: origin alone, then 10 to 10^4
   volunteers with 0 % and 5 % malicious, one trace day each) on a Dask LocalCluster of 1 and
   of 2 worker processes (:func:`netsim.sweep.sweep`), the speedup 1 -> 2 workers, and the
   in-process serial run as the reference (what the cluster's start-up and the shipping of the
   trace cost); each timed once with the cluster's start-up (``--scheduler local``) and once
   on a cluster already running (its scheduler address); every table is checked equal to the
   serial one.  The speedup is bounded by the longest
   point (the 10^4-volunteer runs) and by the cores actually free.

Usage::

    python benchmarks/bench_barnraising_model.py [--quick] [--flash] [--json PATH]
        [--sweep [--sweep-json PATH]]

``--quick`` simulates 10^3 volunteers instead of 10^4 (and the sweep's quick size: three
hours, 10 to 10^3 volunteers). A missing trace stops the benchmark with
status 1 and one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from _common import fail  # noqa: E402

from netsim.traces import TraceError, load_workload  # noqa: E402
from sslsplit.barnraising.experiments import scale_sweep  # noqa: E402
from sslsplit.barnraising.model import calibrate, simulate  # noqa: E402

BENCH = "bench_barnraising_model"
TARGET_S = 120.0


def _time_day(name: str, volunteers: int) -> dict[str, Any]:
    try:
        work = load_workload(name)
    except TraceError as exc:
        fail(BENCH, f"{name}: {exc}")
    t = time.perf_counter()
    simulate(work, calibrate(barnraising=False))
    ref = time.perf_counter() - t
    t = time.perf_counter()
    res = simulate(work, calibrate(volunteers=volunteers, malicious_fraction=0.05))
    sec = time.perf_counter() - t
    return {
        "trace": name, "requests": len(work), "volunteers": volunteers,
        "simulated_hours": res.span_s / 3600.0, "seconds": sec,
        "reference_origin_alone_s": ref, "ratio_to_reference": sec / ref if ref else None,
        "requests_per_s": len(work) / sec, "ratio_to_target": TARGET_S / sec,
        "evictions": len(res.evictions),
    }


def _time_sweep(quick: bool) -> dict[str, Any]:
    """Wall seconds of the scale sweep in process, and on 1 and 2 Dask workers: with the
    cluster's start-up (``scheduler="local"``, what a user sees) and on a running cluster."""
    from distributed import LocalCluster

    out: dict[str, Any] = {"sweep_quick": quick}
    t = time.perf_counter()
    serial = scale_sweep(quick)
    out["sweep_serial_s"] = time.perf_counter() - t
    for n, label in ((1, "1_worker"), (2, "2_workers")):
        t = time.perf_counter()
        cold = scale_sweep(quick, scheduler="local", workers=n)
        out[f"sweep_{label}_s"] = time.perf_counter() - t
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            t = time.perf_counter()
            warm = scale_sweep(quick, scheduler=cluster.scheduler_address)
            out[f"sweep_{label}_running_cluster_s"] = time.perf_counter() - t
        for table in (cold, warm):
            if not table.equals(serial):
                fail(BENCH, f"the sweep on {n} Dask worker(s) differs from the serial run")
    out["sweep_points"] = len(serial)
    out["sweep_speedup_1_to_2_workers"] = out["sweep_1_worker_s"] / out["sweep_2_workers_s"]
    out["sweep_speedup_1_to_2_workers_running_cluster"] = (
        out["sweep_1_worker_running_cluster_s"] / out["sweep_2_workers_running_cluster_s"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10^3 volunteers instead of 10^4")
    parser.add_argument("--flash", action="store_true", help="also the WorldCup98 sample day")
    parser.add_argument("--sweep", action="store_true",
                        help="also time the volunteer-count sweep on 1 vs 2 Dask workers")
    parser.add_argument("--sweep-json", type=Path, help="write the sweep's numbers here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    volunteers = 1_000 if args.quick else 10_000
    names = ["EPA-HTTP"] + (["WorldCup98-day6-sample"] if args.flash else [])
    out = [_time_day(name, volunteers) for name in names]
    for r in out:
        print(f"{r['trace']}: {r['requests']} requests over {r['simulated_hours']:.1f} h, "
              f"{r['volunteers']} volunteers: {r['seconds']:.2f} s "
              f"(target < {TARGET_S:.0f} s, {r['ratio_to_target']:.0f}x under); origin alone "
              f"{r['reference_origin_alone_s']:.2f} s, ratio {r['ratio_to_reference']:.1f}; "
              f"{r['requests_per_s']:,.0f} requests/s; {r['evictions']} evictions")
    sweep = _time_sweep(args.quick) if args.sweep else None
    if sweep is not None:
        print(f"scale sweep ({sweep['sweep_points']} points, "
              f"{'quick' if args.quick else 'full'} size): serial {sweep['sweep_serial_s']:.1f} s; "
              f"Dask 1 worker {sweep['sweep_1_worker_s']:.1f} s, 2 workers "
              f"{sweep['sweep_2_workers_s']:.1f} s: speedup "
              f"{sweep['sweep_speedup_1_to_2_workers']:.2f} (cluster start-up included); on a "
              f"running cluster {sweep['sweep_1_worker_running_cluster_s']:.1f} s vs "
              f"{sweep['sweep_2_workers_running_cluster_s']:.1f} s: speedup "
              f"{sweep['sweep_speedup_1_to_2_workers_running_cluster']:.2f} (tables equal)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    if sweep is not None and args.sweep_json:
        args.sweep_json.parent.mkdir(parents=True, exist_ok=True)
        args.sweep_json.write_text(json.dumps(sweep, indent=2))
    return 0 if all(r["seconds"] < TARGET_S for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
