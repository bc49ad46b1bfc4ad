"""Reverse SSL: online signing time and the server's cost, reverse vs original, at 2048 bits.

Prints, all measured in the same run on this machine:

1. online one-time signing (Lamport, Winternitz w=16) in microseconds
   (median over fresh keys; the paper: "a few microseconds");
2. the *online public-key cost* per handshake at 2048 bits: original = RSA
   private + public operation, reverse = public operation + one-time
   signing; the ratio is the paper's Table 3 speedup (paper: 34x; the
   issue's target: reverse <= 1/10 of original), with the RSA times measured
   through ``cryptography`` and again with ``openssl speed``;
3. the server CPU per *whole* handshake of this implementation (sans-IO, in
   memory: PRF, codecs, records included), reverse client-auth vs original;
4. with ``--throughput``: handshakes per server CPU second of the asyncio
   server under closed-loop load (subprocess), and the ratio.

``--json PATH`` writes the numbers, and ``--costs PATH`` the per-operation
costs the SimPy DoS model is calibrated with (default
``results/reverse_ssl/measured_costs.json``).

Every figure is measured ``--repeats`` times (default 5), all of them once per round, and
prints as ``median (min–max, n)``; a ratio's repeat is one round's ratio, and the <= 0.1
target counts as met only when the median meets it.  The throughput point per repeat is the
quick one (4 s per mode).

Usage: ``python benchmarks/bench_reverse_ssl.py [--quick] [--throughput] [--repeats N] [--json PATH] [--costs PATH]``.

Without ``openssl`` on ``PATH`` (the reference RSA times) or the built C
extension it exits with status 1 and one line saying what is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402
from _common import (  # noqa: E402
    Repeated,
    add_repeats_option,
    fail,
    require_c_extension,
    require_tools,
    rounds,
    write_json,
)
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import padding  # noqa: E402

from reverse_ssl import experiments as ex  # noqa: E402
from reverse_ssl.onoff import make_offline_token, sign_online  # noqa: E402
from reverse_ssl.ots import OTSScheme  # noqa: E402

BITS = 2048
BENCH = "bench_reverse_ssl"


def online_sign_us(scheme: OTSScheme, n: int) -> float:
    key = ex.rsa_key(1024)
    tokens = [make_offline_token(key, ex._rng, scheme) for _ in range(n)]
    times = []
    for token in tokens:
        start = time.perf_counter()
        sign_online(token, b"transcript hash")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def online_public_key_costs(seconds: float) -> dict[str, float]:
    """CPU ms of the 2048-bit RSA operations each handshake needs online."""
    key = ex.rsa_key(BITS)
    pub = key.public_key()
    premaster = b"\x03\x03" + bytes(46)
    ciphertext = pub.encrypt(premaster, padding.PKCS1v15())
    sig = key.sign(b"m", padding.PKCS1v15(), hashes.SHA256())
    decrypt = ex._time_per_call(lambda: key.decrypt(ciphertext, padding.PKCS1v15()), seconds)
    verify = ex._time_per_call(lambda: pub.verify(sig, b"m", padding.PKCS1v15(), hashes.SHA256()), seconds)
    encrypt = ex._time_per_call(lambda: pub.encrypt(premaster, padding.PKCS1v15()), seconds)
    return {"private_decrypt_ms": decrypt * 1e3, "public_verify_ms": verify * 1e3, "public_encrypt_ms": encrypt * 1e3}


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--quick``, ``--throughput``, ``--repeats``, ``--json``, ``--costs``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--throughput", action="store_true", help="also run the asyncio throughput experiment")
    add_repeats_option(parser)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--costs", type=Path, default=REPO / "results" / "reverse_ssl" / "measured_costs.json",
                        help="where to save the DoS model's calibration costs")
    return parser


def build_steps(args: argparse.Namespace, last_hs: list[pd.DataFrame]) -> dict[str, Callable[[], object]]:
    """One round's measurements, in order; ``last_hs`` keeps the latest handshake table (for the DoS costs)."""
    n = 40 if args.quick else 200  # fresh keys per signing repeat
    seconds = 0.2 if args.quick else 0.5  # per RSA operation and repeat

    def rsa_step() -> dict[str, float]:
        return online_public_key_costs(seconds)

    def cli_step() -> tuple[float, float]:
        cli = ex.openssl_speed((BITS,), seconds=1).get(BITS)
        if cli is None:
            fail(BENCH, f"openssl speed rsa{BITS} gave no figure")
        return cli[0], cli[1]

    def hs_step() -> dict[str, float]:
        hs = ex.handshake_cpu(quick=True, bits=(BITS,))
        last_hs[:] = [hs]
        return hs.set_index("mode")["server_ms"].to_dict()

    steps: dict[str, Callable[[], object]] = {
        "lamport": lambda: online_sign_us(OTSScheme.LAMPORT, n),
        "winternitz": lambda: online_sign_us(OTSScheme.WINTERNITZ_16, n),
        "rsa": rsa_step, "cli": cli_step, "hs": hs_step,
    }
    if args.throughput:  # the quick closed-loop point (4 s per mode) per repeat
        steps["tp"] = lambda: ex.throughput(quick=True, bits=(BITS,)).set_index("mode")["server_capacity_hs"].to_dict()
    return steps


