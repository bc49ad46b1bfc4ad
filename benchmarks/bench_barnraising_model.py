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
   of 2 worker processes (:func:`testbed.sweep.sweep`), the speedup 1 -> 2 workers, and the
   in-process serial run as the reference (what the cluster's start-up and the shipping of the
   trace cost); each timed once with the cluster's start-up (``--scheduler local``) and once
   on a cluster already running (its scheduler address); every table is checked equal to the
   serial one.  The speedup is bounded by the longest
   point (the 10^4-volunteer runs) and by the cores actually free.

Usage::

    python benchmarks/bench_barnraising_model.py [--quick] [--flash] [--json PATH]
        [--sweep [--sweep-json PATH]]

Every wall time is measured ``--repeats`` times (default 5), model and reference interleaved,
and printed as ``median (min–max, n)``; the < 120 s target counts as met only when the median
is below it.  The JSON is ``{"days": [one entry per trace], "repeats": n, "wall_s": ...}``.

``--quick`` simulates 10^3 volunteers instead of 10^4 (and the sweep's quick size: three
hours, 10 to 10^3 volunteers). A missing trace stops the benchmark with
status 1 and one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from _common import Repeated, add_repeats_option, fail, rounds, workers_that_ran, write_json  # noqa: E402

from sslsplit.barnraising.experiments import scale_sweep  # noqa: E402
from sslsplit.barnraising.model_site import calibrate, simulate  # noqa: E402
from testbed.traces.catalogue import TraceError, load_workload  # noqa: E402

BENCH = "bench_barnraising_model"
TARGET_S = 120.0


def _time_day(name: str, volunteers: int, repeats: int) -> dict[str, Any]:
    """The day with ``volunteers`` and the origin alone, ``repeats`` interleaved pairs (origin first)."""
    try:
        work = load_workload(name)
    except TraceError as exc:
        fail(BENCH, f"{name}: {exc}")
    last: list[Any] = []

    def model() -> float:
        t = time.perf_counter()
        last[:] = [simulate(work, calibrate(volunteers=volunteers, malicious_fraction=0.05))]
        return time.perf_counter() - t

    def origin_alone() -> float:
        t = time.perf_counter()
        simulate(work, calibrate(barnraising=False))
        return time.perf_counter() - t

    got = rounds({"reference": origin_alone, "model": model}, repeats)
    sec, ref = Repeated.of(got["model"]), Repeated.of(got["reference"])
    res = last[0]
    return {
        "trace": name, "requests": len(work), "volunteers": volunteers,
        "simulated_hours": res.span_s / 3600.0, "seconds": sec.to_json(),
        "reference_origin_alone_s": ref.to_json(), "ratio_to_reference": sec.over(ref).to_json(),
        "requests_per_s": sec.map(lambda t: len(work) / t).to_json(),
        "ratio_to_target": sec.map(lambda t: TARGET_S / t).to_json(),
        "target_met": sec.median < TARGET_S, "evictions": len(res.evictions),
    }


