"""One sweep helper: run a function over a parameter grid, in process or on ``dask.distributed``.

Every experiment that varies something (seeds, link profiles, cluster sizes, volunteer counts,
trace windows) is a loop ``for point in grid: fn(**point)``. :func:`sweep` runs that loop

* on a fresh :class:`distributed.LocalCluster` by default (one process per worker, ``workers``
  defaulting to the CPU count), so the points of a sweep run side by side on one machine;
* on a running cluster when given its scheduler address (``scheduler="tcp://host:8786"``), so
  the *same* sweep grows past one machine -- start ``dask scheduler`` and ``dask worker`` on
  the machines, with this project installed in each worker's environment;
* in the calling process with ``serial=True``, for debugging with ``pdb`` and for tests.

The result is one tidy :class:`pandas.DataFrame`, the same whichever way the points ran: one
row per (point, result field) by default (``tidy=True``: the point's parameters, ``field``
and ``value``), or one row per point and one column per field (``tidy=False``). ``fn`` may
return a mapping (its fields), a DataFrame (its rows, each carrying the point's parameters) or
a scalar (field ``"value"``). Rows come in grid order. The run metadata
(:func:`netsim.results.run_metadata`) is attached as ``df.attrs["run"]``, and the scalar
settings of ``metadata`` (a seed, a quick flag) also become constant columns, so a table that
leaves its notebook still says how it was made.

A point that raises stops the sweep with :class:`SweepPointError`, whose message names the
point's parameters and whose ``__cause__`` is the original exception.

Large inputs shared by every point (a month of trace, a cost model) go in ``constants``: they
are sent to each worker once (``Client.scatter(..., broadcast=True)``) and passed to ``fn`` as
keyword arguments next to the point's own, instead of being pickled into every task.

    >>> from netsim.sweep import grid, sweep
    >>> def square(x, k=1):
    ...     return {"y": k * x * x}
    >>> sweep(square, grid(x=[1, 2, 3]), constants={"k": 2}, serial=True,
    ...       progress=False, tidy=False)[["x", "y"]].to_dict("list")
    {'x': [1, 2, 3], 'y': [2, 8, 18]}

Command lines and notebooks take the cluster as ``--scheduler`` (:func:`scheduler_arg`, an
``argparse`` type, or :func:`add_scheduler_argument`): ``local`` (the default), ``serial``,
or a ``tcp://``/``tls://`` address. ``dask`` is imported only when a sweep actually uses it.

A script that starts a LocalCluster must do so under ``if __name__ == "__main__":`` -- the
worker processes import the main module again, as with :mod:`multiprocessing`; notebooks and
pytest need nothing special.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from tqdm import tqdm

from .results import run_metadata

__all__ = [
    "LOCAL",
    "SERIAL",
    "SweepError",
    "SweepPointError",
    "add_scheduler_argument",
    "grid",
    "scheduler_arg",
    "sweep",
]

#: ``--scheduler`` value for a fresh LocalCluster (the default).
LOCAL = "local"
#: ``--scheduler`` value for an in-process run.
SERIAL = "serial"

_ADDRESS = re.compile(r"^(tcp|tls|inproc|ws|wss)://[^\s/:]+(:\d{1,5})?/?$")


class SweepError(Exception):
    """A sweep was set up wrongly (empty or malformed grid, bad scheduler address)."""


class SweepPointError(SweepError):
    """One point of a sweep raised; ``point`` holds its parameters, ``__cause__`` the error."""

    def __init__(self, point: Mapping[str, Any], error: BaseException) -> None:
        self.point = dict(point)
        self.error = error
        super().__init__(f"sweep point {self.point!r} failed: {type(error).__name__}: {error}")

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled on a worker, rebuilt on the client: keep the point and the original error
        return (type(self), (self.point, self.error))


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """The product of named axes as a list of points, last axis fastest.

    >>> grid(seed=[1, 2], profile=["adsl", "lan"])  # doctest: +NORMALIZE_WHITESPACE
    [{'seed': 1, 'profile': 'adsl'}, {'seed': 1, 'profile': 'lan'},
     {'seed': 2, 'profile': 'adsl'}, {'seed': 2, 'profile': 'lan'}]
    """
    names = list(axes)
    return [dict(zip(names, values, strict=True))
            for values in itertools.product(*(list(axes[n]) for n in names))]


def scheduler_arg(value: str) -> str:
    """``argparse`` type for ``--scheduler``: ``local``, ``serial`` or a scheduler address.

    Addresses are ``tcp://host[:port]`` (also ``tls://``, ``ws://``, ``wss://``, ``inproc://``);
    anything else raises ``argparse.ArgumentTypeError`` (a ``ValueError``) saying what is
    accepted, so a typo fails before a cluster is contacted.

    >>> scheduler_arg("tcp://10.0.0.5:8786"), scheduler_arg("LOCAL")
    ('tcp://10.0.0.5:8786', 'local')
    """
    v = value.strip()
    if v.lower() in (LOCAL, SERIAL):
        return v.lower()
    m = _ADDRESS.match(v)
    if m and (m.group(2) is None or 0 < int(m.group(2)[1:]) < 65536):
        return v.rstrip("/")
    raise argparse.ArgumentTypeError(
        f"scheduler must be 'local', 'serial' or an address such as tcp://host:8786, "
        f"got {value!r}")


def add_scheduler_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheduler`` (default ``local``) and ``--workers`` to a command line."""
    parser.add_argument("--scheduler", type=scheduler_arg, default=LOCAL,
                        help="where sweeps run: 'local' (a LocalCluster, the default), "
                             "'serial' (in process) or a Dask scheduler address tcp://host:port")
    parser.add_argument("--workers", type=int, default=None,
                        help="LocalCluster worker processes (default: CPU count)")


