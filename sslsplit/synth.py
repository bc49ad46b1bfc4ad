"""Synthetic web workloads: Zipf-like popularity, heavy-tailed sizes, temporal locality.

The paper's ``www.lcs`` and ``amsterdam`` logs are not public, so to approximate its full-trace
experiment at its real scale (seven months, millions of requests) this module generates
workloads with the same *statistics*:

* **catalogue** — ``n_objects`` files; sizes log-normal (``size_median``, ``size_sigma``) with
  a Pareto tail (``tail_fraction`` of the files, index ``tail_alpha``, from ``tail_min``);
  files appear over time: ``initial_fraction`` exist at the start, the rest are born at
  uniformly random times (the site grows);
* **popularity** — a Zipf law with exponent ``zipf_alpha`` over a random ranking of files
  (independent of size);
* **temporal locality** — a fraction ``hot_fraction`` of requests goes to files born in the
  last few days, with weight ``zipf · exp(-age / hot_days) · (size / median)^hot_size_bias``
  (news, new papers, software releases: a new large file draws a burst of downloads), the
  rest to all existing files by popularity (long-term repetition);
* **change** — a fraction ``dynamic_fraction`` of files is rewritten every ``change_days`` on
  average; each version is a new (URL, size) object, exactly like a real log after the
  paper's preprocessing;
* **arrivals** — Poisson, ``requests_per_day`` on average, with a diurnal profile peaking in
  the afternoon (``diurnal`` = peak-to-mean amplitude).

:func:`generate` is vectorised per simulated day and uses one ``numpy.random.Generator``
seeded from ``seed``; 10^7 requests take a few seconds. :func:`fit_params` estimates the
parameters from a real workload; :data:`LCS_LIKE` is tuned to the paper's published ``www.lcs``
numbers (seven months, 109 GB transferred from 10.6 GB of files, a day compressible 1.5–3×, a
month about 4×, the whole trace about 10×); :data:`AMSTERDAM_LIKE` to the ``amsterdam`` totals.

The output is a workload (see :mod:`testbed.traces.workload`) whose ``url`` column holds integer file
ids instead of strings, to keep 10^7-request traces small in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from tqdm import tqdm

from testbed.traces.workload import DAY

__all__ = ["SynthParams", "LCS_LIKE", "AMSTERDAM_LIKE", "SYNTHETIC", "SYNTHETIC_AMSTERDAM",
           "generate", "fit_params", "scaled"]

#: Name of the synthetic www.lcs-like trace in the DataFrames.
SYNTHETIC = "synthetic-lcs"
#: Name of the synthetic amsterdam-like trace.
SYNTHETIC_AMSTERDAM = "synthetic-amsterdam"

#: Start time of synthetic traces (local wall clock): 1 Sep 2002, 00:00.
EPOCH = int(pd.Timestamp("2002-09-01").timestamp())


@dataclass(frozen=True)
class SynthParams:
    """Parameters of :func:`generate` (see the module docstring). Sizes in bytes, times in days."""

    days: float = 214.0
    requests_per_day: float = 25_000.0
    n_objects: int = 200_000
    zipf_alpha: float = 0.8
    size_median: float = 3_000.0
    size_sigma: float = 1.6
    tail_fraction: float = 0.02
    tail_alpha: float = 1.1
    tail_min: float = 100_000.0
    max_size: float = 2e9
    initial_fraction: float = 0.5
    hot_fraction: float = 0.3
    hot_days: float = 2.0
    hot_size_bias: float = 0.0
    dynamic_fraction: float = 0.05
    change_days: float = 7.0
    diurnal: float = 0.6
    seed: int = 1

    def __post_init__(self) -> None:
        if self.days <= 0 or self.requests_per_day <= 0 or self.n_objects < 1:
            raise ValueError("days, requests_per_day and n_objects must be positive")
        for name in ("tail_fraction", "initial_fraction", "hot_fraction", "dynamic_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        if not 0.0 <= self.diurnal < 1.0:
            raise ValueError(f"diurnal must be in [0, 1), got {self.diurnal}")
        if self.zipf_alpha < 0 or self.hot_days <= 0 or self.change_days <= 0:
            raise ValueError("zipf_alpha must be >= 0, hot_days and change_days > 0")

    @property
    def expected_requests(self) -> float:
        return self.days * self.requests_per_day


#: Tuned to the paper's ``www.lcs`` statistics (§6.3); see the notebook for the comparison.
LCS_LIKE = SynthParams(
    days=214.0, requests_per_day=25_000.0, n_objects=560_000, zipf_alpha=0.85,
    size_median=4_500.0, size_sigma=1.5, tail_fraction=0.02, tail_alpha=1.3,
    tail_min=60_000.0, initial_fraction=0.55, hot_fraction=0.2, hot_days=0.05,
    hot_size_bias=0.3, dynamic_fraction=0.05, change_days=14.0, diurnal=0.6, seed=1)


#: Tuned to the paper's ``amsterdam`` numbers: nine months, 270 GB transferred from 77 GB of
#: files (compressibility 3.5); larger files, flatter popularity, little short-term locality.
AMSTERDAM_LIKE = replace(
    LCS_LIKE, days=274.0, requests_per_day=15_000.0, n_objects=2_000_000, zipf_alpha=0.73,
    size_median=14_000.0, tail_min=94_000.0, tail_fraction=0.04, hot_fraction=0.1, seed=2)


def scaled(params: SynthParams, factor: float) -> SynthParams:
    """The same workload shape at ``factor`` × the requests *and* files (same duration).

    Scaling both keeps the requests per file, hence the repetition statistics, roughly
    unchanged; used for quick runs and for the 10^7-request benchmark.
    """
    if factor <= 0:
        raise ValueError(f"factor must be positive, got {factor}")
    return replace(params, requests_per_day=params.requests_per_day * factor,
                   n_objects=max(int(params.n_objects * factor), 1))


def _sizes(p: SynthParams, rng: np.random.Generator, n: int) -> np.ndarray:
    body = rng.lognormal(math.log(p.size_median), p.size_sigma, n)
    tail = p.tail_min * (1.0 + rng.pareto(p.tail_alpha, n))
    size = np.where(rng.random(n) < p.tail_fraction, tail, body)
    return np.clip(np.round(size), 1, p.max_size).astype(np.int64)


def _day_times(p: SynthParams, rng: np.random.Generator, n: int) -> np.ndarray:
    """Seconds within a day, density ∝ 1 + diurnal·cos(2π(t − 14 h)/24 h) (rejection sampling)."""
    out = np.empty(0)
    while len(out) < n:
        k = int((n - len(out)) * 1.3) + 16
        t = rng.uniform(0, DAY, k)
        accept = rng.uniform(0, 1 + p.diurnal, k) < 1 + p.diurnal * np.cos(
            2 * np.pi * (t - 14 * 3600) / DAY)
        out = np.concatenate([out, t[accept]])
    return np.sort(out[:n])


def generate(params: SynthParams = LCS_LIKE, progress: bool = False) -> pd.DataFrame:
    """A synthetic workload with columns ``time``, ``url`` (int), ``size``, ``obj``."""
    p = params
    rng = np.random.default_rng(p.seed)
    objs = _Objects.draw(p, rng)
    n_days = int(math.ceil(p.days))
    counts = rng.poisson(p.requests_per_day * np.minimum(1.0, p.days - np.arange(n_days)))
    times_parts, file_parts = [], []
    days_iter: Iterable[int] = range(n_days)
    if progress:
        days_iter = tqdm(days_iter, desc="synthetic days", unit="day", mininterval=2.0)
    for day in days_iter:
        k = int(counts[day])
        if k == 0:
            continue
        times_parts.append(day + _day_times(p, rng, k) / DAY)          # in days
        file_parts.append(objs.pick(p, rng, day, k))
    if not times_parts:
        return pd.DataFrame({"time": np.empty(0, np.int64), "url": np.empty(0, np.int64),
                             "size": np.empty(0, np.int64), "obj": np.empty(0, np.int64)})
    return objs.requests(np.concatenate(times_parts), np.concatenate(file_parts))


@dataclass(frozen=True)
class _Objects:
    """The files of a synthetic site, drawn once: size, popularity, birth, how they change."""

    base_size: np.ndarray
    zipf_w: np.ndarray       #: Zipf popularity weight, in a random order over the files
    born: np.ndarray         #: birth day (-1: there from the start)
    dynamic: np.ndarray      #: changes every ``period`` days (a new version, a new size)
    size_bias: np.ndarray    #: weight of large files among the hot picks
    period: np.ndarray
    phase: np.ndarray
    order: np.ndarray        #: files by birth
    born_sorted: np.ndarray

    @classmethod
    def draw(cls, p: SynthParams, rng: np.random.Generator) -> _Objects:
        n = p.n_objects
        base_size = _sizes(p, rng, n)
        zipf_w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** p.zipf_alpha
        zipf_w = zipf_w[rng.permutation(n)]
        born = np.where(rng.random(n) < p.initial_fraction, -1.0, rng.uniform(0, p.days, n))
        dynamic = rng.random(n) < p.dynamic_fraction
        size_bias = (base_size / np.median(base_size)) ** p.hot_size_bias
        period = rng.exponential(p.change_days, n) + 0.5
        phase = rng.uniform(0, 1, n) * period
        order = np.argsort(born, kind="stable")
        return cls(base_size, zipf_w, born, dynamic, size_bias, period, phase, order, born[order])

    def pick(self, p: SynthParams, rng: np.random.Generator, day: int, k: int) -> np.ndarray:
        """The files of ``k`` requests on ``day``: Zipf over the live files, and a hot fraction
        drawn among recent births (decaying over ``hot_days``, biased to large files)."""
        alive = self.order[: int(np.searchsorted(self.born_sorted, day + 1.0, side="right"))]
        hot = rng.random(k) < p.hot_fraction
        files = np.empty(k, dtype=np.int64)
        cum = np.cumsum(self.zipf_w[alive])
        files[~hot] = alive[np.searchsorted(cum, rng.uniform(0, cum[-1], int((~hot).sum())))]
        lo = int(np.searchsorted(self.born_sorted, day - 8 * p.hot_days, side="left"))
        recent = self.order[lo: len(alive)]
        if hot.any() and len(recent):
            age = np.maximum(day + 0.5 - self.born[recent], 0.0)
            w = self.zipf_w[recent] * np.exp(-age / p.hot_days) * self.size_bias[recent]
            cum_h = np.cumsum(w)
            files[hot] = recent[np.searchsorted(cum_h, rng.uniform(0, cum_h[-1], int(hot.sum())))]
        elif hot.any():
            files[hot] = alive[np.searchsorted(cum, rng.uniform(0, cum[-1], int(hot.sum())))]
        return files

    def requests(self, t: np.ndarray, f: np.ndarray) -> pd.DataFrame:
        """Requests at times ``t`` (days) for files ``f`` as the workload table, by time."""
        # requests to a file before its birth (hot picks near birth) are moved to its birth time
        t = np.maximum(t, self.born[f])
        dynamic = self.dynamic[f]
        version = np.where(dynamic, np.floor((t + self.phase[f]) / self.period[f]), 0
                           ).astype(np.int64)
        size = self.base_size[f] + np.where(dynamic, (version * 7919) % 251, 0)
        order_t = np.argsort(t, kind="stable")
        t, f, size, version = t[order_t], f[order_t], size[order_t], version[order_t]
        key = f * (int(version.max()) + 1) + version
        obj, _ = pd.factorize(key, sort=False)
        return pd.DataFrame({
            "time": (EPOCH + np.floor(t * DAY)).astype(np.int64),
            "url": f,
            "size": size.astype(np.int64),
            "obj": obj.astype(np.int64),
        })


def fit_params(work: pd.DataFrame, seed: int = 1) -> SynthParams:
    """Estimate :class:`SynthParams` from a real workload (rough, moment-style fits).

    * ``days`` and ``requests_per_day`` from the time span;
    * ``n_objects`` = distinct URLs; ``dynamic_fraction`` from URLs seen with several sizes;
    * ``zipf_alpha`` from a least-squares line through log(requests) vs log(rank) of the
      top 1,000 URLs;
    * size median and sigma from the log of per-object sizes; tail from the objects above
      the 98th percentile (Hill estimator);
    * ``hot_fraction`` from the share of requests to objects first requested in the previous
      day (a crude locality measure).
    """
    if not len(work):
        raise ValueError("cannot fit a synthetic workload to an empty trace")
    t = work["time"].to_numpy()
    days = max((t[-1] - t[0]) / DAY, 1.0 / 24)
    counts = work["url"].value_counts().to_numpy()
    top = counts[: min(1000, len(counts))]
    if len(top) >= 3:
        ranks = np.arange(1, len(top) + 1)
        slope = np.polyfit(np.log(ranks), np.log(top), 1)[0]
        alpha = float(min(max(-slope, 0.0), 3.0))
    else:
        alpha = 0.0
    first = ~work["obj"].duplicated().to_numpy()
    sizes = work["size"].to_numpy()[first].astype(np.float64)
    logs = np.log(np.maximum(sizes, 1.0))
    q98 = np.quantile(sizes, 0.98)
    tail = sizes[sizes > q98]
    hill = (1.0 / np.mean(np.log(tail / q98))) if len(tail) > 5 and q98 > 0 else 1.2
    n_urls = int(work["url"].nunique())
    n_obj = int(work["obj"].nunique())
    first_time = work.groupby("obj")["time"].transform("min").to_numpy()
    recent = (t - first_time) < DAY
    hot = float(np.mean(recent & ~first)) if len(t) else 0.0
    return SynthParams(
        days=float(days), requests_per_day=len(work) / days, n_objects=max(n_urls, 1),
        zipf_alpha=alpha, size_median=float(np.exp(np.median(logs))),
        size_sigma=max(float(np.std(logs)), 0.1), tail_fraction=0.02,
        tail_alpha=float(min(max(hill, 0.5), 3.0)), tail_min=float(max(q98, 1.0)),
        max_size=float(sizes.max()), initial_fraction=0.8, hot_fraction=min(hot, 0.9),
        hot_days=1.0, dynamic_fraction=min((n_obj - n_urls) / max(n_urls, 1), 1.0),
        change_days=max(days / 2, 0.5), diurnal=0.5, seed=seed)
