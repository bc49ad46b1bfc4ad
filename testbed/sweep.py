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
(:func:`testbed.results.run_metadata`) is attached as ``df.attrs["run"]``, and the scalar
settings of ``metadata`` (a seed, a quick flag) also become constant columns, so a table that
leaves its notebook still says how it was made.

A point that raises stops the sweep with :class:`SweepPointError`, whose message names the
point's parameters and whose ``__cause__`` is the original exception.

**Where each point ran** is recorded, not assumed: the task itself asks
:func:`distributed.get_worker` for the address of the worker executing it (``"serial"`` for
an in-process run) and sends it back with the result. ``df.attrs["run"]["sweep"]`` then holds
``point_workers`` (that address for every point, in grid order) and ``ran_on`` (the sorted
set of addresses that actually ran points), next to ``workers`` (the number of LocalCluster
workers *asked for*, which proves nothing by itself). A test that two workers give the serial
table must also check ``len(ran_on) > 1``: a sweep that silently fell back to one process
would pass the first check and fail the second. The address is deliberately *not* a column
of the table: which worker ran a point depends on scheduling, and a figure's CSV must be the
same bytes whichever way its points ran.

**How points are spread** is the ``placement`` argument of :func:`sweep`. Left alone, Dask
may run every point of a short sweep of fast points on the first worker that asks for work,
which is correct but wastes the cluster and proves nothing about it. So by default
(``placement="spread"``) the points are dealt round-robin over the workers present when the
sweep starts (for a LocalCluster, after all of its workers have started), point ``i`` to
worker ``i mod n``, as a *loose* restriction (``Client.submit(workers=[w],
allow_other_workers=True)``): every worker starts at once on its first point, so with at
least as many points as workers every worker runs one (a point already executing is never
moved), while Dask's work stealing may still hand a *queued* point to a worker that ran out,
so points of uneven cost still balance. ``placement="pinned"`` makes the restriction strict
(point ``i`` runs on worker ``i mod n``, no stealing: reproducible placement, at the price of
load balance; a point whose worker leaves the cluster waits for it), ``placement="dynamic"``
leaves the choice entirely to the scheduler.

Large inputs shared by every point (a month of trace, a cost model) go in ``constants``: they
are sent to each worker once (``Client.scatter(..., broadcast=True)``) and passed to ``fn`` as
keyword arguments next to the point's own, instead of being pickled into every task.

    >>> from testbed.sweep import grid, sweep
    >>> def square(x, k=1):
    ...     return {"y": k * x * x}
    >>> sweep(square, grid(x=[1, 2, 3]), constants={"k": 2}, serial=True,
    ...       progress=False, tidy=False)[["x", "y"]].to_dict("list")
    {'x': [1, 2, 3], 'y': [2, 8, 18]}

Command lines and notebooks take the cluster as ``--scheduler`` (:func:`scheduler_arg`, an
``argparse`` type, or :func:`add_scheduler_argument`): ``local`` (the default), ``serial``,
or a ``tcp://``/``tls://`` address. ``dask`` is imported only when a sweep actually uses it;
it is the ``sweep`` extra (``pip install 'websec-testbed[sweep]'``), and a sweep on a cluster
without it fails with an :class:`ImportError` that says so (``serial`` needs no dask).

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

from testbed.results import run_metadata

