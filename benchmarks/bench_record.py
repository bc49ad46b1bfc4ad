"""Seal throughput of TLS 1.2 AES-128-CBC-SHA records, against ``openssl speed`` in the same run.

Measures ``RecordCipher.seal`` on full-size (16 KiB) records for the C
extension (stitched one-pass AES-CBC-HMAC-SHA1 path and the generic
HMAC + CBC path, single calls and ``seal_many`` batches; ``seal_stream``, whose
runs of 8 full records go through OpenSSL's multi-block pass, when ``--size`` is
16384) and for the pure-Python twin, and prints each as a ratio of
``openssl speed -evp aes-128-cbc-hmac-sha1 -bytes SIZE -seconds SECONDS``,
OpenSSL's own stitched-cipher throughput on this machine.  A second reference,
``openssl speed -mb -evp aes-128-cbc-hmac-sha1`` (its 131072-byte column: 8
records of 16 KiB interleaved, what libssl does on large writes), is measured in
the same rounds and every row's ratio to it printed too (``x -mb``).  Throughput is in
MB/s with MB = 10^6 bytes (the unit of ``openssl speed``) per second of *user
CPU time*, which is what ``openssl speed`` divides by unless given
``-elapsed``; wall-clock throughput is shown alongside for information.

Each implementation, ``openssl speed`` included, is measured in ``--repeats``
interleaved rounds (default 5: openssl, then every candidate, again), so
background load on a shared machine hits the reference and the candidates
alike; each ratio's repeat *i* is candidate *i* over ``openssl speed`` *i*,
and figures print as ``median (min–max, n)``.

Usage: ``python benchmarks/bench_record.py [--seconds S] [--repeats N] [--size N] [--json PATH]``.

Without ``openssl`` on ``PATH`` or the built C extension it exits with status 1
and one line saying what is missing (a ratio needs both sides).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (  # noqa: E402
    Repeated,
    add_repeats_option,
    fail,
    require_c_extension,
    require_tools,
    rounds,
    write_json,
)

from tls12.recordcrypto import CRecordCipher, PyRecordCipher  # noqa: E402

BENCH = "bench_record"

CONTENT_TYPE = 23  # application_data
VERSION = 0x0303  # TLS 1.2


REFERENCE = "openssl speed -evp aes-128-cbc-hmac-sha1"
REFERENCE_MB = "openssl speed -mb -evp aes-128-cbc-hmac-sha1 (8 x 16 KiB)"


@dataclass(frozen=True)
class Row:
    """One implementation's repeated figures (``None``: not measured for ``openssl speed``)."""

    name: str
    mb_per_s: Repeated  # per second of user CPU time, like openssl speed
    wall_mb_per_s: Repeated | None
    us_per_record: Repeated | None  # user CPU time
    ratio: Repeated  # of the openssl speed reference, pair by pair
    ratio_mb: Repeated | None = None  # of the openssl speed -mb reference, pair by pair

    def to_json(self) -> dict[str, object]:
        def js(v: Repeated | None) -> object:
            return None if v is None else v.to_json()

        return {"name": self.name, "mb_per_s": js(self.mb_per_s), "wall_mb_per_s": js(self.wall_mb_per_s),
                "us_per_record": js(self.us_per_record), "ratio": js(self.ratio),
                "ratio_mb": js(self.ratio_mb)}  # fmt: skip


