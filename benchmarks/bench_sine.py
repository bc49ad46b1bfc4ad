"""SINE benchmarks: client verification and tag generation throughput.

* Verification: :class:`sine.verifier.StreamVerifier` over a ``Content-Encoding: sine`` body fed
  in 64 KiB chunks, at 1 KiB and 16 KiB blocks, reported as a ratio of plain hashlib SHA-256
  throughput over the same bytes in blocks of the same size, measured in the same run (the
  verifier's floor: it must hash every byte once).  Targets: >= 0.6 at 16 KiB, >= 1.0 at 1 KiB
  (issue 24: one call per run of records, not per block).  Five verifier paths, interleaved
  with hashlib: the headline one, ``StreamVerifier(coalesce=True)``, whose runs of records go
  to the C extension (:func:`sine.chaincrypto.verify_run_joined`, OpenSSL EVP) and come out
  as one :class:`~sine.verifier.RunVerified` event per run; the same with the pure-Python twin
  (``SINE_PURE_PYTHON=1``, ``python_twin``); the default ``coalesce=False``, C runs but one
  :class:`~sine.verifier.BlockVerified` per block (``block_events``); record by record with
  per-block events, as before runs existed (``per_record``, the "before" figure); and
  :func:`sine.chaincrypto.verify_run_joined` alone over the body's records, 64 KiB per call,
  without the verifier (``chain_run``: the floor of the C path).
* Generation: :func:`sine.tag.sign_document` (hash chain + one RSA-PSS signature) for a 100 MB
  document (``--quick``: 10 MB), with the same hashlib reference.
* Chain vs tree (issue 25): verification CPU per MB of the SINE chain (inline body), the
  separate-tag SINE chain, the MICE chain (``mi-sha256-03``, head signed per RFC 9421) and the
  tree (SHA-256, BLAKE3; the whole document as a combined stream, and a 1 MiB range with its
  proof) at 1, 4, 16 and 64 KiB, each against a plain hash of the same bytes in blocks of the
  same size with the same primitive (``hashlib`` SHA-256, or ``blake3``), in the same run.
  The cases are :func:`sine.experiments.ranges.verify_cases` (real encoders, real verifiers);
  times are process CPU time.  A 16 MiB document (``--quick``: 4 MiB).

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, interleaved, rounds, write_json  # noqa: E402

import sine.verifier  # noqa: E402
from sine import chaincrypto  # noqa: E402
from sine.algorithms import SigAlg, SigningKey  # noqa: E402
from sine.experiments.ranges import VerifyCase, verify_cases  # noqa: E402
from sine.format import push_tag  # noqa: E402
from sine.tag import encode_stream, sign_document  # noqa: E402
from sine.verifier import BlockVerified, RunVerified, StreamVerifier  # noqa: E402

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


#: The verifier paths measured against hashlib (see the module docstring); the first three
#: coalesce (one event per run), the others emit one event per block.
PATHS = ("run", "python", "c", "per_record")
COALESCED = ("run", "python")


@contextmanager
def verifier_path(path: str) -> Iterator[None]:
    """:class:`StreamVerifier` with its runs of records checked by the C extension (``"run"``,
    ``"c"``), by the Python twin (``"python"``), or record by record (``"per_record"``: no
    runs)."""
    saved = StreamVerifier._run, sine.verifier.verify_run, sine.verifier.verify_run_joined
    if path == "per_record":
        StreamVerifier._run = lambda self, view, pos: pos  # type: ignore[method-assign]
    else:
        c = path != "python"
        run = chaincrypto.c_verify_run if c else chaincrypto.py_verify_run
        joined = chaincrypto.c_verify_run_joined if c else chaincrypto.py_verify_run_joined
        assert run is not None and joined is not None
        sine.verifier.verify_run, sine.verifier.verify_run_joined = run, joined
    try:
        yield
    finally:
        (StreamVerifier._run, sine.verifier.verify_run,  # type: ignore[method-assign]
         sine.verifier.verify_run_joined) = saved


def bench_verify(size: int, bs: int, key: SigningKey, repeats: int) -> dict[str, object]:
    doc = bytes(range(256)) * (size // 256)
    signed = sign_document(doc, "/bench", key, 1e9, block_size=bs)
    body = b"".join(encode_stream(doc, signed))
    pk = key.verifying_key()

    def verify(path: str) -> None:
        with verifier_path(path):
            v = StreamVerifier("/bench", 1e9 + 1, public_key=pk, coalesce=path in COALESCED)
            n = 0
            view = memoryview(body)
            for i in range(0, len(body), CHUNK):
                for e in v.receive_data(view[i : i + CHUNK]):
                    if isinstance(e, BlockVerified | RunVerified):
                        n += len(e.data)
            v.receive_eof()
        assert n == len(doc)

    info = signed.info
    run_fn, hash_name = chaincrypto.c_verify_run_joined, "sha256"  # sign_document's default hash
    assert run_fn is not None and info.digest_size == 32
    start, record = len(push_tag(signed.tag)), bs + info.digest_size
    middle = info.block_count - 1  # the records a run may hold (all but the last)
    per_call = CHUNK // record

    def chain_run() -> None:
        view = memoryview(body)[start : start + middle * record]
        trusted, n = info.content_root, 0
        for i in range(0, middle, per_call):
            blocks, trusted, mismatch = run_fn(hash_name, bs, trusted,
                                               view[i * record : (i + per_call) * record], middle - i)
            n += len(blocks) // bs
        assert n == middle and not mismatch

    mb = len(doc) / 1e6
    # all paths and hashlib in each round: every ratio's pair sees the same machine load
    steps = {p: (lambda p=p: mb / seconds_of(lambda: verify(p))) for p in PATHS}
    steps["chain_run"] = lambda: middle * bs / 1e6 / seconds_of(chain_run)  # its bytes only
    steps["hashlib"] = lambda: mb / seconds_of(lambda: hashlib_blocks(doc, bs))
    got = rounds(steps, repeats)
    ref, head = Repeated.of(got["hashlib"]), Repeated.of(got["run"])

    def pair(name: str) -> dict[str, object]:
        cand = Repeated.of(got[name])
        return {"verify_MBps": cand.to_json(), "ratio": cand.over(ref).to_json()}

    return {
        "block_size": bs,
        "document_bytes": len(doc),
        "backend": "c",
        "events": "run",  # StreamVerifier(coalesce=True): one RunVerified per run of records
        "verify_MBps": head.to_json(),
        "hashlib_MBps": ref.to_json(),
        "ratio": head.over(ref).to_json(),
        "python_twin": pair("python"),
        "block_events": pair("c"),
        "per_record": pair("per_record"),
        "chain_run": pair("chain_run"),
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


def cpu_seconds(fn) -> float:  # type: ignore[no-untyped-def]
    """Process CPU seconds one call of ``fn`` takes."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def bench_chain_vs_tree(cases: list[VerifyCase], repeats: int) -> list[dict[str, object]]:
    """Every case's verifier and its plain hash, all interleaved: per round, case by case,
    verifier then plain hash (``rounds``); a ratio's repeat is one pair's plain / verify time."""
    steps = {}
    for c in cases:
        steps[f"{c.name}:verify"] = (lambda c=c: cpu_seconds(c.verify))
        steps[f"{c.name}:plain"] = (lambda c=c: cpu_seconds(c.plain))
    got = rounds(steps, repeats)
    out: list[dict[str, object]] = []
    for c in cases:
        verify, plain = Repeated.of(got[f"{c.name}:verify"]), Repeated.of(got[f"{c.name}:plain"])
        mb = c.nbytes / 1e6
        out.append({
            "mode": c.mode, "group_size": c.group_size, "kind": c.kind, "bytes": c.nbytes,
            "plain_hash": "blake3" if c.mode == "tree-blake3" else "hashlib SHA-256",
            "verify_ms_per_MB": verify.map(lambda t, mb=mb: t / mb * 1e3).to_json(),
            "plain_ms_per_MB": plain.map(lambda t, mb=mb: t / mb * 1e3).to_json(),
            "verify_MBps": verify.map(lambda t, mb=mb: mb / t if t else float("inf")).to_json(),
            "ratio": plain.over(verify).to_json(),  # = verify MB/s / plain MB/s
        })
    return out


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
                              "quick": args.quick, "verify": [], "sign": [], "chain_vs_tree": []}
    if chaincrypto.c_verify_run is None:
        print("bench_sine: sine._chaincrypto is not built: run `make build`", file=sys.stderr)
        return 1
    for bs in (1024, 16 * 1024):
        r = bench_verify(verify_size, bs, key, args.repeats)
        out["verify"].append(r)  # type: ignore[attr-defined]
        print(f"verify  bs={bs:6d}: {text(r['verify_MBps'], '.1f')} MB/s (C runs, an event a run), hashlib "
              f"{text(r['hashlib_MBps'], '.1f')} MB/s, ratio {text(r['ratio'])}")
        for name, what in (("python_twin", "Python twin"), ("block_events", "an event a block"),
                           ("per_record", "record by record"), ("chain_run", "C run alone")):
            f = r[name]
            assert isinstance(f, dict)
            print(f"        {what:>18s}: {text(f['verify_MBps'], '.1f')} MB/s, ratio {text(f['ratio'])}")
    for bs in (1024, 16 * 1024):
        r = bench_sign(sign_size, bs, key, args.repeats)
        out["sign"].append(r)  # type: ignore[attr-defined]
        print(f"sign    bs={bs:6d}: {r['document_bytes'] / 1e6:.0f} MB in {text(r['sign_s'])} s "
              f"({text(r['sign_MBps'], '.1f')} MB/s), hashlib {text(r['hashlib_MBps'], '.1f')} MB/s, "
              f"ratio {text(r['ratio'])}")
    cases = verify_cases((4 if args.quick else 16) * 1024 * 1024, key=key)
    out["chain_vs_tree"] = bench_chain_vs_tree(cases, args.repeats)
    print("chain vs tree, process CPU ms per MB (ratio = plain hash time / verify time):")
    for r in out["chain_vs_tree"]:  # type: ignore[attr-defined]
        print(f"  {r['mode']:13s} {r['kind']:6s} {r['group_size'] // 1024:2d} KiB: "
              f"{text(r['verify_ms_per_MB'], '.2f')} ms/MB, {r['plain_hash']} "
              f"{text(r['plain_ms_per_MB'], '.2f')} ms/MB, ratio {text(r['ratio'])}")
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
