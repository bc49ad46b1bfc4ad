"""The SSL-splitting paper's §6.3 trace statistics on real public traces and synthetic ones.

Each function computes one figure or table and returns a pandas DataFrame; plotting lives in
``notebooks/sslsplit_traces.ipynb``. ``quick=True`` gives CI-sized runs (seconds): a smaller
synthetic trace and fewer points; the real traces are small and always used in full.

=========================== ===============================================================
function                    paper
=========================== ===============================================================
:func:`trace_table`         §6.3 trace statistics (requests, GB, compressibility)
:func:`fig9_size_cdf`       Figure 9, CDF of request sizes, chunk vs full trace
:func:`repetition`          "a day compresses 1.5–3×, a month 4×, the whole trace 10×"
:func:`two_weeks_warmth`    "if the previous two weeks had been cached ... 90 % warm"
=========================== ===============================================================

Figures 7, 10/11 and 12 -- from the cost models alone (``measured=False``) or with real runs --
are in :mod:`sslsplit.experiments`, which replays the workloads loaded here
(:func:`load_workloads`, :func:`chunk_of`).

Traces: every manifest trace whose files are present and that has response sizes (the bundled
EPA-HTTP and WorldCup98 sample; LPDAAC-OPeNDAP or the classic ITA traces when fetched or in
``$TRACES_DIR``), plus ``synthetic-lcs`` and ``synthetic-amsterdam``, generated with
:data:`sslsplit.synth.LCS_LIKE` and :data:`sslsplit.synth.AMSTERDAM_LIKE`.

**What kind of number each row is.** The result tables carry a ``kind`` column:

``measured``
    a statistic of a real public log (or, in :mod:`sslsplit.experiments`, a real run);
``modelled``
    an output of the cost model or of a synthetic trace that was *not* tuned to it;
``true by construction``
    a number that matches the paper because something was chosen to make it match: the
    synthetic traces' compressibility (their generators are tuned to the paper's totals and, for
    ``www.lcs``, to its day/month/trace repetition) and the synthetic replay chunk, picked as the
    daytime chunk whose compressibility is closest to the paper's chunk (2.26 or 1.37). The
    ideal protocol's bandwidth (1 / compressibility) inherits this; cold splitting, which stays
    close to the ideal, largely does too.

The published numbers themselves are in :mod:`sslsplit.paper_points`, with their provenance.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from tqdm import tqdm

from sslsplit.synth import (
    AMSTERDAM_LIKE,
    LCS_LIKE,
    SYNTHETIC,
    SYNTHETIC_AMSTERDAM,
    SynthParams,
    generate,
    scaled,
)
from testbed.traces.catalogue import TraceError, load_manifest, load_workload, locate
from testbed.traces.stats import compressibility, repetition_vs_window, size_cdf, unique_bytes
from testbed.traces.workload import DAY, select_chunk, window

from ..costmodel import SplittingCostModel, paper_model
from ..params import CHUNK_BYTES
from ..replay import hits_unbounded, replay

__all__ = [
    "PAPER_TRACES",
    "SYNTHETIC",
    "SYNTHETIC_AMSTERDAM",
    "MEASURED",
    "MODELLED",
    "BY_CONSTRUCTION",
    "trace_kind",
    "trace_note",
    "available_traces",
    "load_workloads",
    "chunk_of",
    "trace_table",
    "fig9_size_cdf",
    "repetition",
    "two_weeks_warmth",
    "run_config",
]

#: Compressibility of the paper's www.lcs replay chunk (4.43 MB of files, 10.0 MB transferred).
LCS_CHUNK_COMPRESSIBILITY = 2.26
#: Compressibility of the paper's amsterdam chunk (8.46 MB of files, 11.6 MB transferred).
AMSTERDAM_CHUNK_COMPRESSIBILITY = 1.37
#: Synthetic traces: name → (parameters, compressibility of the paper's chunk).
SYNTHETICS: dict[str, tuple[SynthParams, float]] = {
    SYNTHETIC: (LCS_LIKE, LCS_CHUNK_COMPRESSIBILITY),
    SYNTHETIC_AMSTERDAM: (AMSTERDAM_LIKE, AMSTERDAM_CHUNK_COMPRESSIBILITY),
}

#: The paper's published trace numbers (§6.3).
PAPER_TRACES = pd.DataFrame([
    {"trace": "www.lcs (paper)", "months": 7, "transferred_GB": 109.0, "unique_GB": 10.6,
     "compressibility": 109.0 / 10.6, "chunk_MB": 10.0, "chunk_unique_MB": 4.43,
     "chunk_compressibility": 2.26},
    {"trace": "amsterdam (paper)", "months": 9, "transferred_GB": 270.0, "unique_GB": 77.0,
     "compressibility": 270.0 / 77.0, "chunk_MB": 11.6, "chunk_unique_MB": 8.46,
     "chunk_compressibility": 1.37},
])

#: Values of the ``kind`` column (see the module docstring).
MEASURED = "measured"
MODELLED = "modelled"
BY_CONSTRUCTION = "true by construction"


def trace_kind(name: str) -> str:
    """Kind of a trace's statistics: true by construction for a synthetic trace (its generator
    was tuned to the paper's numbers), measured for a real log."""
    return BY_CONSTRUCTION if name in SYNTHETICS else MEASURED


