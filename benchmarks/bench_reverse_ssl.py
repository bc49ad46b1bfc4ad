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

Usage: ``python benchmarks/bench_reverse_ssl.py [--quick] [--throughput] [--json PATH] [--costs PATH]``.

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

from _common import fail, require_c_extension, require_tools  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--throughput", action="store_true", help="also run the asyncio throughput experiment")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--costs", type=Path, default=REPO / "results" / "reverse_ssl" / "measured_costs.json",
                        help="where to save the DoS model's calibration costs")
    args = parser.parse_args()
    require_tools(BENCH, {"openssl": "openssl"})
    require_c_extension(BENCH)
    n = 100 if args.quick else 1000
    out: dict[str, object] = {}
    out["lamport_sign_us"] = online_sign_us(OTSScheme.LAMPORT, n)
    out["winternitz16_sign_us"] = online_sign_us(OTSScheme.WINTERNITZ_16, n)
    print(f"online one-time signing: Lamport {out['lamport_sign_us']:.1f} us, "
          f"Winternitz w=16 {out['winternitz16_sign_us']:.1f} us")
    rsa = online_public_key_costs(0.3 if args.quick else 2.0)
    out.update(rsa)
    original = rsa["private_decrypt_ms"] + rsa["public_verify_ms"]
    reverse = rsa["public_encrypt_ms"] + out["lamport_sign_us"] / 1e3  # type: ignore[operator]
    out["online_cost_ratio"] = reverse / original
    print(f"online public-key cost at {BITS} bits: original {original:.3f} ms (decrypt + verify), "
          f"reverse {reverse:.3f} ms (encrypt + Lamport sign) -> reverse/original = {reverse / original:.3f} "
          f"(speedup {original / reverse:.1f}x; paper 34.3x; target <= 0.1: {'met' if reverse / original <= 0.1 else 'NOT met'})")
    cli = ex.openssl_speed((BITS,), seconds=1 if args.quick else 3).get(BITS)
    if cli is None:
        fail(BENCH, f"openssl speed rsa{BITS} gave no figure")
    cli_original, cli_reverse = cli[0] + cli[1], cli[1] + out["lamport_sign_us"] / 1e3  # type: ignore[operator]
    out["online_cost_ratio_openssl_speed"] = cli_reverse / cli_original
    print(f"same with openssl speed's RSA times: original {cli_original:.3f} ms, reverse {cli_reverse:.3f} ms "
          f"-> reverse/original = {cli_reverse / cli_original:.3f} (speedup {cli_original / cli_reverse:.1f}x)")
    hs = ex.handshake_cpu(quick=args.quick, bits=(BITS,))
    at = hs.set_index("mode")["server_ms"]
    out["handshake_server_ms"] = at.to_dict()
    out["handshake_ratio"] = at["client_auth"] / at["original"]
    print(f"server CPU per whole handshake (in memory): original {at['original']:.3f} ms, "
          f"reverse client-auth {at['client_auth']:.3f} ms, puzzle {at['puzzle']:.3f} ms "
          f"-> reverse/original = {out['handshake_ratio']:.3f}")
    puzzles = ex.puzzle_costs(quick=True)
    costs = ex.measure_costs(quick=True, hs=hs, puzzles=puzzles)
    args.costs.parent.mkdir(parents=True, exist_ok=True)
    args.costs.write_text(json.dumps(costs, indent=2))
    print(f"DoS calibration costs written to {args.costs}")
    if args.throughput:
        tp = ex.throughput(quick=args.quick, bits=(BITS,))
        cap = tp.set_index("mode")["server_capacity_hs"]
        out["throughput"] = tp.to_dict(orient="records")
        out["throughput_capacity_ratio"] = cap["client-auth"] / cap["original"]
        print(f"asyncio server: {cap['original']:.0f} vs {cap['client-auth']:.0f} handshakes per server CPU second "
              f"-> reverse/original = {out['throughput_capacity_ratio']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
