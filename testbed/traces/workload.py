"""Turning a parsed access log into a replayable workload, exactly as the SSL-splitting paper did.

§6.3 of the paper: *"all non-GET, non-status-200 queries were filtered out, URLs were
canonicalized, and every (URL, size) pair was encoded as a unique URL."* This module does those
three steps on a request table from :mod:`netsim.logparse` and then cuts the result into the
pieces the experiments replay: ~10 MB daytime chunks, days, months, the whole trace.

A *workload* is a DataFrame sorted by time with columns ``time`` (int64 s), ``url``
(canonical), ``size`` (int64 bytes) and ``obj`` (int64 object id, dense ``0..n_objects-1`` in
order of first appearance). Two requests for the same URL with different sizes are different
objects: the file changed, so a cache holding the old bytes does not help.

URL canonicalisation (:func:`canonical_url`) follows RFC 3986 §6.2.2: drop ``scheme://host``
and the ``#fragment``; decode %-escapes of unreserved characters and upper-case the others;
collapse ``//``; resolve ``.`` and ``..`` segments; keep the query. It runs once per *distinct*
URL (a few hundred thousand at most), so the whole step stays vectorised in pandas.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

import numpy as np
import pandas as pd

__all__ = [
    "canonical_url",
    "canonicalise",
    "preprocess",
    "daytime_chunks",
    "select_chunk",
    "window",
    "DAY",
]

#: Seconds in a day.
DAY = 86_400

_SCHEME_HOST = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _fix_escape(m: re.Match[str]) -> str:
    byte = int(m.group(1), 16)
    return chr(byte) if byte in _UNRESERVED else "%" + m.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, on a path that already starts with '/' and has no '//'."""
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


@lru_cache(maxsize=1 << 16)
def canonical_url(url: str) -> str:
    """Canonical form of one request target.

    >>> canonical_url("http://www.lcs.mit.edu//a/./b/../c%7e.html?q=%2f#top")
    '/a/c~.html?q=%2F'
    """
    url = url.strip()
    url = _SCHEME_HOST.sub("", url, count=1)
    url = url.split("#", 1)[0]
    path, sep, query = url.partition("?")
    if "%" in path:
        path = _ESCAPE.sub(_fix_escape, path)
    if "%" in query:
        query = _ESCAPE.sub(_fix_escape, query)
    if not path.startswith("/"):
        path = "/" + path
    while "//" in path:
        path = path.replace("//", "/")
    if "/." in path:
        path = _remove_dot_segments(path)
    return path + sep + query


def canonicalise(urls: pd.Series) -> pd.Series:
    """Canonicalise a column of URLs, computing each distinct URL only once."""
    codes, uniques = pd.factorize(urls, sort=False)
    canon = np.array([canonical_url(str(u)) for u in uniques], dtype=object)
    if len(canon) == 0:
        return pd.Series([], dtype=object, index=urls.index)
    return pd.Series(canon[codes], index=urls.index, dtype=object)


def preprocess(table: pd.DataFrame, sort: bool = True) -> pd.DataFrame:
    """Keep GET/200 requests with a known size, canonicalise URLs, assign (URL, size) ids.

    ``sort=True`` orders requests by time (stable, so equal timestamps keep log order); logs
    such as the WorldCup98 sample are not in time order. Returns a workload (see module doc).
    """
    keep = (table["method"] == "GET") & (table["status"] == 200) & (table["size"] >= 0)
    work = table.loc[keep, ["time", "url", "size"]]
    if sort:
        work = work.sort_values("time", kind="stable")
    work = work.reset_index(drop=True)
    work["url"] = canonicalise(work["url"])
    work["size"] = work["size"].astype(np.int64)
    work["time"] = work["time"].astype(np.int64)
    url_codes, _ = pd.factorize(work["url"], sort=False)
    size_codes, size_uniques = pd.factorize(work["size"], sort=False)
    key = url_codes.astype(np.int64) * max(len(size_uniques), 1) + size_codes
    obj, _ = pd.factorize(key, sort=False)
    work["obj"] = obj.astype(np.int64)
    return work


def window(work: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """Requests with ``start <= time < end`` (seconds)."""
    t = work["time"].to_numpy()
    lo, hi = np.searchsorted(t, [start, end], side="left")
    return work.iloc[lo:hi]


def daytime_chunks(work: pd.DataFrame, volume: int, first_hour: int = 9,
                   last_hour: int = 18) -> Iterator[pd.DataFrame]:
    """Consecutive chunks of about ``volume`` transferred bytes that start in working hours.

    A chunk starts at the first request at or after ``first_hour`` o'clock (local) of a day
    and extends request by request until its transfer volume reaches ``volume``; the next
    chunk of the same day starts where it ended, as long as it still starts before
    ``last_hour``. A request larger than ``volume`` forms a chunk of its own.
    """
    if volume <= 0:
        raise ValueError(f"chunk volume must be positive, got {volume}")
    t = work["time"].to_numpy()
    if not len(t):
        return
    cum = np.cumsum(work["size"].to_numpy())
    day0 = int(t[0] // DAY)
    for day in range(day0, int(t[-1] // DAY) + 1):
        start = int(np.searchsorted(t, day * DAY + first_hour * 3600))
        stop_time = day * DAY + last_hour * 3600
        while start < len(t) and t[start] < stop_time:
            base = cum[start - 1] if start else 0
            end = int(np.searchsorted(cum, base + volume, side="left")) + 1
            end = min(max(end, start + 1), len(t))
            if cum[end - 1] - base < volume and end == len(t):
                return  # the trace ran out: an incomplete chunk is not a chunk
            yield work.iloc[start:end]
            start = end


def select_chunk(work: pd.DataFrame, volume: int, which: str = "median",
                 target: float | None = None) -> pd.DataFrame:
    """One "typical daytime chunk", as the paper chose for its replays.

    ``which="median"`` takes the chunk whose inherent compressibility (transferred / unique
    bytes) is the median over all daytime chunks; ``"first"`` takes the first one;
    ``"closest"`` takes the chunk whose compressibility is closest to ``target`` (used to pick a
    synthetic chunk like the paper's, whose compressibility is published). If the trace has no
    full daytime chunk, the first ``volume`` bytes of the trace are used.
    """
    chunks = list(daytime_chunks(work, volume))
    if not chunks:
        cum = np.cumsum(work["size"].to_numpy())
        end = int(np.searchsorted(cum, volume, side="left")) + 1
        return work.iloc[:end]
    if which == "first":
        return chunks[0]
    ratios = np.array([_compressibility(c) for c in chunks])
    if which == "closest":
        if target is None:
            raise ValueError("which='closest' needs a target compressibility")
        return chunks[int(np.argmin(np.abs(ratios - target)))]
    if which != "median":
        raise ValueError(f"which must be 'median', 'first' or 'closest', got {which!r}")
    order = np.argsort(ratios, kind="stable")
    return chunks[int(order[len(order) // 2])]


def _compressibility(work: pd.DataFrame) -> float:
    sizes = work["size"].to_numpy()
    first = ~work["obj"].duplicated().to_numpy()
    unique = sizes[first].sum()
    return float(sizes.sum() / unique) if unique else float("nan")
