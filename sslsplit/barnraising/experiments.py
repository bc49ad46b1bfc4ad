"""Barnraising experiments on the SimPy model (:mod:`sslsplit.barnraising.model_site`).

Each function returns a pandas DataFrame; ``quick=True`` runs a CI-sized slice (the first hours
of the trace, fewer volunteer counts). The traces are the bundled real logs read through
:func:`testbed.traces.catalogue.load_workload`: EPA-HTTP (one day of a government web server) for the
steady-state sweeps and the WorldCup98 day-6 sample for the flash crowd.

* :func:`scale_sweep` — origin bytes, client latency and the fraction of responses whose payload
  came from the volunteers' shared cache vs the origin, for 10 to 10^4 volunteers, with and
  without malicious volunteers, next to the origin alone.
* :func:`eviction_times` — how long a bad volunteer stays in DNS, per feedback deadline, split
  into malicious volunteers (removed by the feedback loop) and crashed ones (lease or feedback).
* :func:`flash_crowd` — per-minute origin uplink utilisation and mean client latency for the
  WorldCup98 burst, origin alone vs with Barnraising.
* :func:`calibration_table` — the parameters and where each value comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from testbed.traces.catalogue import load_workload

from .model_site import ModelParams, calibrate, simulate

__all__ = ["STEADY_TRACE", "FLASH_TRACE", "trace_slice", "scale_sweep", "eviction_times",
           "flash_crowd", "calibration_table"]

STEADY_TRACE = "EPA-HTTP"
FLASH_TRACE = "WorldCup98-day6-sample"
QUICK_HOURS = 3.0


def trace_slice(name: str, hours: float | None = None, start_hour: float = 0.0) -> pd.DataFrame:
    """The preprocessed workload of a bundled trace, optionally ``hours`` long from
    ``start_hour`` after its first request."""
    work = load_workload(name)
    if hours is None and start_hour == 0.0:
        return work
    t0 = float(work["time"].iloc[0]) + start_hour * 3600.0
    end = np.inf if hours is None else t0 + hours * 3600.0
    return work[(work["time"] >= t0) & (work["time"] < end)].reset_index(drop=True)


def _trace(name: str, quick: bool, trace: pd.DataFrame | None) -> pd.DataFrame:
    if trace is not None:
        return trace
    return trace_slice(name, QUICK_HOURS if quick else None)


class _ScalePoint(TypedDict):
    """The swept arguments of :func:`_scale_point`."""

    volunteers: int
    barnraising: bool
    malicious_fraction: float


def _scale_point(volunteers: int, barnraising: bool, malicious_fraction: float,
                 work: pd.DataFrame, base: ModelParams) -> dict[str, Any]:
    """One point of :func:`scale_sweep` (module level, so Dask workers can import it)."""
    p = replace(base, barnraising=barnraising)
    if barnraising:
        p = replace(p, volunteers=volunteers, malicious_fraction=malicious_fraction)
    return simulate(work, p).summary()


def scale_sweep(quick: bool = True, volunteers: Sequence[int] | None = None,
                malicious: Sequence[float] = (0.0, 0.05), seed: int = 1,
                trace: pd.DataFrame | None = None, base: ModelParams | None = None, *,
                scheduler: str | None = None, workers: int | None = None,
                progress: bool = False) -> pd.DataFrame:
    """One row per (volunteers, malicious fraction) plus the origin-alone row (volunteers 0):
    origin bytes, origin utilisation, mean and 95th-percentile latency (s), fractions of
    responses whose payload came from sharing / origin, evictions.

    Each row is an independent, seeded run, so the rows can run side by side:
    ``scheduler=None`` (the default) runs them one after the other in this process;
    ``"local"`` on a Dask LocalCluster of ``workers`` processes, or a scheduler address
    (``tcp://host:8786``) on a running cluster, through :func:`testbed.sweep.sweep` (the trace
    and the calibrated parameters are sent to each worker once; ``progress`` shows a bar).
    The table is the same either way, row for row.
    """
    work = _trace(STEADY_TRACE, quick, trace)
    counts = list(volunteers) if volunteers is not None else (
        [10, 100, 1000] if quick else [10, 100, 1000, 10_000])
    base = base or calibrate(seed=seed)
    # keys in the order of the summary's first columns, so both ways give the same columns
    points: list[_ScalePoint] = [
        {"volunteers": 0, "barnraising": False, "malicious_fraction": 0.0}]
    points += [{"volunteers": n, "barnraising": True, "malicious_fraction": frac}
               for frac in malicious for n in counts]
    if scheduler is None:
        return pd.DataFrame([_scale_point(**pt, work=work, base=base) for pt in points])
    from testbed.sweep import sweep

    df = sweep(_scale_point, points, scheduler=scheduler, workers=workers, progress=progress,
               constants={"work": work, "base": base}, tidy=False, desc="barnraising scale",
               metadata={"seed": seed, "quick": quick})
    out = df.drop(columns=["seed", "quick"]).reset_index(drop=True)  # metadata columns
    out.attrs = df.attrs
    return out


def eviction_times(quick: bool = True, deadlines: Sequence[float] = (1.0, 2.0, 5.0),
                   volunteers: int | None = None, malicious_fraction: float = 0.05,
                   seed: int = 1, trace: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every eviction of a run per feedback deadline: when (s), how long the volunteer had been
    bad (s; from its first black-holed client, or from its crash), kind, reason, and the bound
    ``deadline + report + lease`` it must respect."""
    work = _trace(STEADY_TRACE, quick, trace)
    n = volunteers if volunteers is not None else (1000 if quick else 10_000)
    frames = []
    for deadline in deadlines:
        p = calibrate(volunteers=n, malicious_fraction=malicious_fraction, deadline=deadline,
                      client_timeout=deadline, seed=seed)
        ev = simulate(work, p).evictions.copy()
        ev["deadline"] = deadline
        ev["bound"] = deadline + p.report_s + p.lease
        frames.append(ev)
    return pd.concat(frames, ignore_index=True)