def _call(fn: Callable[..., Any], point: Mapping[str, Any], constants: Mapping[str, Any]
          ) -> Any:
    """Run one point; an exception comes back as a :class:`SweepPointError` naming it."""
    try:
        return fn(**point, **constants)
    except Exception as exc:
        raise SweepPointError(point, exc) from exc


def _rows(point: Mapping[str, Any], result: Any, tidy: bool) -> pd.DataFrame:
    """The table rows of one point's result (see the module docstring)."""
    if isinstance(result, pd.DataFrame):
        df = result.copy()
        for i, (k, v) in enumerate(point.items()):
            if k not in df.columns:
                df.insert(i, k, [v] * len(df))
        if tidy:
            fields = [c for c in df.columns if c not in point]
            df = df.reset_index(drop=True).melt(id_vars=list(point), value_vars=fields,
                                                var_name="field", value_name="value")
        return df
    fields = dict(result) if isinstance(result, Mapping) else {"value": result}
    if tidy:
        return pd.DataFrame([{**point, "field": k, "value": v} for k, v in fields.items()])
    return pd.DataFrame([{**point, **fields}])


def _client(scheduler: str | None, workers: int | None) -> tuple[Any, Any]:
    """A connected ``distributed.Client`` and the LocalCluster it owns (or ``None``)."""
    from distributed import Client, LocalCluster

    if scheduler in (None, LOCAL):
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    return Client(scheduler_arg(scheduler)), None


def sweep(fn: Callable[..., Any], points: Sequence[Mapping[str, Any]] | Mapping[str, Iterable],
          *, scheduler: str | None = None, workers: int | None = None, progress: bool = True,
          metadata: Mapping[str, Any] | None = None, constants: Mapping[str, Any] | None = None,
          serial: bool = False, tidy: bool = True, desc: str = "sweep") -> pd.DataFrame:
    """Run ``fn(**point, **constants)`` for every point and return one table of the results.

    ``points`` is a list of parameter dicts or a mapping of axes (expanded by :func:`grid`).
    ``scheduler`` is ``None``/``"local"`` (a LocalCluster of ``workers`` processes, CPU count by
    default), ``"serial"`` (same as ``serial=True``) or a scheduler address. ``fn`` must be
    importable by the workers (a module-level function), as must its arguments be picklable.
    ``progress`` shows a tqdm bar over completed points. ``metadata`` is the experiment's own
    configuration, recorded in ``df.attrs["run"]`` (:func:`netsim.results.run_metadata`)
    with its scalar entries also added as columns (unless a column of that name exists).

    Raises :class:`SweepPointError` for the first point (in grid order) that failed, and
    :class:`SweepError` for an empty grid or points with differing parameter names.
    """
    pts = grid(**points) if isinstance(points, Mapping) else [dict(p) for p in points]
    if not pts:
        raise SweepError("the sweep grid is empty")
    keys = set(pts[0])
    for p in pts:
        if set(p) != keys:
            raise SweepError(f"every point needs the same parameters: {sorted(keys)} vs "
                             f"{sorted(p)}")
    consts = dict(constants or {})
    clash = keys & set(consts)
    if clash:
        raise SweepError(f"parameters also given as constants: {sorted(clash)}")
    if scheduler is not None and scheduler_arg(scheduler) == SERIAL:
        serial = True

    if serial:
        results = [_call(fn, p, consts)
                   for p in tqdm(pts, desc=desc, disable=not progress, unit="point")]
    else:
        results = _distributed(fn, pts, consts, scheduler, workers, progress, desc)

    df = pd.concat([_rows(p, r, tidy) for p, r in zip(pts, results, strict=True)],
                   ignore_index=True)
    meta = run_metadata(metadata)
    meta["sweep"] = {"points": len(pts), "serial": serial,
                     "scheduler": None if serial else (scheduler or LOCAL),
                     "workers": None if serial else (
                         workers or os.cpu_count() if scheduler in (None, LOCAL) else None)}
    for k, v in (metadata or {}).items():
        if isinstance(v, str | int | float | bool) and k not in df.columns:
            df[k] = v
    df.attrs["run"] = meta
    return df


def _distributed(fn: Callable[..., Any], pts: list[dict[str, Any]], consts: dict[str, Any],
                 scheduler: str | None, workers: int | None, progress: bool, desc: str
                 ) -> list[Any]:
    """Submit every point to a Dask cluster; results in grid order."""
    from distributed import as_completed

    client, cluster = _client(scheduler, workers)
    try:
        # a one-element list, so that a dict or list constant travels as one object
        shared = {k: client.scatter([v], broadcast=True)[0] for k, v in consts.items()}
        futures = [client.submit(_call, fn, p, shared, pure=False) for p in pts]
        index = {f.key: i for i, f in enumerate(futures)}
        errors: dict[int, BaseException] = {}
        bar = tqdm(total=len(pts), desc=desc, disable=not progress, unit="point")
        for fut in as_completed(futures):
            if fut.status == "error":
                errors[index[fut.key]] = fut.exception()
            bar.update(1)
        bar.close()
        if errors:
            first = min(errors)
            err = errors[first]
            if isinstance(err, SweepPointError):
                raise SweepPointError(err.point, err.error) from err.error
            raise SweepPointError(pts[first], err) from err
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