def trace_note(name: str, scope: str = "chunk") -> str:
    """One line saying where the compressibility of a trace (``scope="full"``), of its replay
    chunk (``"chunk"``) or of both (``"both"``) comes from."""
    if scope not in ("chunk", "full", "both"):
        raise ValueError(f"scope must be 'chunk', 'full' or 'both', got {scope!r}")
    if name in SYNTHETICS:
        origin = "synthetic"
        full = ": generator tuned to the paper's totals (transferred / unique bytes)"
        chunk = (f"chunk picked as the daytime chunk whose compressibility is closest to the "
                 f"paper's {SYNTHETICS[name][1]}")
    else:
        origin, full, chunk = "public log", "", "median-compressibility daytime chunk"
    if scope == "full":
        return origin + full
    if scope == "chunk":
        return f"{origin}; {chunk}"
    return f"{origin}{full}; {chunk}"


def available_traces(names: Sequence[str] | None = None) -> list[str]:
    """Manifest traces that are present and have response sizes (usable for byte statistics)."""
    man = load_manifest()
    out = []
    for name, entry in man.entries.items():
        if names is not None and name not in names:
            continue
        if entry.format in ("sdsc", "wc98bin"):
            continue  # no sizes, or a format not read directly
        try:
            locate(entry)
        except TraceError:
            continue
        out.append(name)
    return out


def _synthetic(name: str, quick: bool, seed: int) -> pd.DataFrame:
    params = replace(SYNTHETICS[name][0], seed=seed)
    if quick:
        params = scaled(params, 0.1)
    return generate(params, progress=not quick)


def load_workloads(quick: bool = True, names: Sequence[str] | None = None, seed: int = 1,
                   synthetic: bool = True) -> dict[str, pd.DataFrame]:
    """Preprocessed workloads of the available traces, plus the synthetic ones."""
    out = {name: load_workload(name) for name in available_traces(names)}
    if synthetic:
        for i, name in enumerate(SYNTHETICS):
            out[name] = _synthetic(name, quick, seed + i)
    return out


def chunk_of(name: str, work: pd.DataFrame, volume: int = CHUNK_BYTES) -> pd.DataFrame:
    """The replay chunk of a trace: the median daytime chunk; for a synthetic trace, the
    daytime chunk whose compressibility is closest to the paper's chunk (2.26 for www.lcs,
    1.37 for amsterdam)."""
    if name in SYNTHETICS:
        return select_chunk(work, volume, "closest", SYNTHETICS[name][1])
    return select_chunk(work, volume, "median")


def _works(quick: bool, workloads: dict[str, pd.DataFrame] | None) -> dict[str, pd.DataFrame]:
    return workloads if workloads is not None else load_workloads(quick)