__all__ = [
    "LOCAL",
    "PLACEMENTS",
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
#: ``--scheduler`` value for an in-process run, and the worker name of its points.
SERIAL = "serial"
#: Accepted values of ``sweep(placement=...)`` (see the module docstring).
PLACEMENTS = ("spread", "pinned", "dynamic")

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


def _call_on_worker(fn: Callable[..., Any], point: Mapping[str, Any],
                    constants: Mapping[str, Any]) -> tuple[str, Any]:
    """Run one point on a Dask worker: ``(address of the worker that ran it, result)``.

    The address is read here, inside the task, so it names the process that really executed
    the point -- not the one the client asked for.
    """
    from distributed import get_worker

    return get_worker().address, _call(fn, point, constants)


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
    values = dict(result) if isinstance(result, Mapping) else {"value": result}
    if tidy:
        return pd.DataFrame([{**point, "field": k, "value": v} for k, v in values.items()])
    return pd.DataFrame([{**point, **values}])


def _require_distributed() -> None:
    """Raise an :class:`ImportError` naming the ``sweep`` extra if ``dask.distributed`` is
    missing (it is optional: ``serial`` sweeps run without it)."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "a sweep on a Dask cluster needs dask.distributed, which is not installed: "
            "pip install 'websec-testbed[sweep]' (or run the sweep serially: "
            f"scheduler={SERIAL!r}, --scheduler {SERIAL})") from exc


def _client(scheduler: str | None, workers: int | None) -> tuple[Any, Any]:
    """A connected ``distributed.Client`` and the LocalCluster it owns (or ``None``)."""
    from distributed import Client, LocalCluster

    if scheduler in (None, LOCAL):
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    return Client(scheduler_arg(scheduler)), None


def _checked_points(points: Sequence[Mapping[str, Any]] | Mapping[str, Iterable[Any]],
                    constants: Mapping[str, Any] | None, placement: str
                    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The grid's points and the constants, after the checks :func:`sweep` documents."""
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
    if placement not in PLACEMENTS:
        raise SweepError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    return pts, consts


def sweep(fn: Callable[..., Any], points: Sequence[Mapping[str, Any]] | Mapping[str, Iterable[Any]],
          *, scheduler: str | None = None, workers: int | None = None, progress: bool = True,
          metadata: Mapping[str, Any] | None = None, constants: Mapping[str, Any] | None = None,
          serial: bool = False, tidy: bool = True, desc: str = "sweep",
          placement: str = "spread") -> pd.DataFrame:
    """Run ``fn(**point, **constants)`` for every point and return one table of the results.

    ``points`` is a list of parameter dicts or a mapping of axes (expanded by :func:`grid`).
    ``scheduler`` is ``None``/``"local"`` (a LocalCluster of ``workers`` processes, CPU count by
    default), ``"serial"`` (same as ``serial=True``) or a scheduler address. ``fn`` must be
    importable by the workers (a module-level function), as must its arguments be picklable.
    ``progress`` shows a tqdm bar over completed points. ``metadata`` is the experiment's own
    configuration, recorded in ``df.attrs["run"]`` (:func:`testbed.results.run_metadata`)
    with its scalar entries also added as columns (unless a column of that name exists).
    ``placement`` (``"spread"``, ``"pinned"`` or ``"dynamic"``) says how Dask points are
    spread over the workers; ``df.attrs["run"]["sweep"]`` records which worker ran each point
    (``point_workers``, grid order) and the set that ran any (``ran_on``) -- see the module
    docstring. Neither changes the table itself.

    Raises :class:`SweepPointError` for the first point (in grid order) that failed, and
    :class:`SweepError` for an empty grid, points with differing parameter names or an unknown
    ``placement``, and :class:`ImportError` naming the ``sweep`` extra when a Dask sweep finds
    no ``dask.distributed``.
    """
    pts, consts = _checked_points(points, constants, placement)
    if scheduler is not None and scheduler_arg(scheduler) == SERIAL:
        serial = True

    if serial:
        results = [_call(fn, p, consts)
                   for p in tqdm(pts, desc=desc, disable=not progress, unit="point")]
        ran = [SERIAL] * len(pts)
    else:
        ran, results = _distributed(fn, pts, consts, scheduler, workers, progress, desc,
                                    placement)

    df = pd.concat([_rows(p, r, tidy) for p, r in zip(pts, results, strict=True)],
                   ignore_index=True)
    meta = run_metadata(metadata)
    meta["sweep"] = {"points": len(pts), "serial": serial,
                     "scheduler": None if serial else (scheduler or LOCAL),
                     "workers": None if serial else (
                         workers or os.cpu_count() if scheduler in (None, LOCAL) else None),
                     "placement": None if serial else placement,
                     "ran_on": sorted(set(ran)), "point_workers": ran}
    for k, v in (metadata or {}).items():
        if isinstance(v, str | int | float | bool) and k not in df.columns:
            df[k] = v
    df.attrs["run"] = meta
    return df


def _placements(client: Any, cluster: Any, n: int, placement: str) -> list[dict[str, Any]]:
    """``Client.submit`` keyword arguments placing each of ``n`` points (module docstring).

    Round-robin over the workers' addresses in sorted order; for a LocalCluster this waits
    until every worker has started, so the first one up does not take the whole sweep.
    """
    if placement == "dynamic":
        return [{}] * n
    if cluster is not None:
        client.wait_for_workers(len(cluster.workers), timeout=120)
    addresses = sorted(client.nthreads())
    if not addresses:  # a scheduler with no workers yet: let it place points as they come
        return [{}] * n
    loose = placement == "spread"
    return [{"workers": [addresses[i % len(addresses)]], "allow_other_workers": loose}
            for i in range(n)]


def _distributed(fn: Callable[..., Any], pts: list[dict[str, Any]], consts: dict[str, Any],
                 scheduler: str | None, workers: int | None, progress: bool, desc: str,
                 placement: str) -> tuple[list[str], list[Any]]:
    """Submit every point to a Dask cluster: the worker that ran each point and its result,
    both in grid order."""
    _require_distributed()
    from distributed import as_completed

    client, cluster = _client(scheduler, workers)
    try:
        where = _placements(client, cluster, len(pts), placement)  # waits for the workers
        # a one-element list, so that a dict or list constant travels as one object
        shared = {k: client.scatter([v], broadcast=True)[0] for k, v in consts.items()}
        futures = [client.submit(_call_on_worker, fn, p, shared, pure=False, **w)
                   for p, w in zip(pts, where, strict=True)]
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
        ran, results = zip(*client.gather(futures), strict=True)
        return list(ran), list(results)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