def per_key(results: list[Any]) -> dict[str, Repeated]:
    """``[{k: v}, ...]`` (one dict per round) as ``{k: Repeated}``."""
    return {k: Repeated.of(r[k] for r in results) for k in results[0]}


@dataclass(frozen=True)
class Figures:
    """The repeated figures of one run; every ratio pairs the figures of the same round."""

    lamport: Repeated
    winternitz: Repeated
    rsa: dict[str, Repeated]
    original: Repeated  # RSA private decrypt + public verify, ms
    reverse: Repeated  # RSA public encrypt + Lamport signing, ms
    cli_original: Repeated  # the same two with openssl speed's RSA times
    cli_reverse: Repeated
    hs: dict[str, Repeated]

    @classmethod
    def of(cls, got: dict[str, list[Any]]) -> Figures:
        lamport, rsa = Repeated.of(got["lamport"]), per_key(got["rsa"])
        original = Repeated.of(d + v for d, v in zip(rsa["private_decrypt_ms"].repeats, rsa["public_verify_ms"].repeats,
                                                     strict=True))
        reverse = Repeated.of(e + s / 1e3 for e, s in zip(rsa["public_encrypt_ms"].repeats, lamport.repeats, strict=True))
        cli_original = Repeated.of(a + b for a, b in got["cli"])
        cli_reverse = Repeated.of(b + s / 1e3 for (_, b), s in zip(got["cli"], lamport.repeats, strict=True))
        return cls(lamport, Repeated.of(got["winternitz"]), rsa, original, reverse, cli_original, cli_reverse,
                   per_key(got["hs"]))

    @property
    def ratio(self) -> Repeated:
        return self.reverse.over(self.original)

    @property
    def hs_ratio(self) -> Repeated:
        return self.hs["client_auth"].over(self.hs["original"])

    def to_json(self) -> dict[str, object]:
        return {
            "lamport_sign_us": self.lamport.to_json(), "winternitz16_sign_us": self.winternitz.to_json(),
            **{k: v.to_json() for k, v in self.rsa.items()},
            "original_online_ms": self.original.to_json(), "reverse_online_ms": self.reverse.to_json(),
            "online_cost_ratio": self.ratio.to_json(), "online_cost_target": 0.1,
            "online_cost_target_met": self.ratio.median <= 0.1,
            "online_cost_ratio_openssl_speed": self.cli_reverse.over(self.cli_original).to_json(),
            "handshake_server_ms": {k: v.to_json() for k, v in self.hs.items()},
            "handshake_ratio": self.hs_ratio.to_json(),
        }

    def print(self, repeats: int) -> None:
        ratio, hs, cli_original, cli_reverse = self.ratio, self.hs, self.cli_original, self.cli_reverse
        print(f"median (min–max, n) of {repeats} interleaved repeats (measured)")
        print(f"online one-time signing: Lamport {self.lamport.text('.1f')} us, "
              f"Winternitz w=16 {self.winternitz.text('.1f')} us")
        print(f"online public-key cost at {BITS} bits: original {self.original.text('.3f')} ms (decrypt + verify), "
              f"reverse {self.reverse.text('.3f')} ms (encrypt + Lamport sign) -> reverse/original = {ratio.text('.3f')} "
              f"(paper 1/34.3; target <= 0.1 for the median: {'met' if ratio.median <= 0.1 else 'NOT met'})")
        print(f"same with openssl speed's RSA times: original {cli_original.text('.3f')} ms, reverse "
              f"{cli_reverse.text('.3f')} ms -> reverse/original = {cli_reverse.over(cli_original).text('.3f')}")
        print(f"server CPU per whole handshake (in memory): original {hs['original'].text('.3f')} ms, "
              f"reverse client-auth {hs['client_auth'].text('.3f')} ms, puzzle {hs['puzzle'].text('.3f')} ms "
              f"-> reverse/original = {self.hs_ratio.text('.3f')}")


def write_costs(path: Path, hs: pd.DataFrame) -> None:
    """Save the DoS model's calibration costs, measured from ``hs`` (the last round's handshake table)."""
    puzzles = ex.puzzle_costs(quick=True)
    costs = ex.measure_handshake_costs(quick=True, hs=hs, puzzles=puzzles)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(costs, indent=2))
    print(f"DoS calibration costs written to {path}")


def throughput_figures(tp: list[dict[str, float]], out: dict[str, object]) -> None:
    """Add the asyncio server's handshakes per CPU second (each mode) and their ratio to ``out``; print them."""
    cap = per_key(tp)
    cap_ratio = cap["client-auth"].over(cap["original"])
    out["throughput_hs_per_cpu_s"] = {k: v.to_json() for k, v in cap.items()}
    out["throughput_capacity_ratio"] = cap_ratio.to_json()
    print(f"asyncio server: {cap['original'].text('.0f')} vs {cap['client-auth'].text('.0f')} handshakes per "
          f"server CPU second -> reverse/original = {cap_ratio.text()}x")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_tools(BENCH, {"openssl": "openssl"})
    require_c_extension(BENCH)
    began = time.perf_counter()
    last_hs: list[pd.DataFrame] = []
    got = rounds(build_steps(args, last_hs), args.repeats)
    figures = Figures.of(got)
    out = figures.to_json()
    figures.print(args.repeats)
    write_costs(args.costs, last_hs[0])
    if args.throughput:
        throughput_figures(got["tp"], out)  # type: ignore[arg-type]
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