def openssl_speed(exe: str, size: int, seconds: float) -> tuple[float | None, str]:
    """Return (MB/s, raw line) from ``openssl speed`` for the stitched cipher, or (None, reason)."""
    cmd = [exe, "speed", "-evp", "aes-128-cbc-hmac-sha1", "-bytes", str(size)]
    cmd += ["-seconds", str(max(1, round(seconds)))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    match = re.search(r"^(aes-128-cbc-hmac-sha1)\s+([\d.]+)k\s*$", proc.stdout, re.I | re.M)
    if match is None:
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        return None, lines[-1] if lines else "no output"
    return float(match.group(2)) / 1000.0, match.group(0).strip()  # 1000s of bytes/s -> MB/s


def openssl_speed_mb(exe: str, seconds: float) -> tuple[float | None, str]:
    """(MB/s, raw line) of ``openssl speed -mb`` for 8 interleaved 16 KiB records, or (None, reason)."""
    cmd = [exe, "speed", "-mb", "-evp", "aes-128-cbc-hmac-sha1", "-seconds", str(max(1, round(seconds)))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    header = re.search(r"^type\s+(.*bytes)\s*$", proc.stdout, re.M)
    line = re.search(r"^(aes-128-cbc-hmac-sha1)\s+([\d.k ]+)$", proc.stdout, re.I | re.M)
    if header is None or line is None or "131072 bytes" not in header.group(1):
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        return None, lines[-1] if lines else "no output"
    columns = re.findall(r"(\d+) bytes", header.group(1))
    values = re.findall(r"([\d.]+)k", line.group(2))
    return float(values[columns.index("131072")]) / 1000.0, line.group(0).strip()


def user_time() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def measure(
    run_batch: Callable[[int], None], records_per_batch: int, size: int, seconds: float
) -> tuple[float, float, float]:
    """Run batches for about ``seconds`` of wall time.

    Returns (MB per user-CPU second, MB per wall second, user-CPU microseconds per record).
    """
    run_batch(0)  # warm-up
    done, start, cpu_start = 0, time.perf_counter(), user_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        run_batch(done)
        done += records_per_batch
    cpu = max(user_time() - cpu_start, 1e-9)
    return done * size / cpu / 1e6, done * size / elapsed / 1e6, cpu / done * 1e6


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--seconds``, ``--size``, ``--batch``, ``--repeats``, ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="seconds per measurement and repeat (default 1)"
    )
    parser.add_argument(
        "--size", type=int, default=16384, help="plaintext bytes per record (default 16384)"
    )
    parser.add_argument(
        "--batch", type=int, default=32, help="records per seal_many call (default 32)"
    )
    add_repeats_option(parser)
    parser.add_argument(
        "--json", type=Path, help="also write the results and run configuration here"
    )
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parsed and checked arguments (argparse exits with status 2 on a bad ``--seconds`` or ``--size``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
    if not 0 < args.size <= 2**14:
        parser.error("--size must be in 1..16384")
    return args


Candidate = tuple[str, Callable[[int], None], int]
"""(name, seal one batch starting at a sequence number, records per batch)."""


def build_candidates(size: int, batch: int) -> list[Candidate]:
    """The sealers to measure: C stitched and generic (single calls and ``seal_many``), then Python.

    All share one random key pair, one ``size``-byte plaintext and ``batch``
    random IVs, so every candidate seals exactly the same records.
    """
    assert CRecordCipher is not None
    rng = os.urandom
    enc_key, mac_key, plaintext = rng(16), rng(20), rng(size)
    ivs = [rng(16) for _ in range(batch)]
    plaintexts = [plaintext] * batch

    def singles(cipher: object) -> Callable[[int], None]:
        seal = cipher.seal  # type: ignore[attr-defined]

        def run(seq: int) -> None:
            for i in range(batch):
                seal(seq + i, CONTENT_TYPE, VERSION, plaintext, ivs[i])

        return run

    def many(cipher: object) -> Callable[[int], None]:
        seal_many = cipher.seal_many  # type: ignore[attr-defined]
        return lambda seq: seal_many(seq, CONTENT_TYPE, VERSION, plaintexts, ivs)

    stitched = CRecordCipher("aes-128-cbc", "sha1", enc_key, mac_key)
    generic = CRecordCipher("aes-128-cbc", "sha1", enc_key, mac_key, stitched=False)
    label = "stitched" if stitched.stitched else "generic: no stitched cipher"
    python = PyRecordCipher("aes-128-cbc", "sha1", enc_key, mac_key)
    # seal_stream cuts its input into 16 KiB records: comparable only at that size
    data = plaintext * batch
    stream = [(f"C seal_stream x{batch} ({'multi-block' if stitched.multiblock else 'no multi-block'},"
               " random IVs)",
               lambda seq: stitched.seal_stream(seq, CONTENT_TYPE, VERSION, data), batch)]
    return [
        (f"C seal ({label})", singles(stitched), batch),
        (f"C seal_many x{batch} ({label})", many(stitched), batch),
        *(stream if size == 2**14 else []),
        ("C seal (generic HMAC + CBC)", singles(generic), batch),
        (f"C seal_many x{batch} (generic)", many(generic), batch),
        ("Python fallback seal", singles(python), batch),
    ]


def measure_rows(openssl: str, args: argparse.Namespace, candidates: list[Candidate]) -> list[Row]:
    """Interleaved rounds: openssl, then each candidate, repeated -- every pair sees the same load.

    The first row is the ``openssl speed`` reference itself (ratio 1 in every repeat).
    """

    def reference() -> tuple[float, float, float]:
        mbps_ref, raw = openssl_speed(openssl, args.size, args.seconds)
        if mbps_ref is None:
            fail(BENCH, f"openssl speed -evp aes-128-cbc-hmac-sha1 gave no figure ({raw})")
        return mbps_ref, math.nan, math.nan

    def reference_mb() -> tuple[float, float, float]:
        mbps_mb, _ = openssl_speed_mb(openssl, args.seconds)
        return math.nan if mbps_mb is None else mbps_mb, math.nan, math.nan

    steps: dict[str, Callable[[], tuple[float, float, float]]] = {REFERENCE: reference}
    if args.size == 2**14:
        steps[REFERENCE_MB] = reference_mb
    for name, run, per_batch in candidates:
        steps[name] = lambda run=run, per_batch=per_batch: measure(run, per_batch, args.size, args.seconds)
    got = rounds(steps, args.repeats)
    ref = Repeated.of(r[0] for r in got[REFERENCE])
    rows = [Row(REFERENCE, ref, None, None, ref.over(ref))]
    ref_mb = None
    if REFERENCE_MB in got and not any(math.isnan(r[0]) for r in got[REFERENCE_MB]):
        ref_mb = Repeated.of(r[0] for r in got[REFERENCE_MB])  # no -mb on this build: no such row
        rows[0] = Row(REFERENCE, ref, None, None, ref.over(ref), ref.over(ref_mb))
        rows.append(Row(REFERENCE_MB, ref_mb, None, None, ref_mb.over(ref), ref_mb.over(ref_mb)))
    for name, _, _ in candidates:
        mbps = Repeated.of(r[0] for r in got[name])
        rows.append(Row(name, mbps, Repeated.of(r[1] for r in got[name]), Repeated.of(r[2] for r in got[name]),
                        mbps.over(ref), None if ref_mb is None else mbps.over(ref_mb)))
    return rows


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    """One line per implementation: CPU MB/s as median (min–max), wall MB/s, us/record, ratio."""
    print(
        f"AES-128-CBC-SHA seal, {args.size}-byte records, {args.repeats} interleaved repeats of"
        f" {args.seconds:g} s; median (min–max) (MB = 1e6 B, measured)"
    )
    width = max(len(r.name) for r in rows)
    print(f"{'implementation':<{width}}  {'MB/s cpu':>22}  {'MB/s wall':>9}  {'us/rec':>7}  x openssl"
          f"{'':>12}  x -mb")

    def cell(value: Repeated | None, spec: str, width: int) -> str:
        return format(value.median, spec) if value is not None else format("-", f">{width}")  # not measured for openssl

    for r in rows:
        print(
            f"{r.name:<{width}}  {r.mb_per_s.text('.1f'):>22}  {cell(r.wall_mb_per_s, '9.1f', 9)}"
            f"  {cell(r.us_per_record, '7.2f', 7)}  {r.ratio.text('.2f'):<21}"
            f"  {'-' if r.ratio_mb is None else r.ratio_mb.text('.2f')}"
        )


def run_config(openssl: str, args: argparse.Namespace) -> dict[str, object]:
    """The run configuration written to the JSON: sizes, repeats, Python, machine and openssl version."""
    return {
        "size": args.size,
        "seconds": args.seconds,
        "batch": args.batch,
        "repeats": args.repeats,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor(),
        "openssl": subprocess.run(
            [openssl, "version"], capture_output=True, text=True, check=False
        ).stdout.strip(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    openssl = require_tools(BENCH, {"openssl": "openssl"})["openssl"]
    began = time.perf_counter()
    require_c_extension(BENCH)
    rows = measure_rows(openssl, args, build_candidates(args.size, args.batch))
    print_table(rows, args)
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, {"config": run_config(openssl, args), "rows": [r.to_json() for r in rows]},
                   repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
