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

Each figure is measured ``--repeats`` times (default 5), verifier (or signer) and hashlib
interleaved, and printed as ``median (min–max, n)``; a ratio's repeat is one pair's ratio, and
the target counts as met only when the median meets it.

Results are printed and written as JSON (``--json``, default
``results/bench_sine/bench_sine.json``) so simulations can read them as service times.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, interleaved, write_json  # noqa: E402

from sine.algorithms import SigAlg, SigningKey  # noqa: E402
from sine.tag import encode_stream, sign_document  # noqa: E402
from sine.verifier import BlockVerified, StreamVerifier  # noqa: E402

CHUNK = 64 * 1024


def seconds_of(fn) -> float:  # type: ignore[no-untyped-def]
    """Wall seconds one call of ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def hashlib_blocks(data: bytes, bs: int) -> None:
    view = memoryview(data)
    sha = hashlib.sha256
    for i in range(0, len(data), bs):
        sha(view[i : i + bs]).digest()


def bench_verify(size: int, bs: int, key: SigningKey, repeats: int) -> dict[str, object]:
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

    mb = len(doc) / 1e6
    # verify, hashlib, verify, hashlib, ...: both see the same machine load; ratio pair by pair
    pair = interleaved(lambda: mb / seconds_of(verify), lambda: mb / seconds_of(lambda: hashlib_blocks(doc, bs)),
                       repeats)
    return {
        "block_size": bs,
        "document_bytes": len(doc),
        "verify_MBps": pair.candidate.to_json(),
        "hashlib_MBps": pair.reference.to_json(),
        "ratio": pair.ratio.to_json(),
    }


def bench_sign(size: int, bs: int, key: SigningKey, repeats: int) -> dict[str, object]:
    doc = bytes(range(256)) * (size // 256)
    mb = len(doc) / 1e6
    pair = interleaved(lambda: seconds_of(lambda: sign_document(doc, "/big", key, 1e9, block_size=bs)),
                       lambda: seconds_of(lambda: hashlib_blocks(doc, bs)), repeats)
    return {"block_size": bs, "document_bytes": len(doc), "sign_s": pair.candidate.to_json(),
            "sign_MBps": pair.candidate.map(lambda t: mb / t).to_json(),
            "hashlib_MBps": pair.reference.map(lambda t: mb / t).to_json(),
            "ratio": pair.reference.over(pair.candidate).to_json()}  # hashlib time / sign time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller documents (CI-sized)")
    p.add_argument("--json", type=Path,
                   default=Path(__file__).resolve().parents[1] / "results/bench_sine/bench_sine.json")
    add_repeats_option(p)
    args = p.parse_args(argv)
    began = time.perf_counter()
    key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
    verify_size = (4 if args.quick else 32) * 1024 * 1024
    sign_size = (10 if args.quick else 100) * 1000 * 1000
    out: dict[str, object] = {"python": platform.python_version(), "machine": platform.machine(),
                              "quick": args.quick, "verify": [], "sign": []}
    for bs in (1024, 16 * 1024):
        r = bench_verify(verify_size, bs, key, args.repeats)
        out["verify"].append(r)  # type: ignore[attr-defined]
        print(f"verify  bs={bs:6d}: {text(r['verify_MBps'], '.1f')} MB/s, hashlib {text(r['hashlib_MBps'], '.1f')}"
              f" MB/s, ratio {text(r['ratio'])}")
    for bs in (1024, 16 * 1024):
        r = bench_sign(sign_size, bs, key, args.repeats)
        out["sign"].append(r)  # type: ignore[attr-defined]
        print(f"sign    bs={bs:6d}: {r['document_bytes'] / 1e6:.0f} MB in {text(r['sign_s'])} s "
              f"({text(r['sign_MBps'], '.1f')} MB/s), hashlib {text(r['hashlib_MBps'], '.1f')} MB/s, "
              f"ratio {text(r['ratio'])}")
    wall = time.perf_counter() - began
    print(f"median (min–max, n) of {args.repeats} interleaved repeats (measured); wall time {wall:.0f} s")
    write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    return 0


def text(figure: object, spec: str = ".2f") -> str:
    """``median (min–max, n)`` of a figure in the JSON shape of :meth:`Repeated.to_json`."""
    assert isinstance(figure, dict)
    return Repeated.of(figure["repeats"]).text(spec)


if __name__ == "__main__":
    raise SystemExit(main())
