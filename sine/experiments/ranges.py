"""Chain vs tree (issue 25): bytes of overhead, time to a verified range, verification CPU.

======================================  ====================================================
function                                what it returns (and what kind of number)
======================================  ====================================================
:func:`measure_verify_cpu`              verification CPU per MB of each mode (SINE chain,
                                        MICE chain, tree SHA-256, tree BLAKE3) at 1, 4, 16,
                                        64 KiB beside a plain hash of the same bytes in the
                                        same run, interleaved repeats -- **measured**
:func:`cpu_table`, :func:`calibration`  those figures as a DataFrame, and as the model's
                                        :class:`~sine.model_ranges.VerifyCpu`
:func:`overhead_table`                  bytes beyond the document or the range per mode and
                                        size, for a 1 GB file -- **true by construction**
:func:`range_costs`                     time to a verified 1 MiB range at 10 / 50 / 90 % and
                                        to the first verified byte (0 = stream start),
                                        verified over unverified -- **modelled**
                                        (:mod:`sine.model_ranges`; CPU from
                                        :func:`measure_verify_cpu`, links from the paper)
:func:`goal_check`                      the issue's goal at 90 % beside the model's result
:func:`tree_breakdown`                  where a tree range's time beyond the unverified
                                        fetch goes: widening, the head and proof exchanges,
                                        verification CPU -- **modelled**
======================================  ====================================================

The verifiers timed are the real ones, fed bytes made by the real encoders:
:class:`~sine.verifier.StreamVerifier` (``coalesce=True``: one event per run of records) over a
``sine`` body (``sine-inline``) or the plain document with the separate tag
(``sine-separate``), :func:`~sine.httpsig.open_mice_response` and
:class:`~sine.mice.MiceDecoder` (``mice``), :class:`~sine.tree_verifier.TreeVerifier` over
the combined stream and :class:`~sine.tree_verifier.SliceVerifier` over a 1 MiB range
(``tree-*``).  Each timing includes the head's signature check (RSA-PSS-2048; MICE: the RFC 9421
signature), so it is a fetch's whole verification CPU.  The reference hashes the same bytes in
blocks of the same size with the mode's primitive (``hashlib`` SHA-256, or ``blake3``).  CPU
is process time (:func:`time.process_time`), so a machine shared with other work slows the
figures less than wall time would; candidate and reference alternate, so what load remains
hits both.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import blake3
import pandas as pd

from ..algorithms import SigAlg, SigningKey
from ..format import push_separate_tag
from ..httpsig import open_mice_response, sign_response
from ..mice import MIN_RECORD_SIZE, RECORD_SIZES, RecordVerified, mice_encode, response_fields
from ..model_latency import Scenario
from ..model_ranges import (
    CHAIN_MODES,
    GROUP_SIZES,
    MIB,
    MODES,
    TREE_MODES,
    UNVERIFIED,
    Fetch,
    HeadSizes,
    VerifyCpu,
    fetch_time,
    first_verified_fetch,
    head_sizes,
    range_fetch,
    whole_overhead,
)
from ..params import SINE_BANDWIDTHS
from ..tag import encode_stream, sign_document
from ..tree import (
    TreeHash,
    encode_interleaved,
    make_proof,
    push_range_proof,
    push_tree_tag,
    sign_tree,
)
from ..tree_verifier import RangeVerified, SliceVerifier, TreeVerifier, VerifiedData
from ..verifier import BlockVerified, RunVerified, StreamVerifier

__all__ = ["GB", "POSITIONS", "GOAL_TREE_MAX", "GOAL_CHAIN_MIN", "VerifyCase", "CpuFigure",
           "verify_cases", "measure_verify_cpu", "cpu_table", "calibration", "overhead_table",
           "range_costs", "goal_check", "tree_breakdown", "bandwidths"]

GB = 10**9
#: where the 1 MiB range starts, as a fraction of the file
POSITIONS = (0.1, 0.5, 0.9)
#: issue 25's goal at 90 %: a tree range costs at most this many unverified fetches ...
GOAL_TREE_MAX = 1.1
#: ... where a chain costs at least this many
GOAL_CHAIN_MIN = 90.0
PATH = "/video.bin"
NOW = 1_700_000_000
_CHUNK = 64 * 1024
_HASH: dict[str, Callable[[Any], Any]] = {
    "sine-inline": hashlib.sha256, "sine-separate": hashlib.sha256, "mice": hashlib.sha256,
    "tree-sha256": hashlib.sha256, "tree-blake3": blake3.blake3}
_TREE = {"tree-sha256": TreeHash.SHA256, "tree-blake3": TreeHash.BLAKE3}


# -- measured: verification CPU ---------------------------------------------------------------


@dataclass(frozen=True)
class VerifyCase:
    """One timed verification: ``verify()`` runs the real verifier once and returns the bytes
    it released; ``plain()`` hashes the same ``nbytes`` document bytes in ``g``-byte blocks."""

    mode: str
    group_size: int
    kind: str  # "stream" (the whole document) or "slice" (a 1 MiB range, tree only)
    nbytes: int
    verify: Callable[[], int]
    plain: Callable[[], None]

    @property
    def name(self) -> str:
        return f"{self.mode} {self.kind} {self.group_size // 1024} KiB"


def _chunks(data: bytes) -> list[memoryview]:
    view = memoryview(data)
    return [view[i : i + _CHUNK] for i in range(0, len(data), _CHUNK)]


def _plain(mode: str, data: bytes, g: int) -> Callable[[], None]:
    new, view = _HASH[mode], memoryview(data)

    def run() -> None:
        for i in range(0, len(data), g):
            new(view[i : i + g]).digest()

    return run


def _feed(make: Callable[[], Any], chunks: Sequence[memoryview], released: Callable[[Any], int]
          ) -> Callable[[], int]:
    def run() -> int:
        verifier = make()
        n = sum(released(e) for c in chunks for e in verifier.receive_data(c))
        n += sum(released(e) for e in verifier.receive_data(b""))
        return n

    return run


def _block(e: Any) -> int:
    released = BlockVerified | RunVerified | RecordVerified | VerifiedData
    return len(e.data) if isinstance(e, released) else 0


def _chain_cases(doc: bytes, g: int, key: SigningKey) -> list[VerifyCase]:
    pk = key.verifying_key()
    signed = sign_document(doc, PATH, key, NOW, block_size=g)
    body = _chunks(b"".join(encode_stream(doc, signed)))
    at = push_separate_tag(signed.separate_tag())
    sizes = RECORD_SIZES if g in RECORD_SIZES else range(MIN_RECORD_SIZE, g + 1)
    enc = mice_encode(doc, g, record_sizes=sizes)
    fields = sign_response(200, [("Content-Type", "application/octet-stream"),
                                 *response_fields(enc)], enc.body, key, key_id="origin",
                           now=NOW, unencoded=doc)

    def mice() -> Any:
        return open_mice_response(200, fields, pk, key_id="origin", now=NOW + 1,
                                  record_sizes=sizes)[1]

    return [
        VerifyCase("sine-inline", g, "stream", len(doc),
                   _feed(lambda: StreamVerifier(PATH, NOW + 1, public_key=pk, coalesce=True),
                         body, _block),
                   _plain("sine-inline", doc, g)),
        VerifyCase("sine-separate", g, "stream", len(doc),
                   _feed(lambda: StreamVerifier(PATH, NOW + 1, public_key=pk, separate=at,
                                              coalesce=True),
                         _chunks(doc), _block), _plain("sine-separate", doc, g)),
        VerifyCase("mice", g, "stream", len(doc), _feed(mice, _chunks(enc.body), _block),
                   _plain("mice", doc, g)),
    ]


def _tree_cases(doc: bytes, g: int, key: SigningKey, mode: str) -> list[VerifyCase]:
    pk = key.verifying_key()
    signed = sign_tree(doc, PATH, key, NOW, group_size=g, tree_hash=_TREE[mode])
    tag = push_tree_tag(signed.tag)
    combined = _chunks(b"".join(encode_interleaved(doc, signed.outboard)))
    first = len(doc) // 2 - MIB // 2 + 12345  # not on a group boundary: the widening is paid
    last = first + MIB - 1
    proof = push_range_proof(make_proof(signed.outboard, first, last))
    probe = SliceVerifier(PATH, NOW + 1, public_key=pk, tag=tag, proof=proof, first=first,
                          last=last)
    start, end = probe.span
    groups = doc[start:end]

    def slice_once() -> int:
        v = SliceVerifier(PATH, NOW + 1, public_key=pk, tag=tag, proof=proof, first=first,
                          last=last)
        events = v.receive_data(groups)
        if not any(isinstance(e, RangeVerified) for e in events):
            raise AssertionError("the range did not verify")
        return sum(_block(e) for e in events)

    return [
        VerifyCase(mode, g, "stream", len(doc),
                   _feed(lambda: TreeVerifier(PATH, NOW + 1, public_key=pk, tag=tag), combined,
                         _block), _plain(mode, doc, g)),
        VerifyCase(mode, g, "slice", len(groups), slice_once, _plain(mode, groups, g)),
    ]


def verify_cases(doc_bytes: int = 4 * MIB, group_sizes: Iterable[int] = GROUP_SIZES,
                 key: SigningKey | None = None) -> list[VerifyCase]:
    """Every mode at every size on one pseudo-random document of ``doc_bytes`` (at least
    2 MiB, for the slice), signed with ``key`` (default: a new RSA-PSS-2048 key, the paper
    testbed's).  Each case is checked once here: it must release exactly its bytes."""
    if doc_bytes < 2 * MIB:
        raise ValueError("need at least 2 MiB (the slice is 1 MiB off the middle)")
    key = key or SigningKey.generate(SigAlg.RSA_PSS_SHA256)
    doc = random.Random(25).randbytes(doc_bytes)
    cases: list[VerifyCase] = []
    for g in group_sizes:
        cases += _chain_cases(doc, g, key)
        for mode in TREE_MODES:
            cases += _tree_cases(doc, g, key, mode)
    for case in cases:
        released = case.verify()
        want = MIB if case.kind == "slice" else case.nbytes
        if released != want:
            raise AssertionError(f"{case.name}: released {released} bytes, not {want}")
    return cases


def _cpu_seconds(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


@dataclass(frozen=True)
class CpuFigure:
    """A case's CPU seconds per repeat, verifier and plain hash alternating (measured)."""

    mode: str
    group_size: int
    kind: str
    nbytes: int
    verify_s: tuple[float, ...]
    plain_s: tuple[float, ...]


def measure_verify_cpu(quick: bool = True, repeats: int = 5,
                       group_sizes: Iterable[int] = GROUP_SIZES,
                       key: SigningKey | None = None) -> list[CpuFigure]:
    """Time every :func:`verify_cases` case and its plain hash, ``repeats`` rounds, each round
    every case in turn (verify, plain, next case, ...).  Document: 4 MiB (``quick``) or 16 MiB.
    """
    cases = verify_cases((4 if quick else 16) * MIB, group_sizes, key)
    times: dict[str, tuple[list[float], list[float]]] = {c.name: ([], []) for c in cases}
    for _ in range(repeats):
        for c in cases:
            times[c.name][0].append(_cpu_seconds(c.verify))
            times[c.name][1].append(_cpu_seconds(c.plain))
    return [CpuFigure(c.mode, c.group_size, c.kind, c.nbytes, tuple(times[c.name][0]),
                      tuple(times[c.name][1])) for c in cases]


def cpu_table(figures: Iterable[CpuFigure]) -> pd.DataFrame:
    """Per case: verification and plain-hash CPU per MB (10^6 bytes, median and range) and
    the ratio plain / verify (= verify MB/s over plain MB/s; median of the per-pair ratios)."""
    rows = []
    for f in figures:
        mb = f.nbytes / 1e6
        ratios = [p / v if v else float("inf") for v, p in zip(f.verify_s, f.plain_s, strict=True)]
        rows.append({
            "mode": f.mode, "group_KiB": f.group_size // 1024, "kind": f.kind,
            "bytes": f.nbytes, "repeats": len(f.verify_s),
            "verify_ms_per_MB": statistics.median(f.verify_s) / mb * 1e3,
            "verify_ms_per_MB_min": min(f.verify_s) / mb * 1e3,
            "verify_ms_per_MB_max": max(f.verify_s) / mb * 1e3,
            "plain_ms_per_MB": statistics.median(f.plain_s) / mb * 1e3,
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "plain_hash": "blake3" if f.mode == "tree-blake3" else "hashlib SHA-256",
            "kind_of_number": "measured (process CPU time, interleaved repeats)",
        })
    return pd.DataFrame(rows)


def calibration(figures: Iterable[CpuFigure], source: str = "") -> VerifyCpu:
    """The model's CPU per byte: each case's median seconds over its bytes."""
    figures = list(figures)
    per_byte = {(f.kind, f.mode, f.group_size): statistics.median(f.verify_s) / f.nbytes
                for f in figures}
    n = min((len(f.verify_s) for f in figures), default=0)
    return VerifyCpu(per_byte, source or f"measured in this run (median of {n} repeats, "
                                         "process CPU time, real verifiers)")


# -- true by construction: bytes ---------------------------------------------------------------


def overhead_table(length: int = GB, key: SigningKey | None = None,
                   group_sizes: Iterable[int] = GROUP_SIZES, heads: HeadSizes | None = None
                   ) -> pd.DataFrame:
    """Per mode and size: bytes beyond the document to fetch it whole, verified; and the bytes
    fetched for a verified 1 MiB range at 90 % (beyond the MiB; and as a multiple of it)."""
    heads = heads or head_sizes(key or SigningKey.generate(SigAlg.RSA_PSS_SHA256), PATH, length)
    first = int(0.9 * length)
    rows = []
    for mode in MODES:
        for g in group_sizes:
            whole = whole_overhead(mode, length, g, heads)
            r = range_fetch(mode, length, g, first, first + MIB - 1, heads)
            rows.append({"mode": mode, "group_KiB": g // 1024, "whole_overhead_bytes": whole,
                         "whole_overhead_pct": 100 * whole / length,
                         "range90_fetched_bytes": r.wire, "range90_overhead_bytes": r.overhead,
                         "range90_over_range": r.wire / r.useful,
                         "kind": "true by construction (format lengths; heads from the "
                                 f"real encoders, {heads.signature})"})
    return pd.DataFrame(rows)


# -- modelled: time --------------------------------------------------------------------------


def bandwidths(quick: bool) -> tuple[float, ...]:
    """The client lines of the sweep: the paper's Figure 5 values (quick: three of them)."""
    return (512e3, 4e6, 100e6) if quick else SINE_BANDWIDTHS


def range_costs(cpu: VerifyCpu, quick: bool = True, length: int = GB,
                client_bw: Sequence[float] | None = None, key: SigningKey | None = None,
                group_sizes: Iterable[int] = GROUP_SIZES, heads: HeadSizes | None = None,
                scenario: Scenario | None = None) -> pd.DataFrame:
    """Per client line, position, mode and size: seconds to a verified 1 MiB range and to the
    first verified byte, beside the unverified fetch of the same range through the same warm
    cache (``ratio`` = verified / unverified).  ``position`` 0 is a stream from byte 0 (first
    verified byte only; for a tree the combined stream, and ``first_byte_outboard_s`` with the
    whole outboard fetched first)."""
    heads = heads or head_sizes(key or SigningKey.generate(SigAlg.RSA_PSS_SHA256), PATH, length)
    base = scenario or Scenario()
    kind = (f"modelled (SimPy, {base.client_delay * 1e3:g} ms one way, request/header "
            f"{base.request}/{base.header} B; verification CPU: {cpu.source})")
    groups = list(group_sizes)
    rows = []
    for bw in client_bw or bandwidths(quick):
        sc = Scenario(client_bw=bw, client_delay=base.client_delay, tcp=base.tcp,
                      request=base.request, header=base.header)
        for frac in (0.0, *POSITIONS):
            first = int(frac * length)
            ref_first = fetch_time(first_verified_fetch(UNVERIFIED, length, groups[0], first,
                                                        heads), sc, cpu)
            ref = (fetch_time(range_fetch(UNVERIFIED, length, groups[0], first,
                                          first + MIB - 1, heads), sc, cpu) if frac else None)
            for mode in MODES:
                for g in groups:
                    fv = first_verified_fetch(mode, length, g, first, heads)
                    row: dict[str, Any] = {
                        "client_kbps": bw / 1e3, "position_pct": round(100 * frac),
                        "mode": mode, "family": "chain" if mode in CHAIN_MODES else "tree",
                        "group_KiB": g // 1024,
                        "first_byte_s": fetch_time(fv, sc, cpu),
                        "first_byte_unverified_s": ref_first}
                    row["first_byte_ratio"] = row["first_byte_s"] / ref_first
                    if mode in TREE_MODES and not frac:  # the outboard first, then the body
                        ob = first_verified_fetch(mode, length, g, 0, heads, outboard=True)
                        row["first_byte_outboard_s"] = fetch_time(ob, sc, cpu)
                    if ref is not None:
                        f = range_fetch(mode, length, g, first, first + MIB - 1, heads)
                        row.update(range_s=fetch_time(f, sc, cpu), range_unverified_s=ref,
                                   range_bytes=f.wire)
                        row["ratio"] = row["range_s"] / ref
                    rows.append({**row, "kind": kind})
    return pd.DataFrame(rows)


def goal_check(costs: pd.DataFrame, position_pct: int = 90) -> pd.DataFrame:
    """Per client line: the worst tree ratio and the smallest chain ratio at ``position_pct``
    beside the issue's goal (tree ≤ 1.1, chain ≥ 90), the worst case's mode and size."""
    at = costs[(costs.position_pct == position_pct) & costs.ratio.notna()]
    rows = []
    for bw, g in at.groupby("client_kbps"):
        tree = g[g.family == "tree"].sort_values("ratio")
        chain = g[g.family == "chain"].sort_values("ratio")
        worst, best = tree.iloc[-1], chain.iloc[0]
        rows.append({
            "client_kbps": bw,
            "tree_worst_ratio": worst.ratio,
            "tree_worst": f"{worst['mode']} {worst.group_KiB} KiB",
            "tree_best_ratio": tree.ratio.min(),
            "tree_goal_met": bool(worst.ratio <= GOAL_TREE_MAX),
            "tree_sizes_meeting_goal": ", ".join(sorted(
                {f"{r['mode']} {r.group_KiB} KiB" for _, r in tree.iterrows()
                 if r.ratio <= GOAL_TREE_MAX})),
            "chain_least_ratio": best.ratio,
            "chain_least": f"{best['mode']} {best.group_KiB} KiB",
            "chain_goal_met": bool(best.ratio >= GOAL_CHAIN_MIN),
            "kind": worst["kind"]})
    return pd.DataFrame(rows)


def tree_breakdown(cpu: VerifyCpu, client_bw: float = 100e6, position: float = 0.9,
                   length: int = GB, key: SigningKey | None = None,
                   group_sizes: Iterable[int] = GROUP_SIZES, heads: HeadSizes | None = None
                   ) -> pd.DataFrame:
    """A tree range's time over the unverified fetch, in shares of the unverified time: the
    widened groups alone in one exchange (``widening``), then the head and proof exchanges
    before it (``exchanges``: two more round trips and their bytes), then the slice's CPU
    after the last byte (``cpu``).  The three add up to ``ratio - 1``."""
    heads = heads or head_sizes(key or SigningKey.generate(SigAlg.RSA_PSS_SHA256), PATH, length)
    sc = Scenario(client_bw=client_bw)
    first = int(position * length)
    last = first + MIB - 1
    none = VerifyCpu.none()
    ref = fetch_time(range_fetch(UNVERIFIED, length, GROUP_SIZES[0], first, last, heads), sc,
                     none)
    rows = []
    for mode in TREE_MODES:
        for g in group_sizes:
            f = range_fetch(mode, length, g, first, last, heads)
            alone = Fetch(UNVERIFIED, g, (f.bodies[-1],), f.useful, 0, 0, True)
            widened, net = fetch_time(alone, sc, none), fetch_time(f, sc, none)
            full = fetch_time(f, sc, cpu)
            rows.append({"mode": mode, "group_KiB": g // 1024, "client_kbps": client_bw / 1e3,
                         "position_pct": round(100 * position), "unverified_s": ref,
                         "ratio": full / ref, "widening": (widened - ref) / ref,
                         "exchanges": (net - widened) / ref, "cpu": (full - net) / ref,
                         "kind": f"modelled (SimPy; CPU: {cpu.source})"})
    return pd.DataFrame(rows)
