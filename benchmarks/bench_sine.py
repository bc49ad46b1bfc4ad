"""SINE benchmarks: client verification and tag generation throughput.

* Verification: :class:`sine.verifier.StreamVerifier` over a ``Content-Encoding: sine`` body fed
  in 64 KiB chunks, at 1 KiB and 16 KiB blocks, reported as a ratio of plain hashlib SHA-256
  throughput over the same bytes in blocks of the same size, measured in the same run (the
  verifier's floor: it must hash every byte once).  Target >= 0.6 at 16 KiB.
* Generation: :func:`sine.tag.sign_document` (hash chain + one RSA-PSS signature) for a 100 MB
  document (``--quick``: 10 MB), with the same hashlib reference.

The reference (hashlib) runs in the same process, so it cannot be missing,
and SINE does not use the TLS record extension: this benchmark has no
missing-reference failure path.

Results are printed and written as JSON (``--json``, default
``results/bench_sine/bench_sine.json``) so simulations can read them as service times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time
from pathlib import Path

from sine.algorithms import SigAlg, SigningKey
from sine.tag import encode_stream, sign_document
from sine.verifier import BlockVerified, StreamVerifier

CHUNK = 64 * 1024


def best_of(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def hashlib_blocks(data: bytes, bs: int) -> None:
    view = memoryview(data)
    sha = hashlib.sha256
    for i in range(0, len(data), bs):
        sha(view[i : i + bs]).digest()


def bench_verify(size: int, bs: int, key: SigningKey, repeat: int) -> dict[str, float]:
    doc = bytes(range(256)) * (size // 256)
    signed = sign_document(doc, "/bench", key, 1e9, block_size=bs)
    body = b"".join(encode_stream(doc, signed))
    pk = key.verifying_key()

    def verify() -> None:
        v = StreamVerifier("/bench", 1e9 + 1, public_key=pk)
        n = 0
        view = memoryview(body)
        for i in range(0, len(body), CHUNK):
            for e in v.receive_data(view[i : i + CHUNK]):
                if isinstance(e, BlockVerified):
                    n += len(e.data)
        v.receive_eof()
        assert n == len(doc)

    t_verify = t_hash = float("inf")
    for _ in range(repeat):  # interleaved, so both see the same machine load
        t_hash = min(t_hash, best_of(lambda: hashlib_blocks(doc, bs), 1))
        t_verify = min(t_verify, best_of(verify, 1))
    return {
        "block_size": bs,
        "document_bytes": len(doc),
        "verify_MBps": len(doc) / t_verify / 1e6,
        "hashlib_MBps": len(doc) / t_hash / 1e6,
        "ratio": t_hash / t_verify,
    }


def bench_sign(size: int, bs: int, key: SigningKey) -> dict[str, float]:
    doc = bytes(range(256)) * (size // 256)
    t0 = time.perf_counter()
    sign_document(doc, "/big", key, 1e9, block_size=bs)
    t_sign = time.perf_counter() - t0
    t_hash = best_of(lambda: hashlib_blocks(doc, bs), 1)
    return {"block_size": bs, "document_bytes": len(doc), "sign_s": t_sign,
            "sign_MBps": len(doc) / t_sign / 1e6, "hashlib_MBps": len(doc) / t_hash / 1e6,
            "ratio": t_hash / t_sign}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller documents (CI-sized)")
    p.add_argument("--json", type=Path,
                   default=Path(__file__).resolve().parents[1] / "results/bench_sine/bench_sine.json")
    args = p.parse_args(argv)
    key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
    verify_size = (4 if args.quick else 32) * 1024 * 1024
    sign_size = (10 if args.quick else 100) * 1000 * 1000
    out: dict[str, object] = {"python": platform.python_version(), "machine": platform.machine(),
                              "quick": args.quick, "verify": [], "sign": []}
    for bs in (1024, 16 * 1024):
        r = bench_verify(verify_size, bs, key, repeat=3 if args.quick else 7)
        out["verify"].append(r)  # type: ignore[attr-defined]
        print(f"verify  bs={bs:6d}: {r['verify_MBps']:8.1f} MB/s, hashlib {r['hashlib_MBps']:8.1f}"
              f" MB/s, ratio {r['ratio']:.2f}")
    for bs in (1024, 16 * 1024):
        r = bench_sign(sign_size, bs, key)
        out["sign"].append(r)  # type: ignore[attr-defined]
        print(f"sign    bs={bs:6d}: {r['document_bytes'] / 1e6:.0f} MB in {r['sign_s']:.2f} s "
              f"({r['sign_MBps']:.1f} MB/s), hashlib {r['hashlib_MBps']:.1f} MB/s, "
              f"ratio {r['ratio']:.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
