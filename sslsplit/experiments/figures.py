"""The SSL-splitting paper's evaluation (§6): one function per figure, measured and modelled.

=========================== ==================================================================
function                    paper
=========================== ==================================================================
:func:`single_file_sweep`   the microbenchmark behind Figures 7 and 8 (real runs, loopback)
:func:`figure7`             Figure 7: bandwidth efficiency vs file size, with the paper's model
                            (``measured=False``: the cost models alone)
:func:`figure8`             Figure 8: savings factor of warm splitting over HTTP and HTTPS
:func:`calibrated_model`    §6.3's linear cost model, fitted to our measurements
:func:`sweep_fit`           in-sample: the calibrated model against the runs it was fitted to
:func:`figure10_11`         Figures 10/11: a trace chunk replayed through the real servers and
                            proxy, the same chunk and the full traces simulated
                            (``measured=False``: the cost model's replay alone)
:func:`agreement`           held-out: the calibrated model against replays it never saw
:func:`held_out_agreement`  the same on fresh synthetic chunks, several seeds
:func:`figure12`            Figure 12: latency vs size behind the ADSL model, real message sizes
                            (``measured=False``: the paper setup's message sizes alone)
:func:`figure12_driver`     Figure 12 on :mod:`netsim.drive`: the real HTTP, HTTPS and splitting
                            objects in simulated time, beside :func:`figure12`'s flight model
                            (:mod:`sslsplit.model_driver`)
:func:`paper_comparison`    every published §6 number next to ours, measured and modelled
=========================== ==================================================================

The calibration (:func:`calibrated_model`, :func:`sweep_fit`, :func:`measured_wire_params`) and
:func:`paper_comparison` live in :mod:`sslsplit.experiments.calibration` and are re-exported here.

The trace statistics of §6.3 (trace table, Figure 9's size CDF, repetition, two-week warmth)
and the workloads the figures replay are in :mod:`sslsplit.experiments.traces`.

**How the cost model is validated.** The model is the paper's: per request, a fixed plus a
per-byte cost for each protocol, piecewise for warm splitting. It is *calibrated* on the
single-file sweep (:func:`calibrated_model`) and then *validated* on trace replays that played
no part in the fit -- other files, other sizes, another request mix (:func:`agreement`).
Separately, :func:`paper_comparison` puts each number the paper publishes for §6
(:mod:`sslsplit.paper_points`) beside our measurement and two models: the one calibrated here
and :func:`sslsplit.costmodel.paper_model`, the model of the paper's own setup. Every row carries
a ``kind``: ``measured`` (a real run), ``modelled`` or ``true by construction`` (see
:mod:`sslsplit.experiments.traces`).

Bytes are counted on the origin's sockets (TCP payload), as the paper counted
bytes on the server's interface; ``wire_bytes`` adds an estimate of TCP/IP
headers (:func:`ip_bytes`, same constants as :class:`sslsplit.costmodel.WireParams`)
so that our numbers and the paper's are on the same footing.  Every function
returns a pandas DataFrame and takes ``quick`` for CI-sized runs.

The measurements run on a :class:`~sslsplit.aio.testbed.Testbed` (re-exported here): the three
servers the paper compares -- plain HTTP, HTTPS and SSL splitting -- over one document root on
loopback, with proxies made on demand and an unmodified client.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from sslsplit.synth import AMSTERDAM_LIKE, LCS_LIKE, generate, scaled
from testbed.traces.workload import daytime_chunks

from ..aio.testbed import Download, PlainStream, Testbed
from ..costmodel import (
    SIZE_SWEEP,
    Protocol,
    SplittingCostModel,
    WireModel,
    WireParams,
    paper_model,
)
from ..model_driver import figure12_driver
from ..model_latency import LATENCY_PROTOCOLS, AdslTestbed, request_latency
from ..paper_points import PAPER_POINTS, paper_bandwidth
from ..params import CHUNK_BYTES
from ..replay import replay
from .calibration import (
    EST_CALIBRATED,
    EST_MEASURED,
    EST_SETUP,
    EST_TRACE,
    PROTOCOLS,
    WIRE,
    _paper_protocol,
    calibrated_model,
    measured_wire_params,
    paper_comparison,
    sweep_fit,
)
from .traces import (
    MEASURED,
    MODELLED,
    chunk_of,
    load_workloads,
    trace_kind,
    trace_note,
)

__all__ = [
    "Testbed",
    "Download",
    "PlainStream",
    "SWEEP_SIZES",
    "PAPER_SIZES",
    "ip_bytes",
    "single_file_sweep",
    "figure7",
    "figure8",
    "calibrated_model",
    "sweep_fit",
    "measured_wire_params",
    "replay_chunk",
    "figure10_11",
    "figure12",
    "figure12_driver",
    "agreement",
    "HELD_OUT_SHAPES",
    "held_out_chunk",
    "held_out_agreement",
    "paper_comparison",
    "EST_MEASURED",
    "EST_CALIBRATED",
    "EST_SETUP",
    "EST_TRACE",
]

# --- the experiments ---------------------------------------------------------------

SWEEP_SIZES: tuple[int, ...] = tuple(int(s) for s in np.unique(np.round(np.geomspace(100, 10_000_000, 25))))
#: File sizes at which the paper states a number (§6.2): the default sweeps include them.
PAPER_SIZES: tuple[int, ...] = tuple(int(s) for s in PAPER_POINTS["size"].dropna())


def ip_bytes(app_bytes: float | np.ndarray, connections: int = 1, params: WireParams = WIRE) -> np.ndarray:
    """TCP payload bytes plus an estimate of TCP/IP headers (full segments, control packets)."""
    app = np.asarray(app_bytes, dtype=np.float64)
    total: np.ndarray = app + np.ceil(app / params.mss) * params.ip_tcp_header + connections * params.tcp_control_packets * params.ip_tcp_header
    return total


def _write_files(root: Path, sizes: Sequence[int], seed: int = 0) -> dict[int, str]:
    rng = random.Random(seed)
    paths = {}
    for s in sizes:
        name = f"f{s}.bin"
        (root / name).write_bytes(rng.randbytes(s))
        paths[s] = "/" + name
    return paths


def single_file_sweep(quick: bool = True, sizes: Sequence[int] | None = None, repeats: int = 1) -> pd.DataFrame:
    """Download one file of each size over each protocol; bytes the origin sent.

    ``split_cold``: a fresh proxy per file whose cache holds only the server's
    certificate (fetched once by a first, tiny download -- any proxy that has
    served the site before has it); ``split_warm``: the same file again
    through that proxy.  The default sizes include :data:`PAPER_SIZES` (100 B
    and 1 MB), where the paper states numbers.  Columns: ``size``, ``protocol``,
    ``server_bytes`` (TCP payload, counted on the origin's sockets),
    ``wire_bytes`` (plus *estimated* TCP/IP headers, :func:`ip_bytes`),
    ``efficiency`` (size / wire_bytes, Figure 7's y axis) and ``seconds``; every
    row is ``measured``.
    """
    if sizes is None:
        sizes = SWEEP_SIZES[::3] if quick else SWEEP_SIZES
        if quick:
            sizes = [s for s in sizes if s <= 2_000_000]
        sizes = sorted(set(sizes) | set(PAPER_SIZES))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Testbed(tmp) as tb:
        paths = _write_files(Path(tmp), sizes)
        (Path(tmp) / "warmup").write_bytes(b"!")
        for size in tqdm(sizes, desc="single-file sweep", unit="size", disable=quick):
            for _ in range(repeats):
                tb.new_proxy()
                tb.download("split", "/warmup")  # caches the certificate, not the file
                runs = {
                    "http": tb.download("http", paths[size]),
                    "https": tb.download("https", paths[size]),
                    "split_cold": tb.download("split", paths[size]),
                    "split_warm": tb.download("split", paths[size]),
                }
                for protocol, d in runs.items():
                    assert d.body_bytes == size
                    rows.append({"size": size, "protocol": protocol, "server_bytes": d.server_bytes, "seconds": d.seconds})
    df = pd.DataFrame(rows).groupby(["size", "protocol"], as_index=False).median()
    df["wire_bytes"] = ip_bytes(df["server_bytes"].to_numpy())
    df["efficiency"] = df["size"] / df["wire_bytes"]
    return df


def _no_sweep(sweep: pd.DataFrame | None) -> None:
    """A sweep is measured data: passing one to a model-only view is a mistake, not a no-op."""
    if sweep is not None:
        raise ValueError("sweep is only used with measured=True (the model-only view runs nothing)")


def figure7(quick: bool = True, sweep: pd.DataFrame | None = None, *, measured: bool = True,
            model: SplittingCostModel | None = None) -> pd.DataFrame:
    """Figure 7: bandwidth efficiency (file bytes per server byte) against file size.

    ``model`` is the linear cost model to draw (default :func:`~sslsplit.costmodel.paper_model`,
    the paper's own setup). Two views of the same figure:

    ``measured=True`` (default)
        the single-file sweep (``sweep``, or a new :func:`single_file_sweep`: real downloads on
        loopback, protocols http / https / split_cold / split_warm) with one more column,
        ``paper_model_efficiency``: what ``model`` predicts for the same size and protocol.
    ``measured=False``
        the cost models alone, no real run (milliseconds): for every :class:`Protocol`
        (split_miss and split_hit instead of cold and warm) and every size of
        :data:`~sslsplit.costmodel.SIZE_SWEEP` (every third when ``quick``), ``linear_bytes``
        and ``efficiency`` from ``model``, ``wire_bytes`` and ``wire_efficiency`` from the
        structural :class:`~sslsplit.costmodel.WireModel`; ``kind`` is ``modelled``. The
        linear model is *fitted to* the structural one, so their agreement is an internal
        consistency check of the fit, not a validation: the comparison with the paper's
        points and with measured runs is :func:`paper_comparison`.
    """
    model = model or paper_model()
    if not measured:
        _no_sweep(sweep)
        return _model_efficiency(quick, model)
    df = (sweep if sweep is not None else single_file_sweep(quick)).copy()
    df["paper_model_efficiency"] = [
        float(model.efficiency(_paper_protocol(p), np.array([s]))[0])
        for s, p in zip(df["size"], df["protocol"], strict=True)
    ]
    return df


def _model_efficiency(quick: bool, model: SplittingCostModel) -> pd.DataFrame:
    """Figure 7 from the cost models only (see :func:`figure7`, ``measured=False``)."""
    wire = WireModel()
    sizes = SIZE_SWEEP[::3] if quick else SIZE_SWEEP
    rows = []
    for proto in Protocol:
        lin = model.bytes(proto, sizes)
        exact = wire.server_bytes(proto, sizes)
        for s, a, b in zip(sizes, lin, exact, strict=True):
            rows.append({"protocol": proto.value, "size": int(s), "linear_bytes": a,
                         "wire_bytes": b, "efficiency": s / a, "wire_efficiency": s / b,
                         "kind": MODELLED})
    return pd.DataFrame(rows)


def figure8(quick: bool = True, sweep: pd.DataFrame | None = None) -> pd.DataFrame:
    """Figure 8: savings factor = bytes(HTTP or HTTPS) / bytes(warm splitting), per size."""
    df = sweep if sweep is not None else single_file_sweep(quick)
    wide = df.pivot(index="size", columns="protocol", values="wire_bytes")
    model = paper_model()
    sizes = wide.index.to_numpy()
    out = pd.DataFrame({
        "size": sizes,
        "vs_http": (wide["http"] / wide["split_warm"]).to_numpy(),
        "vs_https": (wide["https"] / wide["split_warm"]).to_numpy(),
        "paper_model_vs_http": model.bytes(Protocol.HTTP, sizes) / model.bytes(Protocol.SPLIT_HIT, sizes),
        "paper_model_vs_https": model.bytes(Protocol.HTTPS, sizes) / model.bytes(Protocol.SPLIT_HIT, sizes),
    })
    return out


def replay_chunk(chunk: pd.DataFrame, protocols: Sequence[str] = PROTOCOLS, seed: int = 0) -> pd.DataFrame:
    """Replay a trace chunk (requests in order) through the real servers and proxy.

    Every (URL, size) object becomes a file of random bytes, as in the paper.
    ``split_cold`` starts with an empty proxy cache; ``split_warm`` replays the
    chunk a second time through the proxy the cold run left behind.
    """
    rows = []
    objs = chunk.drop_duplicates("obj")
    with tempfile.TemporaryDirectory() as tmp, Testbed(tmp) as tb:
        rng = random.Random(seed)
        for obj, size in zip(objs["obj"], objs["size"], strict=True):
            (Path(tmp) / f"o{obj}").write_bytes(rng.randbytes(int(size)))
        requests = [(f"/o{o}", int(s)) for o, s in zip(chunk["obj"], chunk["size"], strict=True)]
        file_bytes = sum(s for _, s in requests)
        tb.new_proxy()
        for protocol in protocols:
            kind = "split" if protocol.startswith("split") else protocol
            total = 0
            for path, size in tqdm(requests, desc=f"replay {protocol}", unit="req", leave=False, disable=len(requests) < 200):
                d = tb.download(kind, path)
                assert d.body_bytes == size
                total += int(ip_bytes(d.server_bytes))
            rows.append({"protocol": protocol, "server_bytes": total, "file_bytes": file_bytes, "requests": len(requests)})
    df = pd.DataFrame(rows)
    df["ratio"] = df["server_bytes"] / df["file_bytes"]
    df["vs_http"] = df["ratio"] / float(df.loc[df["protocol"] == "http", "ratio"].iloc[0])
    return df


def figure10_11(quick: bool = True, sweep: pd.DataFrame | None = None,
                traces: Sequence[str] | None = None, chunk_bytes: int | None = None,
                workloads: dict[str, pd.DataFrame] | None = None, *, measured: bool = True,
                model: SplittingCostModel | None = None) -> pd.DataFrame:
    """Figures 10/11: bandwidth per byte of file throughput, a trace chunk and the full traces.

    ``workloads`` (default :func:`sslsplit.experiments.traces.load_workloads` of ``traces``) are
    replayed; ``model`` is the model of the paper's setup (default
    :func:`sslsplit.costmodel.paper_model`). Two views of the same figures:

    ``measured=False``
        the cost model alone, no real run (seconds): ``model`` replays each trace's chunk
        (:func:`~sslsplit.experiments.traces.chunk_of`) and the full trace. Columns: ``trace``,
        ``scope``, ``protocol`` (http, https, split_cold, split_warm, ideal), ``server_bytes``,
        ``file_bytes``, ``hit_fraction``, ``requests``, ``ratio``, ``vs_http``, ``kind`` and
        ``note``. The protocols' rows are ``modelled``; the ideal protocol's ratio is
        1 / compressibility, ``measured`` on a public log and ``true by construction`` on a
        synthetic trace (``note`` says why).
    ``measured=True`` (default)
        real runs next to two models, described below.

    ``sweep`` calibrates the model (default: a new :func:`single_file_sweep`; a ``ValueError``
    with ``measured=False``); ``chunk_bytes`` sets the chunk volume (measured view: default 2 MB
    quick, 10 MB otherwise, at most 400 requests quick; model view: default
    :data:`sslsplit.params.CHUNK_BYTES`).
    Columns: ``trace``, ``scope`` (chunk/full), ``protocol``, ``source``, ``ratio`` (server
    bytes per file byte), ``vs_http``, ``server_bytes``, ``file_bytes``, ``requests``,
    ``kind`` and ``note``. ``source`` is

    * ``measured`` -- the chunk replayed request by request through the real servers and proxy
      (kind ``measured``);
    * ``simulated`` -- the cost model calibrated on ``sweep`` (kind ``modelled``); the chunk
      was not part of the calibration, so chunk rows are a held-out test (:func:`agreement`);
    * ``simulated (paper setup)`` -- ``model`` (``modelled``);
    * ``paper`` -- the published bars as far as the text gives them (kind ``published``).

    The ideal protocol (each unique byte once) is a trace statistic: ``true by construction``
    on the synthetic traces, whose generator and chunk were chosen to match the paper.
    """
    setup = model or paper_model()
    workloads = workloads if workloads is not None else load_workloads(quick, names=traces)
    if not measured:
        _no_sweep(sweep)
        return _model_bandwidth(setup, workloads, volume=chunk_bytes or CHUNK_BYTES)
    sweep = sweep if sweep is not None else single_file_sweep(quick)
    calibrated = calibrated_model(sweep)
    volume = chunk_bytes or (2_000_000 if quick else 10_000_000)
    parts = []
    for name, work in workloads.items():
        chunk = chunk_of(name, work, volume)
        parts += _chunk_rows(name, chunk.iloc[:400] if quick else chunk, calibrated, setup)
    parts += _full_trace_rows(workloads, calibrated, setup)
    parts.append(_paper_bars())
    out = pd.concat(parts, ignore_index=True)
    out["note"] = out["note"].fillna("")
    return out[_BANDWIDTH_COLUMNS]


_BANDWIDTH_COLUMNS = ["trace", "scope", "protocol", "source", "ratio", "vs_http", "server_bytes",
                      "file_bytes", "requests", "kind", "note"]


def _chunk_rows(name: str, chunk: pd.DataFrame, calibrated: SplittingCostModel,
                setup: SplittingCostModel) -> list[pd.DataFrame]:
    """One trace chunk in :func:`figure10_11`: both models' replays, then the real runs."""
    runs = replay_chunk(chunk)
    runs.insert(0, "source", "measured")
    runs["kind"] = MEASURED
    parts = []
    for source, m in (("simulated", calibrated), ("simulated (paper setup)", setup)):
        sim = replay(chunk, m)
        keep = list(PROTOCOLS) + (["ideal"] if source == "simulated" else [])
        sim = sim[sim["protocol"].isin(keep)].copy()
        sim.insert(0, "source", source)
        sim["kind"] = np.where(sim["protocol"] == "ideal", trace_kind(name), MODELLED)
        parts.append(_label(sim, name, "chunk"))
    parts.append(_label(runs, name, "chunk"))
    return parts


def _full_trace_rows(workloads: dict[str, pd.DataFrame], calibrated: SplittingCostModel,
                     setup: SplittingCostModel) -> list[pd.DataFrame]:
    """The full traces in :func:`figure10_11`, both models (the ideal protocol once)."""
    parts = []
    for source, m in (("simulated", calibrated), ("simulated (paper setup)", setup)):
        full = _model_bandwidth(m, workloads, scopes=("full",))
        if source != "simulated":
            full = full[full["protocol"] != "ideal"]
        full.insert(2, "source", source)
        parts.append(full)
    return parts


def _paper_bars() -> pd.DataFrame:
    """The published bars of Figures 10/11 in :func:`figure10_11`'s columns."""
    paper = paper_bandwidth().rename(columns={"paper_trace": "trace"})
    paper["trace"] = paper["trace"] + " (paper)"
    paper["source"] = "paper"
    paper["kind"] = "published"
    paper["note"] = paper.pop("paper_value_source")
    return paper


def _model_bandwidth(model: SplittingCostModel, workloads: dict[str, pd.DataFrame],
                     scopes: Sequence[str] = ("chunk", "full"), volume: int = CHUNK_BYTES
                     ) -> pd.DataFrame:
    """Figures 10/11 from the cost model only (see :func:`figure10_11`, ``measured=False``)."""
    parts = []
    for name, w in workloads.items():
        for scope in scopes:
            r = replay(chunk_of(name, w, volume) if scope == "chunk" else w, model)
            r.insert(0, "scope", scope)
            r.insert(0, "trace", name)
            ideal = r["protocol"].eq("ideal")
            r["kind"] = np.where(ideal, trace_kind(name), MODELLED)
            r["note"] = np.where(ideal, trace_note(name, scope), "")
            parts.append(r)
    return pd.concat(parts, ignore_index=True)


def _label(df: pd.DataFrame, trace: str, scope: str) -> pd.DataFrame:
    df = df.copy()
    df.insert(0, "scope", scope)
    df.insert(0, "trace", trace)
    df["note"] = np.where(df["protocol"] == "ideal", trace_note(trace, scope), "")
    return df


#: Trace shapes of the held-out replays.
HELD_OUT_SHAPES = {"www.lcs-like": LCS_LIKE, "amsterdam-like": AMSTERDAM_LIKE}


def held_out_chunk(shape: str, seed: int, quick: bool = True) -> pd.DataFrame:
    """A fresh replay chunk for :func:`held_out_agreement` (see there)."""
    params = replace(scaled(HELD_OUT_SHAPES[shape], 0.01 if quick else 0.05), days=2.0, seed=seed)
    chunk = next(iter(daytime_chunks(generate(params), 1_500_000 if quick else 10_000_000)), None)
    if chunk is None:
        raise ValueError(f"seed {seed}: the {shape} trace has no daytime chunk")
    return chunk.iloc[:150] if quick else chunk


def held_out_agreement(sweep: pd.DataFrame, seeds: Sequence[int] = (31, 32, 33), quick: bool = True
                       ) -> pd.DataFrame:
    """The calibrated model against fresh replays, several per trace shape (**held-out**).

    For each seed, a short synthetic trace of each shape (:data:`sslsplit.synth.LCS_LIKE` and
    :data:`~sslsplit.synth.AMSTERDAM_LIKE`, 1 % of their requests and files, two days; 5 % when
    not ``quick``) is generated and its first daytime chunk (~1.5 MB and at most 150 requests
    quick, ~10 MB otherwise) replayed through the real servers and through the model
    calibrated on ``sweep``. Neither the files (random bytes from the seed) nor their sizes nor the request
    mix took part in the calibration. One row per chunk and protocol: ``measured``,
    ``simulated``, ``error`` (= simulated / measured - 1), ``fit`` = ``held-out``.
    """
    model = calibrated_model(sweep)
    rows = []
    for seed in seeds:
        for shape in HELD_OUT_SHAPES:
            chunk = held_out_chunk(shape, seed, quick)
            measured = replay_chunk(chunk, seed=seed).set_index("protocol")["server_bytes"]
            simulated = replay(chunk, model).set_index("protocol")["server_bytes"]
            for protocol in PROTOCOLS:
                rows.append({"shape": shape, "seed": seed, "requests": len(chunk),
                             "file_MB": chunk["size"].sum() / 1e6, "protocol": protocol,
                             "measured": float(measured[protocol]),
                             "simulated": float(simulated[protocol])})
    df = pd.DataFrame(rows)
    df["error"] = df["simulated"] / df["measured"] - 1
    df["fit"] = "held-out"
    return df


def agreement(fig: pd.DataFrame) -> pd.DataFrame:
    """The calibrated model against measured replays it was not fitted to (**held-out**).

    Per chunk and protocol: ``measured`` and ``simulated`` server bytes (from
    :func:`figure10_11`), ``simulated_over_measured`` and ``error`` (= that - 1). The model was
    calibrated on the single-file sweep only; these chunks -- other files, sizes and request
    mixes -- played no part in it. The paper: "agree very closely" (§6.3, no number).
    """
    chunk = fig[(fig["scope"] == "chunk") & fig["source"].isin(["measured", "simulated"])]
    wide = chunk.pivot_table(index=["trace", "protocol"], columns="source", values="server_bytes").dropna()
    wide["simulated_over_measured"] = wide["simulated"] / wide["measured"]
    wide["error"] = wide["simulated_over_measured"] - 1
    wide["fit"] = "held-out"
    return wide.reset_index()


def figure12(quick: bool = True, sweep: pd.DataFrame | None = None, *, measured: bool = True,
             params: AdslTestbed | None = None, sizes: Sequence[int] | None = None
             ) -> pd.DataFrame:
    """Figure 12: latency against file size for HTTP, HTTPS and cold splitting (SimPy model).

    ``params`` is the ADSL testbed with the paper's setup (default :class:`AdslTestbed`);
    ``sizes`` the file sizes (default 12 sizes from 100 B to 2 MB when ``quick``, 40
    otherwise). Every number is ``modelled``: nothing is timed. Columns: ``protocol``,
    ``size``, ``latency_s``, ``vs_https`` (latency / HTTPS latency at that size), ``kind``.

    ``measured=False``
        one curve per protocol, with ``params``' message sizes (no real run).
    ``measured=True`` (default)
        a ``messages`` column first and two sets of curves: ``measured`` -- ``params`` with
        the message sizes measured on the single-file sweep (``sweep`` or a new
        :func:`single_file_sweep`; :func:`measured_wire_params`) -- and ``paper setup`` --
        ``params`` as given.
    """
    params = params or AdslTestbed()
    if not measured:
        _no_sweep(sweep)
        return _latency_curves(quick, params, sizes)
    sweep = sweep if sweep is not None else single_file_sweep(quick)
    ours = _latency_curves(quick, replace(params, wire=measured_wire_params(sweep)), sizes)
    ours.insert(0, "messages", "measured")
    paper = _latency_curves(quick, params, sizes)
    paper.insert(0, "messages", "paper setup")
    return pd.concat([ours, paper], ignore_index=True)


def _latency_curves(quick: bool, params: AdslTestbed, sizes: Sequence[int] | None
                    ) -> pd.DataFrame:
    """Latency per protocol and size over one testbed (see :func:`figure12`)."""
    if sizes is None:
        sizes = np.unique(np.round(np.geomspace(100, 2_000_000, 12 if quick else 40))
                          ).astype(int).tolist()
    rows = []
    for s in tqdm(sizes, desc="latency", disable=quick, unit="size", mininterval=2.0):
        for proto in LATENCY_PROTOCOLS:
            rows.append({"protocol": proto, "size": int(s),
                         "latency_s": request_latency(proto, int(s), params)})
    df = pd.DataFrame(rows)
    https = df[df.protocol == "https"].set_index("size")["latency_s"]
    df["vs_https"] = df["latency_s"].to_numpy() / https.loc[df["size"]].to_numpy()
    df["kind"] = MODELLED
    return df