def _time_sweep(quick: bool, repeats: int) -> dict[str, Any]:
    """Wall seconds of the scale sweep in process, and on 1 and 2 Dask workers: with the
    cluster's start-up (``scheduler="local"``, what a user sees) and on a running cluster;
    ``repeats`` interleaved rounds (serial, 1 worker cold and warm, 2 workers cold and warm)."""
    from distributed import LocalCluster

    tables: dict[str, Any] = {}
    ran_on: dict[str, int] = {}

    def serial() -> float:
        t = time.perf_counter()
        tables["serial"] = scale_sweep(quick)
        return time.perf_counter() - t

    def cold(n: int) -> float:
        t = time.perf_counter()
        table = scale_sweep(quick, scheduler="local", workers=n)
        seconds = time.perf_counter() - t
        if not table.equals(tables["serial"]):
            fail(BENCH, f"the sweep on {n} Dask worker(s) differs from the serial run")
        ran_on[f"{n}_workers"] = workers_that_ran(BENCH, table, n)
        return seconds

    def warm(n: int) -> float:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            t = time.perf_counter()
            table = scale_sweep(quick, scheduler=cluster.scheduler_address)
            seconds = time.perf_counter() - t
        if not table.equals(tables["serial"]):
            fail(BENCH, f"the sweep on a running {n}-worker cluster differs from the serial run")
        ran_on[f"{n}_workers_running_cluster"] = workers_that_ran(BENCH, table, n)
        return seconds

    got = {k: Repeated.of(v) for k, v in rounds({
        "sweep_serial_s": serial,
        "sweep_1_worker_s": lambda: cold(1), "sweep_1_worker_running_cluster_s": lambda: warm(1),
        "sweep_2_workers_s": lambda: cold(2), "sweep_2_workers_running_cluster_s": lambda: warm(2),
    }, repeats).items()}
    out: dict[str, Any] = {"sweep_quick": quick, "sweep_points": len(tables["serial"]),
                           "sweep_workers_that_ran_points": ran_on}
    out.update({k: v.to_json() for k, v in got.items()})
    out["sweep_speedup_1_to_2_workers"] = got["sweep_1_worker_s"].over(got["sweep_2_workers_s"]).to_json()
    out["sweep_speedup_1_to_2_workers_running_cluster"] = got["sweep_1_worker_running_cluster_s"].over(
        got["sweep_2_workers_running_cluster_s"]).to_json()
    return out


def _text(figure: Any, spec: str = ".2f") -> str:
    return Repeated.of(figure["repeats"]).text(spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10^3 volunteers instead of 10^4")
    parser.add_argument("--flash", action="store_true", help="also the WorldCup98 sample day")
    parser.add_argument("--sweep", action="store_true",
                        help="also time the volunteer-count sweep on 1 vs 2 Dask workers")
    add_repeats_option(parser)
    parser.add_argument("--sweep-json", type=Path, help="write the sweep's numbers here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    volunteers = 1_000 if args.quick else 10_000
    names = ["EPA-HTTP"] + (["WorldCup98-day6-sample"] if args.flash else [])
    out = [_time_day(name, volunteers, args.repeats) for name in names]
    print(f"median (min–max, n) of {args.repeats} interleaved repeats (wall times measured)")
    for r in out:
        print(f"{r['trace']}: {r['requests']} requests over {r['simulated_hours']:.1f} h, "
              f"{r['volunteers']} volunteers: {_text(r['seconds'])} s "
              f"(target < {TARGET_S:.0f} s for the median: {'met' if r['target_met'] else 'NOT met'}); "
              f"origin alone {_text(r['reference_origin_alone_s'])} s, ratio {_text(r['ratio_to_reference'], '.1f')}; "
              f"{_text(r['requests_per_s'], ',.0f')} requests/s; {r['evictions']} evictions")
    days_wall = time.perf_counter() - began
    sweep = _time_sweep(args.quick, args.repeats) if args.sweep else None
    if sweep is not None:
        print(f"scale sweep ({sweep['sweep_points']} points, "
              f"{'quick' if args.quick else 'full'} size): serial {_text(sweep['sweep_serial_s'])} s; "
              f"Dask 1 worker {_text(sweep['sweep_1_worker_s'])} s, 2 workers "
              f"{_text(sweep['sweep_2_workers_s'])} s: speedup "
              f"{_text(sweep['sweep_speedup_1_to_2_workers'])} (cluster start-up included); on a "
              f"running cluster {_text(sweep['sweep_1_worker_running_cluster_s'])} s vs "
              f"{_text(sweep['sweep_2_workers_running_cluster_s'])} s: speedup "
              f"{_text(sweep['sweep_speedup_1_to_2_workers_running_cluster'])} (tables equal)")
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, {"days": out}, repeats=args.repeats, wall_s=days_wall)
    if sweep is not None and args.sweep_json:
        write_json(args.sweep_json, sweep, repeats=args.repeats, wall_s=wall - days_wall)
    return 0 if all(r["target_met"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