def trace_table(quick: bool = True, workloads: dict[str, pd.DataFrame] | None = None
                ) -> pd.DataFrame:
    """Per trace: requests, days, GB transferred and unique, compressibility; chunk likewise.

    ``kind`` is ``true by construction`` for the synthetic traces: their totals and
    compressibility were tuned to the paper's, and their chunk was picked for its
    compressibility (``note`` says which); ``measured`` for public logs.
    """
    rows = []
    for name, w in _works(quick, workloads).items():
        c = chunk_of(name, w)
        t = w["time"].to_numpy()
        rows.append({
            "trace": name, "requests": len(w), "days": (t[-1] - t[0]) / DAY,
            "transferred_GB": w["size"].sum() / 1e9, "unique_GB": unique_bytes(w) / 1e9,
            "compressibility": compressibility(w), "chunk_requests": len(c),
            "chunk_MB": c["size"].sum() / 1e6, "chunk_unique_MB": unique_bytes(c) / 1e6,
            "chunk_compressibility": compressibility(c),
            "chunk_start": str(pd.Timestamp(int(c["time"].iloc[0]), unit="s")),
            "kind": trace_kind(name),
            "note": trace_note(name, "both"),
        })
    return pd.DataFrame(rows)


def fig9_size_cdf(quick: bool = True, workloads: dict[str, pd.DataFrame] | None = None
                  ) -> pd.DataFrame:
    """Figure 9: CDF of request sizes for the chunk and the full trace of each trace."""
    parts = []
    for name, w in _works(quick, workloads).items():
        for scope, part in (("chunk", chunk_of(name, w)), ("full", w)):
            cdf = size_cdf(part["size"].to_numpy(), points=100 if quick else 300)
            cdf.insert(0, "scope", scope)
            cdf.insert(0, "trace", name)
            parts.append(cdf)
    return pd.concat(parts, ignore_index=True)


def repetition(quick: bool = True, workloads: dict[str, pd.DataFrame] | None = None,
               seed: int = 0) -> pd.DataFrame:
    """Compressibility of random windows of 1 h .. the whole trace, per trace.

    ``kind``: ``measured`` on public logs; on ``synthetic-lcs`` ``true by construction`` (its
    generator was tuned to the paper's "a day 1.5-3, a month about 4, the whole trace about
    10"); on ``synthetic-amsterdam`` only the whole trace is tuned, shorter windows are
    ``modelled``.
    """
    parts = []
    for name, w in _works(quick, workloads).items():
        r = repetition_vs_window(w, samples=5 if quick else 20, seed=seed)
        r.insert(0, "trace", name)
        # LCS_LIKE was tuned to the day / month / whole-trace repetition the paper states;
        # AMSTERDAM_LIKE only to the whole-trace totals, so its shorter windows are model output
        if name not in SYNTHETICS:
            r["kind"] = MEASURED
        elif name == SYNTHETIC:
            r["kind"] = BY_CONSTRUCTION
        else:
            r["kind"] = np.where(np.isinf(r["window"]), BY_CONSTRUCTION, MODELLED)
        parts.append(r)
    return pd.concat(parts, ignore_index=True)


class _Chunk(TypedDict):
    """One replay of :func:`two_weeks_warmth`: rows ``lo:hi`` of workload ``trace``."""

    trace: str
    lo: int
    hi: int


def _warmth_point(trace: str, lo: int, hi: int, *, works: dict[str, pd.DataFrame],
                  days: float, model: SplittingCostModel) -> dict[str, Any]:
    """One row of :func:`two_weeks_warmth`: the chunk ``works[trace].iloc[lo:hi]`` replayed
    behind a cache preloaded with the ``days`` before it. Module level, so that Dask workers
    can run it (:mod:`testbed.sweep`)."""
    w = works[trace]
    t0 = int(w["time"].iloc[0])
    c = w.iloc[lo:hi]
    start = int(c["time"].iloc[0])
    history = window(w, start - days * DAY, start)
    obj = c["obj"].to_numpy()
    sizes = c["size"].to_numpy()
    pre = np.unique(history["obj"].to_numpy())
    first = ~pd.Series(obj).duplicated().to_numpy()
    cached = np.isin(obj, pre)
    hit = hits_unbounded(obj, pre)
    r = replay(c, model, preload=history)
    vs = dict(zip(r["protocol"], r["vs_http"], strict=True))
    return {
        "trace": trace, "chunk_start": pd.Timestamp(start, unit="s"),
        "history_days": min(days, (start - t0) / DAY),
        "warm_bytes": float(sizes[first & cached].sum() / sizes[first].sum()),
        "warm_requests": float(hit.mean()),
        "split_cold_vs_http": vs["split_cold"], "split_preload_vs_http":
        vs["split_preload"], "split_warm_vs_http": vs["split_warm"],
        "kind": MODELLED if trace in SYNTHETICS else MEASURED,
    }