def flash_crowd(quick: bool = True, volunteers: int = 1000, malicious_fraction: float = 0.0,
                bin_s: float = 60.0, seed: int = 1, trace: pd.DataFrame | None = None
                ) -> pd.DataFrame:
    """Per ``bin_s`` bin of the WorldCup98 sample: requests, origin uplink utilisation (the
    offered origin bytes over the bin's capacity, may exceed 1 when the queue grows) and mean
    client latency (s), for the origin alone and with Barnraising.

    Quick runs use the busiest three hours of the sample."""
    if trace is not None:
        work = trace
    else:
        work = trace_slice(FLASH_TRACE)
        if quick:
            hour = ((work["time"] - work["time"].iloc[0]) // 3600).astype(int)
            busiest = int(hour.value_counts().idxmax())
            work = trace_slice(FLASH_TRACE, QUICK_HOURS, max(0, busiest - 1))
    base = calibrate(volunteers=volunteers, malicious_fraction=malicious_fraction, seed=seed)
    frames = []
    for label, p in (("origin alone", replace(base, barnraising=False)),
                     ("Barnraising", base)):
        res = simulate(work, p)
        req = res.requests
        origin_b = req["size"].where(req["source"] == "origin", 0)
        if p.barnraising:  # stubs and redirects also cross the uplink; spread them per request
            extra = res.origin_bytes - int(origin_b.sum())
            origin_b = origin_b + extra / max(1, len(req))
        else:
            origin_b = origin_b + p.request_overhead_bytes
        b = (req["time"] // bin_s).astype(int)
        g = pd.DataFrame({"bin": b, "bytes": origin_b, "latency": req["latency"]}).groupby("bin")
        out = pd.DataFrame({
            "minute": g.size().index * bin_s / 60.0,
            "requests": g.size().to_numpy(),
            "origin_utilisation": (g["bytes"].sum() * 8.0 / (p.origin_bps * bin_s)).to_numpy(),
            "latency_mean_s": g["latency"].mean().to_numpy(),
        })
        out["setup"] = label
        frames.append(out)
    return pd.concat(frames, ignore_index=True)


def calibration_table(path: str | None = None) -> pd.DataFrame:
    """The model's parameters after calibration, with each value's source."""
    return calibrate(path).table()
