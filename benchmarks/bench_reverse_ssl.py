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
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--throughput", action="store_true", help="also run the asyncio throughput experiment")
    add_repeats_option(parser)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--costs", type=Path, default=REPO / "results" / "reverse_ssl" / "measured_costs.json",
                        help="where to save the DoS model's calibration costs")
    args = parser.parse_args(argv)
    require_tools(BENCH, {"openssl": "openssl"})
    require_c_extension(BENCH)
    began = time.perf_counter()
    n = 40 if args.quick else 200  # fresh keys per signing repeat
    seconds = 0.2 if args.quick else 0.5  # per RSA operation and repeat
    last_hs: list[pd.DataFrame] = []

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

    steps: dict[str, object] = {
        "lamport": lambda: online_sign_us(OTSScheme.LAMPORT, n),
        "winternitz": lambda: online_sign_us(OTSScheme.WINTERNITZ_16, n),
        "rsa": rsa_step, "cli": cli_step, "hs": hs_step,
    }
    if args.throughput:  # the quick closed-loop point (4 s per mode) per repeat
        steps["tp"] = lambda: ex.throughput(quick=True, bits=(BITS,)).set_index("mode")["server_capacity_hs"].to_dict()
    got = rounds(steps, args.repeats)  # type: ignore[arg-type]
    lamport, winternitz = Repeated.of(got["lamport"]), Repeated.of(got["winternitz"])
    rsa = {k: Repeated.of(r[k] for r in got["rsa"]) for k in got["rsa"][0]}
    original = Repeated.of(d + v for d, v in zip(rsa["private_decrypt_ms"].repeats, rsa["public_verify_ms"].repeats,
                                                 strict=True))
    reverse = Repeated.of(e + s / 1e3 for e, s in zip(rsa["public_encrypt_ms"].repeats, lamport.repeats, strict=True))
    ratio = reverse.over(original)
    cli_original = Repeated.of(a + b for a, b in got["cli"])
    cli_reverse = Repeated.of(b + s / 1e3 for (_, b), s in zip(got["cli"], lamport.repeats, strict=True))
    hs = {k: Repeated.of(r[k] for r in got["hs"]) for k in got["hs"][0]}
    hs_ratio = hs["client_auth"].over(hs["original"])
    out: dict[str, object] = {
        "lamport_sign_us": lamport.to_json(), "winternitz16_sign_us": winternitz.to_json(),
        **{k: v.to_json() for k, v in rsa.items()},
        "original_online_ms": original.to_json(), "reverse_online_ms": reverse.to_json(),
        "online_cost_ratio": ratio.to_json(), "online_cost_target": 0.1,
        "online_cost_target_met": ratio.median <= 0.1,
        "online_cost_ratio_openssl_speed": cli_reverse.over(cli_original).to_json(),
        "handshake_server_ms": {k: v.to_json() for k, v in hs.items()},
        "handshake_ratio": hs_ratio.to_json(),
    }
    print(f"median (min–max, n) of {args.repeats} interleaved repeats (measured)")
    print(f"online one-time signing: Lamport {lamport.text('.1f')} us, Winternitz w=16 {winternitz.text('.1f')} us")
    print(f"online public-key cost at {BITS} bits: original {original.text('.3f')} ms (decrypt + verify), "
          f"reverse {reverse.text('.3f')} ms (encrypt + Lamport sign) -> reverse/original = {ratio.text('.3f')} "
          f"(paper 1/34.3; target <= 0.1 for the median: {'met' if ratio.median <= 0.1 else 'NOT met'})")
    print(f"same with openssl speed's RSA times: original {cli_original.text('.3f')} ms, reverse "
          f"{cli_reverse.text('.3f')} ms -> reverse/original = {cli_reverse.over(cli_original).text('.3f')}")
    print(f"server CPU per whole handshake (in memory): original {hs['original'].text('.3f')} ms, "
          f"reverse client-auth {hs['client_auth'].text('.3f')} ms, puzzle {hs['puzzle'].text('.3f')} ms "
          f"-> reverse/original = {hs_ratio.text('.3f')}")
    puzzles = ex.puzzle_costs(quick=True)
    costs = ex.measure_costs(quick=True, hs=last_hs[0], puzzles=puzzles)
    args.costs.parent.mkdir(parents=True, exist_ok=True)
    args.costs.write_text(json.dumps(costs, indent=2))
    print(f"DoS calibration costs written to {args.costs}")
    if args.throughput:
        cap = {k: Repeated.of(r[k] for r in got["tp"]) for k in got["tp"][0]}
        cap_ratio = cap["client-auth"].over(cap["original"])
        out["throughput_hs_per_cpu_s"] = {k: v.to_json() for k, v in cap.items()}
        out["throughput_capacity_ratio"] = cap_ratio.to_json()
        print(f"asyncio server: {cap['original'].text('.0f')} vs {cap['client-auth'].text('.0f')} handshakes per "
              f"server CPU second -> reverse/original = {cap_ratio.text()}x")
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