def _warmth_day(trace: str, day: int, chunks: tuple[tuple[int, int], ...], *,
                works: dict[str, pd.DataFrame], days: float, model: SplittingCostModel) -> pd.DataFrame:
    """The rows of :func:`two_weeks_warmth` for the chunks (row ranges) of one day of a trace:
    the unit of work a Dask worker receives (one task per day, not per chunk, so that the
    scheduling overhead stays small next to the replays)."""
    return pd.DataFrame([_warmth_point(trace, lo, hi, works=works, days=days, model=model)
                         for lo, hi in chunks])


def two_weeks_warmth(quick: bool = True, workloads: dict[str, pd.DataFrame] | None = None,
                     days: float = 14.0, model: SplittingCostModel | None = None, *,
                     scheduler: str | None = None, workers: int | None = None
                     ) -> pd.DataFrame:
    """How warm a proxy that cached the preceding ``days`` would be for each chunk.

    For daytime chunks with at least one full day of history (evenly spaced, about 30 per trace
    in ``quick`` mode and 200 otherwise), the cache is preloaded with the objects requested
    in ``[start - days, start)``. ``warm_bytes`` is the fraction of the chunk's cacheable
    bytes (first requests of its objects) already cached; ``warm_requests`` the fraction of
    requests hitting at once; ``vs_http`` the resulting splitting bandwidth relative to HTTP.

    ``kind`` applies to ``warm_bytes`` and ``warm_requests``: ``measured`` on a public log,
    ``modelled`` on a synthetic trace (whose generator was *not* tuned to the paper's 90 %).
    The ``*_vs_http`` columns are always modelled.

    Each chunk is an independent replay, so a month-long trace splits by day across Dask
    workers: with ``scheduler`` (``"local"`` for a LocalCluster of ``workers`` processes, or a
    scheduler address ``tcp://host:port``) each day's chunks are one point of
    :func:`testbed.sweep.sweep`; the table is the same as the in-process run's (the default,
    ``scheduler=None``).
    """
    from testbed.traces.workload import daytime_chunks

    model = model or paper_model()
    works = _works(quick, workloads)
    points: list[_Chunk] = []
    for name, w in works.items():
        t0 = int(w["time"].iloc[0])
        # chunks of a position-indexed view, so each is named by its row range in ``w``
        chunks = [(int(c.index[0]), int(c.index[-1]) + 1)
                  for c in daytime_chunks(w.reset_index(drop=True), CHUNK_BYTES)
                  if int(c["time"].iloc[0]) - t0 >= DAY]
        if not chunks:
            continue
        step = max(len(chunks) // (30 if quick else 200), 1)
        points += [{"trace": name, "lo": lo, "hi": hi} for lo, hi in chunks[::step]]
    if not points:
        return pd.DataFrame([])
    if scheduler is None:
        rows = []
        for p in tqdm(points, desc="warmth", disable=quick, unit="chunk", mininterval=2.0):
            rows.append(_warmth_point(**p, works=works, days=days, model=model))
        return pd.DataFrame(rows)
    from testbed.sweep import sweep

    by_day: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for p in points:
        start = int(works[p["trace"]]["time"].iloc[p["lo"]])
        by_day.setdefault((p["trace"], start // DAY), []).append((p["lo"], p["hi"]))
    day_points = [{"trace": t, "day": d, "chunks": tuple(c)} for (t, d), c in by_day.items()]
    df = sweep(_warmth_day, day_points, scheduler=scheduler, workers=workers,
               progress=not quick, constants={"works": works, "days": days, "model": model},
               tidy=False, desc="warmth", metadata={"days": days, "quick": quick})
    cols = [c for c in df.columns if c not in ("day", "chunks", "days", "quick")]
    return df[cols].reset_index(drop=True)


def run_config() -> dict[str, Any]:
    """What this module's results depend on beyond the code and the quick flag, for ``run.json``:
    the traces found (:func:`available_traces`) and whether ``$TRACES_DIR`` points at more.
    The notebooks pass it to :func:`testbed.results.start_run`."""
    return {"traces": available_traces(), "traces_dir": bool(os.environ.get("TRACES_DIR"))}
