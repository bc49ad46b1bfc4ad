"""Real SSLACC failover on Linux: time from the cut to the client's next byte, per point.

For each point of :data:`sslacc_sim.aio.linux.node.POINTS` (two handshake points, one between
body segments, one in the middle of a record), ``curl`` downloads a 16 MiB file over
``AES128-SHA`` from node A's :mod:`tls12` server in a network namespace; A is cut off
(``ip link set eth0 down``) and SIGKILLed; node B restores the TCP connection with
``TCP_REPAIR`` and the TLS state from the mirror and finishes the download
(:func:`sslacc_sim.aio.linux.failover.run_failover`; every run checks curl's exit status and the
file's SHA-256). Two takeover variants:

``rebase``
    B asks the client for its ACK (the window probe) and restores the socket again at exactly
    that ACK, so the bytes the client lacks go out at once (the default of the node);
``timer``
    B leaves the resend to its kernel: a restored socket has no RTT sample, so unless the
    probe's answer moves the window its first retransmission waits Linux's initial RTO (1 s).

Reported per point and variant as ``median (min–max, n)`` over ``--repeats`` interleaved
rounds (default 5: the reference, then each variant at every point, again), seconds, measured:
``restored_s`` (cut to B's socket running), ``next_byte_s`` (cut to the first segment the
client receives after it) and ``next_new_byte_s`` (cut to the first byte the client had not
had), and the reference measured in the same run: the same download without a failure, whose
duration the failed-over downloads are compared with (``slowdown``, round by round).

Needs root, iproute2 and curl; without them it stops with one line and exit status 1.

Usage::

    python benchmarks/bench_sslacc_failover.py                      # 4 points x 2 variants x 5
    python benchmarks/bench_sslacc_failover.py --repeats 1 --json results/benchmarks/sacc.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402
    Repeated,
    fail,
    require_c_extension,
    require_tools,
    rounds,
    write_json,
)

BENCH = "bench_sslacc_failover"


def _repeated(values: list[Any]) -> Repeated | None:
    """The repeats that have a value (a run may lack one, e.g. no restore before the cut), or None."""
    present = [float(v) for v in values if v is not None and v == v]  # v == v: not NaN
    return Repeated.of(present) if present else None


def build_parser(points: tuple[str, ...]) -> argparse.ArgumentParser:
    """The command line: ``--points``, ``--repeats``, ``--size``, ``--suite``, ``--variants``, ``--json``."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", nargs="+", choices=points, default=list(points))
    ap.add_argument("--repeats", "--repeat", dest="repeat", type=int, default=5,
                    help="interleaved rounds (reference, each variant at every point; default 5)")
    ap.add_argument("--size", type=int, default=16 << 20, help="bytes to download")
    ap.add_argument("--suite", default="AES128-SHA", help="the CBC suite (OpenSSL name)")
    ap.add_argument("--variants", nargs="+", choices=("rebase", "timer"),
                    default=["rebase", "timer"])
    ap.add_argument("--json", type=Path, help="also write the runs and medians as JSON here")
    return ap


def _require_lab() -> None:
    """:func:`fail` unless curl, iproute2, the C extension and network namespaces (root) are available."""
    from testbed.linux.linktestbed import NamespacesUnavailable, check_available

    require_tools(BENCH, {"curl": "curl", "ip": "iproute2"})
    require_c_extension(BENCH)
    try:
        check_available()
    except NamespacesUnavailable as exc:
        fail(BENCH, str(exc))


def _measure(args: argparse.Namespace) -> dict[str, list[Any]]:
    """Interleaved rounds: the reference download, then each variant at every point, again."""
    from sslacc_sim.aio.linux.failover import measure_failover

    def run(variant: str | None) -> Any:
        if variant is None:  # the reference: the same download without a failure
            return measure_failover((None,), repeat=1, size=args.size, suite=args.suite)
        return measure_failover(tuple(args.points), repeat=1, size=args.size, suite=args.suite,
                                resume_at_ack=variant == "rebase")

    steps: dict[str, Any] = {"reference": lambda: run(None)}
    steps.update({v: (lambda v=v: run(v)) for v in args.variants})
    return rounds(steps, args.repeat)  # reference, rebase, timer, reference, ...


def _point_row(point: str, variant: str, frames: list[Any], reference: Repeated) -> dict[str, Any]:
    """One point and variant: medians, repeated figures and the slowdown against the reference; printed."""
    per_round = [df[df["point"] == point].iloc[0] for df in frames]
    download = Repeated.of(float(r["download_s"]) for r in per_round)
    figures = {k: _repeated([r[col] for r in per_round]) for k, col in
               (("restored_s", "restored_s"), ("next_byte_s", "next_segment_s"),
                ("next_new_byte_s", "next_new_byte_s"))}
    figures["download_s"] = download
    figures["slowdown"] = download.over(reference)  # each round's download over its reference
    row: dict[str, Any] = {"point": point, "variant": variant, "runs": len(per_round)}
    row.update({k: (None if v is None else v.median) for k, v in figures.items()})  # medians
    row["repeated"] = {k: (None if v is None else v.to_json()) for k, v in figures.items()}
    cells = "  ".join(f"{k} {'-' if v is None else v.text('.4f')}" for k, v in figures.items()
                      if k not in ("download_s", "slowdown"))
    print(f"{point:28} {variant:7} {cells}  slowdown {figures['slowdown'].text()}x")
    return row


def main(argv: list[str] | None = None) -> int:
    from sslacc_sim.aio.linux.node import POINTS

    ap = build_parser(POINTS)
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeats must be at least 1")
    _require_lab()
    began = time.perf_counter()

    got = _measure(args)
    reference = Repeated.of(float(df["download_s"].iloc[0]) for df in got["reference"])
    frames = list(got["reference"])
    summary = []
    print(f"median (min–max, n) of {args.repeat} interleaved repeats (seconds, measured)")
    for variant in args.variants:
        frames += got[variant]
        summary += [_point_row(point, variant, got[variant], reference) for point in args.points]
    wall = time.perf_counter() - began
    print(f"reference: the same download without a failure, {reference.text('.3f')} s "
          "(curl's time_total); slowdown = curl's time_total with the failover / that round's reference; "
          f"wall time {wall:.0f} s")
    if args.json:
        import pandas as pd

        runs = pd.concat(frames, ignore_index=True)
        doc = {"config": {"size": args.size, "suite": args.suite},
               "reference_s": reference.median, "reference": reference.to_json(), "medians": summary,
               "runs": json.loads(runs.to_json(orient="records"))}  # fmt: skip
        write_json(args.json, doc, repeats=args.repeat, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
