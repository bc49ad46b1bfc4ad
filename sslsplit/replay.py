"""Replaying a workload through a cost model: the simulated bars of Figures 10 and 11.

For every request the server sends ``model.bytes(protocol, size)`` bytes. For SSL splitting,
whether the proxy *hits* (stubs only) or *misses* (stubs plus the payload through the miss
handler) depends on the proxy cache:

``cold``
    the cache is empty when the replay starts and keeps everything it fetched (the paper's
    proxy has no size limit): a request hits iff its object appeared earlier in the replay;
``warm``
    the cache already holds every object of the replay;
``preload``
    the cache holds the objects of a given earlier workload (e.g. the previous two weeks).

With an unbounded cache all of this is vectorised (first occurrences via ``duplicated``), so a
month of requests replays in well under a second. A byte-bounded LRU cache needs a sequential
pass (:func:`hits_lru`), shown with a progress bar on long runs.

:func:`replay` returns the per-protocol totals and the *bandwidth ratio*: server bytes per byte
of file throughput, the y axis of Figures 10 and 11. The "ideal" protocol sends each unique
byte once: its ratio is 1 / inherent compressibility.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from netsim.cache import LRUCache

from .costmodel import Protocol, SplittingCostModel

__all__ = ["hits_unbounded", "hits_lru", "split_bytes", "replay", "CACHE_STATES"]

#: Cache states :func:`replay` understands.
CACHE_STATES = ("cold", "warm")


def hits_unbounded(obj: np.ndarray, preloaded: Iterable[int] | np.ndarray | None = None
                   ) -> np.ndarray:
    """Hit flags with an infinite cache: an object hits after its first request.

    ``preloaded`` object ids are in the cache from the start.
    """
    obj = np.asarray(obj)
    hit = pd.Series(obj).duplicated().to_numpy()
    if preloaded is not None:
        pre = np.asarray(list(preloaded) if not isinstance(preloaded, np.ndarray) else preloaded)
        hit = hit | np.isin(obj, pre)
    return hit


def hits_lru(obj: np.ndarray, sizes: np.ndarray, capacity: int, progress: bool = False
             ) -> np.ndarray:
    """Hit flags with a byte-bounded LRU cache that starts empty (sequential)."""
    cache = LRUCache(capacity)
    out = np.empty(len(obj), dtype=bool)
    it: Iterable[tuple[Any, Any]] = zip(np.asarray(obj).tolist(), np.asarray(sizes).tolist(),
                                        strict=True)
    if progress:
        it = tqdm(it, total=len(obj), desc="LRU replay", unit="req", mininterval=0.5)
    for i, (o, s) in enumerate(it):
        out[i] = cache.request(o, s)
    return out


def split_bytes(model: SplittingCostModel, sizes: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """Server bytes per request for SSL splitting given per-request hit flags."""
    return np.where(hit, model.bytes(Protocol.SPLIT_HIT, sizes),
                    model.bytes(Protocol.SPLIT_MISS, sizes))


def replay(work: pd.DataFrame, model: SplittingCostModel, preload: pd.DataFrame | None = None,
           cache_bytes: int | None = None, progress: bool = False) -> pd.DataFrame:
    """Total server bytes of a workload for HTTP, HTTPS, split cold, split warm and ideal.

    ``preload`` adds a row ``split_preload`` whose cache starts with ``preload``'s objects.
    ``cache_bytes`` bounds the cold cache by LRU (default: unbounded, as in the paper).
    Returns one row per protocol with ``server_bytes``, ``file_bytes``, ``ratio`` (server
    bytes per file byte), ``vs_http`` (ratio / HTTP's ratio), ``hit_fraction`` and
    ``requests``.
    """
    sizes = work["size"].to_numpy(dtype=np.float64)
    obj = work["obj"].to_numpy()
    file_bytes = float(sizes.sum())
    rows: list[dict[str, float | str]] = []

    def add(name: str, server: float, hit_fraction: float = float("nan")) -> None:
        rows.append({"protocol": name, "server_bytes": server, "file_bytes": file_bytes,
                     "hit_fraction": hit_fraction, "requests": len(sizes)})

    add("http", float(model.bytes(Protocol.HTTP, sizes).sum()))
    add("https", float(model.bytes(Protocol.HTTPS, sizes).sum()))
    if cache_bytes is None:
        cold = hits_unbounded(obj)
    else:
        cold = hits_lru(obj, sizes.astype(np.int64), cache_bytes, progress)
    add("split_cold", float(split_bytes(model, sizes, cold).sum()), float(cold.mean()))
    warm = np.ones(len(sizes), dtype=bool)
    add("split_warm", float(split_bytes(model, sizes, warm).sum()), 1.0)
    if preload is not None:
        pre_hit = hits_unbounded(obj, np.unique(preload["obj"].to_numpy()))
        add("split_preload", float(split_bytes(model, sizes, pre_hit).sum()),
            float(pre_hit.mean()))
    first = ~pd.Series(obj).duplicated().to_numpy()
    add("ideal", float(sizes[first].sum()), float("nan"))
    df = pd.DataFrame(rows)
    df["ratio"] = df["server_bytes"] / df["file_bytes"]
    df["vs_http"] = df["ratio"] / float(df.loc[df["protocol"] == "http", "ratio"].iloc[0])
    return df
