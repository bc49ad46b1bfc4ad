"""Statistics of access logs and workloads: the numbers in each trace's ``SOURCE.md``.

Definitions (as in the SSL-splitting paper, §6.3):

* **bytes transferred** — sum of the sizes of GET/200 requests;
* **unique bytes** — sum of the sizes of the distinct (canonical URL, size) objects;
* **redundancy** or **inherent compressibility** — transferred / unique: the factor by which
  an ideal protocol with zero overhead and a perfect, initially empty cache could shrink the
  server's traffic. Its inverse is the "ideal" bar of Figures 10 and 11.

:func:`trace_stats` summarises a raw request table plus its workload; :func:`compressibility`,
:func:`repetition_vs_window` and :func:`size_cdf` are the analyses behind Figure 9 and the
"a day compresses 1.5–3×, a month 4×, the whole trace 10×" remarks of the paper.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from .workload import DAY, canonicalise

__all__ = [
    "TraceStats",
    "StatsAccumulator",
    "trace_stats",
    "compressibility",
    "unique_bytes",
    "repetition_vs_window",
    "size_cdf",
    "percentiles",
]


@dataclass(frozen=True)
class TraceStats:
    """Summary of one trace, field for field the table of a ``SOURCE.md``."""

    lines: int
    parsed: int
    malformed: int
    first: pd.Timestamp | None
    last: pd.Timestamp | None
    span_days: float
    days_with_requests: int
    methods: list[tuple[str, int]]
    statuses: list[tuple[str, int]]
    get200: int
    get200_no_size: int
    bytes_transferred: int
    unique_urls: int
    unique_objects: int
    unique_bytes: int
    redundancy: float
    size_percentiles: list[int]
    mean_size: float

    def rows(self) -> list[tuple[str, str]]:
        """(quantity, value) pairs formatted like the ``SOURCE.md`` tables."""
        ts = "%Y-%m-%d %H:%M:%S"
        first = self.first.strftime(ts) if self.first is not None else "n/a"
        last = self.last.strftime(ts) if self.last is not None else "n/a"
        return [
            ("lines (non-empty)", f"{self.lines:,}"),
            ("lines parsed", f"{self.parsed:,}"),
            ("malformed lines", f"{self.malformed:,}"),
            ("first / last timestamp", f"{first} / {last}"),
            ("span (days) / days with requests",
             f"{self.span_days:.2f} / {self.days_with_requests}"),
            ("methods (top)", str(self.methods)),
            ("status codes (top)", str(self.statuses)),
            ("GET/200 requests with size", f"{self.get200:,}"),
            ("GET/200 without numeric size (ignored)", f"{self.get200_no_size:,}"),
            ("bytes transferred (GET/200)",
             f"{self.bytes_transferred:,} B ({self.bytes_transferred / 1e9:.3f} GB)"),
            ("unique URLs (canonical)", f"{self.unique_urls:,}"),
            ("unique (URL,size) objects", f"{self.unique_objects:,}"),
            ("unique bytes", f"{self.unique_bytes:,} B ({self.unique_bytes / 1e9:.3f} GB)"),
            ("redundancy (transferred/unique)", f"{self.redundancy:.3f}"),
            ("request size p10/p50/p90/p99/max (B)", str(self.size_percentiles)),
            ("mean request size (B)", f"{self.mean_size:.1f}"),
        ]


def _top(counter: Counter[Any], n: int = 8) -> list[tuple[Any, int]]:
    """The ``n`` most common items, ties broken by key (deterministic across chunkings)."""
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def percentiles(sizes: np.ndarray, qs: tuple[float, ...] = (10, 50, 90, 99)) -> list[int]:
    """Request-size percentiles (nearest-rank, lower) followed by the maximum."""
    if not len(sizes):
        return []
    vals = np.percentile(sizes, qs, method="lower")
    return [int(v) for v in vals] + [int(np.max(sizes))]


def unique_bytes(work: pd.DataFrame) -> int:
    """Sum of the sizes of the distinct objects of a workload."""
    first = ~work["obj"].duplicated().to_numpy()
    return int(work["size"].to_numpy()[first].sum())


def compressibility(work: pd.DataFrame) -> float:
    """Inherent compressibility of a workload: bytes transferred / unique bytes."""
    u = unique_bytes(work)
    return float(work["size"].sum() / u) if u else float("nan")


def trace_stats(table: pd.DataFrame, work: pd.DataFrame, lines: int | None = None,
                malformed: int = 0) -> TraceStats:
    """Statistics of a raw request ``table`` and its preprocessed ``work``-load."""
    t = table["time"].to_numpy()
    first = pd.Timestamp(int(t.min()), unit="s") if len(t) else None
    last = pd.Timestamp(int(t.max()), unit="s") if len(t) else None
    methods = _top(Counter(table["method"].astype(str).tolist()))
    status = table["status"].to_numpy()
    status_counts = _top(Counter(status.tolist()))
    statuses = [("-" if s < 0 else str(s), n) for s, n in status_counts]
    is_get200 = (table["method"] == "GET").to_numpy() & (status == 200)
    no_size = int((is_get200 & (table["size"].to_numpy() < 0)).sum())
    sizes = work["size"].to_numpy()
    transferred = int(sizes.sum())
    uniq = unique_bytes(work)
    return TraceStats(
        lines=lines if lines is not None else len(table) + malformed,
        parsed=len(table),
        malformed=malformed,
        first=first,
        last=last,
        span_days=float((t.max() - t.min()) / DAY) if len(t) else 0.0,
        days_with_requests=int(len(np.unique(t // DAY))) if len(t) else 0,
        methods=methods,
        statuses=statuses,
        get200=len(work),
        get200_no_size=no_size,
        bytes_transferred=transferred,
        unique_urls=int(work["url"].nunique()),
        unique_objects=int(work["obj"].nunique()),
        unique_bytes=uniq,
        redundancy=transferred / uniq if uniq else float("nan"),
        size_percentiles=percentiles(sizes),
        mean_size=float(sizes.mean()) if len(sizes) else float("nan"),
    )


class StatsAccumulator:
    """Memory-bounded :func:`trace_stats`: feed request-table chunks, then ask for the result.

    Memory grows with the number of distinct objects (and 8 bytes per GET/200 request for the
    size percentiles), not with the log's size, so multi-GB logs can be summarised chunk by
    chunk (:func:`netsim.logparse.iter_log`). Gives exactly the numbers of :func:`trace_stats`.

        >>> acc = StatsAccumulator()
        >>> for chunk in iter_log(paths, report=report):    # doctest: +SKIP
        ...     acc.add(chunk)
        >>> acc.result(report.lines, report.malformed)        # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.parsed = 0
        self.t_min: int | None = None
        self.t_max: int | None = None
        self.days: set[int] = set()
        self.methods: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.no_size = 0
        self.transferred = 0
        self.urls: set[str] = set()
        self.objects: set[tuple[str, int]] = set()
        self.unique = 0
        self._sizes: list[np.ndarray] = []

    def add(self, table: pd.DataFrame) -> None:
        """Account for one chunk of a request table."""
        if not len(table):
            return
        self.parsed += len(table)
        t = table["time"].to_numpy()
        lo, hi = int(t.min()), int(t.max())
        self.t_min = lo if self.t_min is None else min(self.t_min, lo)
        self.t_max = hi if self.t_max is None else max(self.t_max, hi)
        self.days.update(np.unique(t // DAY).tolist())
        # value_counts() keys are the column's values: str (astype) and int status codes
        self.methods.update(cast("dict[str, int]",
                                 table["method"].astype(str).value_counts().to_dict()))
        self.statuses.update(cast("dict[int, int]",
                                  pd.Series(table["status"].to_numpy()).value_counts().to_dict()))
        status = table["status"].to_numpy()
        size = table["size"].to_numpy()
        get200 = (table["method"] == "GET").to_numpy() & (status == 200)
        self.no_size += int((get200 & (size < 0)).sum())
        keep = get200 & (size >= 0)
        sizes = size[keep].astype(np.int64)
        self._sizes.append(sizes)
        self.transferred += int(sizes.sum())
        urls = canonicalise(table.loc[keep, "url"])
        pairs = pd.DataFrame({"url": urls.to_numpy(), "size": sizes}).drop_duplicates()
        self.urls.update(pairs["url"].tolist())
        for u, z in zip(pairs["url"].tolist(), pairs["size"].tolist(), strict=True):
            if (u, z) not in self.objects:
                self.objects.add((u, z))
                self.unique += z

    def result(self, lines: int | None = None, malformed: int = 0) -> TraceStats:
        """The statistics of everything added so far."""
        sizes = np.concatenate(self._sizes) if self._sizes else np.empty(0, np.int64)
        self._sizes = [sizes]
        stat_top = [("-" if k < 0 else str(k), n) for k, n in _top(self.statuses)]
        extent = ((self.t_min, self.t_max) if self.t_min is not None and self.t_max is not None
                  else None)
        return TraceStats(
            lines=lines if lines is not None else self.parsed + malformed,
            parsed=self.parsed, malformed=malformed,
            first=pd.Timestamp(extent[0], unit="s") if extent else None,
            last=pd.Timestamp(extent[1], unit="s") if extent else None,
            span_days=float((extent[1] - extent[0]) / DAY) if extent else 0.0,
            days_with_requests=len(self.days),
            methods=_top(self.methods), statuses=stat_top,
            get200=len(sizes), get200_no_size=self.no_size,
            bytes_transferred=self.transferred, unique_urls=len(self.urls),
            unique_objects=len(self.objects), unique_bytes=self.unique,
            redundancy=self.transferred / self.unique if self.unique else float("nan"),
            size_percentiles=percentiles(sizes),
            mean_size=float(sizes.mean()) if len(sizes) else float("nan"),
        )


def repetition_vs_window(work: pd.DataFrame, windows_days: tuple[float, ...] = (
        1 / 24, 1 / 4, 1, 7, 30, 91, 10_000), samples: int = 20, seed: int = 0) -> pd.DataFrame:
    """Compressibility of randomly placed windows of several lengths.

    For each window length (days; a length past the trace end means "whole trace"), up to
    ``samples`` windows are placed uniformly at random inside the trace (one numpy Generator
    seeded with ``seed``); each window's transferred / unique bytes is measured. Returns one
    row per window with columns ``window`` (the requested length in days, ``inf`` for "the
    whole trace"), ``window_days`` (actual length), ``start``, ``requests``, ``transferred``,
    ``unique``, ``compressibility``. A requested length at least the trace's span gives a
    single whole-trace row.
    """
    rng = np.random.default_rng(seed)
    t = work["time"].to_numpy()
    rows: list[dict[str, float]] = []
    if not len(t):
        return pd.DataFrame(rows)
    t0, t1 = float(t[0]), float(t[-1]) + 1
    whole_done = False
    for w in sorted(windows_days):
        length = w * DAY
        whole = length >= t1 - t0
        if whole and whole_done:
            continue
        if whole:
            whole_done = True
            starts = [t0]
        else:
            starts = list(rng.uniform(t0, t1 - length, size=samples))
        for s in starts:
            lo, hi = np.searchsorted(t, [s, s + length])
            part = work.iloc[lo:hi]
            if not len(part):
                continue
            u = unique_bytes(part)
            tr = int(part["size"].sum())
            rows.append({"window": float("inf") if whole else w,
                         "window_days": min(length, t1 - t0) / DAY, "start": s,
                         "requests": len(part), "transferred": tr, "unique": u,
                         "compressibility": tr / u})
    return pd.DataFrame(rows)


def size_cdf(sizes: np.ndarray | pd.Series, points: int = 200) -> pd.DataFrame:
    """Empirical CDF of request sizes on a log-spaced grid (Figure 9).

    Returns columns ``size`` (bytes) and ``cdf`` (fraction of requests with size <= ``size``).
    """
    s = np.sort(np.asarray(sizes, dtype=np.float64))
    if not len(s):
        return pd.DataFrame({"size": [], "cdf": []})
    lo = max(s[0], 1.0)
    grid = np.unique(np.geomspace(lo, max(s[-1], lo * 1.0001), points))
    cdf = np.searchsorted(s, grid, side="right") / len(s)
    return pd.DataFrame({"size": grid, "cdf": cdf})
