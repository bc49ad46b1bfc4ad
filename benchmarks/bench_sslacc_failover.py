"""Real SSLACC failover on Linux: time from the cut to the client's next byte, per point.

For each point of :data:`sslacc_sim.linux.node.POINTS` (two handshake points, one between
body segments, one in the middle of a record), ``curl`` downloads a 16 MiB file over
``AES128-SHA`` from node A's :mod:`tls12` server in a network namespace; A is cut off
(``ip link set eth0 down``) and SIGKILLed; node B restores the TCP connection with
``TCP_REPAIR`` and the TLS state from the mirror and finishes the download
(:func:`sslacc_sim.linux.failover.run_failover`; every run checks curl's exit status and the
file's SHA-256). Two takeover variants:

``rebase``
    B asks the client for its ACK (the window probe) and restores the socket again at exactly
    that ACK, so the bytes the client lacks go out at once (the default of the node);
``timer``
    B leaves the resend to its kernel: a restored socket has no RTT sample, so unless the
    probe's answer moves the window its first retransmission waits Linux's initial RTO (1 s).

Reported per point and variant (medians over ``--repeat`` runs, seconds, measured):
``restored_s`` (cut to B's socket running), ``next_byte_s`` (cut to the first segment the
client receives after it) and ``next_new_byte_s`` (cut to the first byte the client had not
had), and the reference measured in the same run: the same download without a failure, whose
duration the failed-over downloads are compared with (``slowdown``).

Needs root, iproute2 and curl; without them it stops with one line and exit status 1.

Usage::

    python benchmarks/bench_sslacc_failover.py                      # 4 points x 2 variants x 3
    python benchmarks/bench_sslacc_failover.py --repeat 1 --json results/benchmarks/sacc.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import fail, require_c_extension, require_tools  # noqa: E402

BENCH = "bench_sslacc_failover"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def main(argv: list[str] | None = None) -> int:
    from sslacc_sim.linux.node import POINTS

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", nargs="+", choices=POINTS, default=list(POINTS))
    ap.add_argument("--repeat", type=int, default=3, help="runs per point and variant")
    ap.add_argument("--size", type=int, default=16 << 20, help="bytes to download")
    ap.add_argument("--suite", default="AES128-SHA", help="the CBC suite (OpenSSL name)")
    ap.add_argument("--variants", nargs="+", choices=("rebase", "timer"),
                    default=["rebase", "timer"])
    ap.add_argument("--json", type=Path, help="also write the runs and medians as JSON here")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    from netsim.linktestbed import NamespacesUnavailable, check_available

    require_tools(BENCH, {"curl": "curl", "ip": "iproute2"})
    require_c_extension(BENCH)
    try:
        check_available()
    except NamespacesUnavailable as exc:
        fail(BENCH, str(exc))

    from sslacc_sim.linux.failover import measure_failover

    baseline = measure_failover((None,), repeat=args.repeat, size=args.size, suite=args.suite)
    reference_s = statistics.median(baseline["download_s"])
    frames = [baseline]
    summary = []
    print(f"{'point':28} {'variant':7} {'restored_s':>10} {'next_byte_s':>11} "
          f"{'next_new_byte_s':>15} {'slowdown':>8}")  # fmt: skip
    for variant in args.variants:
        df = measure_failover(tuple(args.points), repeat=args.repeat, size=args.size,
                              suite=args.suite, resume_at_ack=variant == "rebase")  # fmt: skip
        frames.append(df)
        for point in args.points:
            rows = df[df["point"] == point]
            row = {
                "point": point, "variant": variant, "runs": len(rows),
                "restored_s": _median(list(rows["restored_s"])),
                "next_byte_s": _median(list(rows["next_segment_s"])),
                "next_new_byte_s": _median(list(rows["next_new_byte_s"])),
                "download_s": statistics.median(rows["download_s"]),
                "slowdown": statistics.median(rows["download_s"]) / reference_s,
            }  # fmt: skip
            summary.append(row)
            cells = [f"{row[k]:.4f}" if row[k] is not None else "-"
                     for k in ("restored_s", "next_byte_s", "next_new_byte_s")]
            print(f"{point:28} {variant:7} {cells[0]:>10} {cells[1]:>11} {cells[2]:>15} "
                  f"{row['slowdown']:>7.2f}x")  # fmt: skip
    print(f"reference: the same download without a failure, median {reference_s:.3f} s "
          "(curl's time_total); slowdown = curl's time_total with the failover / reference")
    if args.json:
        import pandas as pd

        runs = pd.concat(frames, ignore_index=True)
        doc = {"config": {"size": args.size, "suite": args.suite, "repeat": args.repeat},
               "reference_s": reference_s, "medians": summary,
               "runs": json.loads(runs.to_json(orient="records"))}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
