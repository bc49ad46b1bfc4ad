"""Benchmark the Barnraising SimPy model: one trace day with 10^4 volunteers.

Prints, for the same run and machine:

1. wall-clock seconds to simulate one full day of a bundled real trace (EPA-HTTP, 35,291
   requests; with ``--flash`` also the WorldCup98 day-6 sample, 173,924 requests) with
   10^4 volunteers, 5 % malicious, churn on; the target is < 120 s;
2. the same day against the **origin alone** (no volunteers: one fluid queue), the reference
   measured in the same run, and the ratio of the two -- what the volunteers, the churn and
   the shared cache cost on top of replaying the trace;
3. simulated requests per wall-clock second.

Usage::

    python benchmarks/bench_barnraising_model.py [--quick] [--flash] [--json PATH]

``--quick`` simulates 10^3 volunteers instead of 10^4. A missing trace stops the benchmark with
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10^3 volunteers instead of 10^4")
    parser.add_argument("--flash", action="store_true", help="also the WorldCup98 sample day")
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
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    return 0 if all(r["seconds"] < TARGET_S for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
