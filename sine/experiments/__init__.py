"""Experiments of the SINE paper as functions returning pandas DataFrames.

======================  =========================================================================
function                what it reproduces
======================  =========================================================================
:func:`table2`          Table II: public-key operations and origin round trips for N requests in
                        one session -- counted by instrumentation on a real loopback run of the
                        origin server and the verifying client (SINE, SINEB, SINEB+AT_collect,
                        SINEX)
:func:`cpu_costs`       the CPU costs measured with the real implementation that the model uses
:func:`figure4`         Figure 4: throughput per file size, nine protocols (Table III)
:func:`figure5`         Figure 5: latency of one 100 KB file vs the client's bandwidth
                        (128 kbit/s .. 100 Mbit/s; server-proxy ~4 Mbit/s)
:func:`figure6`         Figure 6: a 330 KB portal page from 22 hosts x 15 KB, warm and cold cache
                        (Figures 4-6 take ``variant="model" | "driver" | "measured"``)
:func:`figure4_driver`  Figures 4, 5 and 6 again, each point computed twice: by the model and by
:func:`figure5_driver`  :mod:`sine.model_driver` (the real origin, cache and verifier driven over
:func:`figure6_driver`  byte-accurate TCP by :mod:`netsim.drive`), side by side
======================  =========================================================================

Beyond the paper, :mod:`sine.experiments.ranges` sets SINE's chain beside its descendants
(MICE's chain, an outboard Merkle tree) for verified byte ranges of a large file (issue 25):
bytes of overhead, modelled time to a verified range (:mod:`sine.model_ranges`) and measured
verification CPU; :mod:`sine.experiments.ranges_link` measures those ranges on the namespace
testbed (the origin, a warm nginx cache, the verifying client) beside the model.

Figures 4-6 come from the SimPy model in :mod:`sine.model_latency` (netsim links and TCP) fed with
costs measured on this machine; the ``*_driver`` functions set the model beside the real objects
driven in simulated time (``latency_model_s`` / ``latency_driver_s``, their relative gap and
the wall-clock seconds each took).  The paper gives its figures only as plots; the numbers it
states in the text are in :data:`PAPER_CLAIMS` and are set beside ours.  Every function takes
``quick`` (CI-sized sweeps and fewer repetitions).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd

from ..aio.measure import count_table2, measure_sine_costs, timed
from ..model_driver import SimSite, driver_fetch_latency, driver_portal_latency
from ..model_latency import PROTOCOLS, Costs, Scenario, fetch_latency, portal_latency

__all__ = ["PAPER_CLAIMS", "PAPER_TABLE2", "VARIANTS", "figure_variant", "table2",
           "measure_sine_costs", "cpu_costs", "figure4", "figure5",
           "figure6", "figure4_driver", "figure5_driver", "figure6_driver"]

#: Table II of the paper (N requests in one session).
PAPER_TABLE2 = {
    "sine": ("N", "0"),
    "sineb": ("1", "N"),
    "sinex": ("1 (expected)", "0"),
}

#: Quantitative statements in the paper's text (its figures have no tabulated data).
PAPER_CLAIMS = {
    "fig4_sinex_proxy_over_https_large": 5.0,   # "fivefold improvement over HTTPS"
    "fig6_https_over_sinex_proxy_warm": 3.0,    # "almost three times worse"
}


def table2(n_requests: tuple[int, ...] = (1, 5, 10, 20), quick: bool = True) -> pd.DataFrame:
    """Count public-key operations and origin round trips per protocol for N requests (a real
    loopback run, :func:`sine.aio.measure.count_table2`), the paper's counts beside them."""
    if quick:
        n_requests = tuple(n for n in n_requests if n <= 10)
    df = pd.DataFrame(count_table2(n_requests))
    mode = {"SINE": "sine", "SINEB": "sineb", "SINEB (AT_collect)": "sineb", "SINEX": "sinex"}
    df["paper_public_key"] = [PAPER_TABLE2[mode[p]][0] for p in df["protocol"]]
    df["paper_round_trips"] = [PAPER_TABLE2[mode[p]][1] for p in df["protocol"]]
    return df


# -- the CPU costs measured with the real implementation (sine.aio.measure) -------------------


def cpu_costs(quick: bool = True) -> pd.DataFrame:
    """The measured costs (one row) the model runs with."""
    c = measure_sine_costs(quick)
    return pd.DataFrame([{
        "signature_verify_us": c.signature_verify * 1e6,
        "verify_MBps": 1 / c.hash_per_byte / 1e6,
        "tls_handshake_ms": c.tls_handshake * 1e3,
        "tls_record_MBps": (1 / c.tls_per_byte / 1e6) if c.tls_per_byte else float("inf"),
    }])


def _costs(costs: Costs | None, quick: bool) -> Costs:
    return costs if costs is not None else measure_sine_costs(quick)


def _sizes(quick: bool) -> list[int]:
    return [1_000, 10_000, 100_000, 1_000_000] + ([] if quick else [5_000_000, 10_000_000])


def _bandwidths(quick: bool) -> list[float]:
    return [128e3, 512e3, 1e6, 4e6, 10e6, 100e6] if quick else [
        128e3, 256e3, 512e3, 1e6, 2e6, 4e6, 10e6, 20e6, 50e6, 100e6]


#: The ways a figure can be computed: the SimPy model (:mod:`sine.model_latency`), the driver
#: model running the real objects (:mod:`sine.model_driver`, set beside the model), or real
#: programs measured on the namespace link testbed (:mod:`sine.experiments.link`, root only).
VARIANTS = ("model", "driver", "measured")


def figure_variant(name: str, variant: str) -> Callable[..., pd.DataFrame] | None:
    """The function computing figure ``name`` (``"figure4"``..``"figure6"``) as ``variant``;
    ``None`` for ``"model"`` (the figure function's own body). :class:`ValueError` for an
    unknown variant."""
    if variant == "model":
        return None
    if variant == "driver":
        return {"figure4": figure4_driver, "figure5": figure5_driver,
                "figure6": figure6_driver}[name]
    if variant == "measured":
        from . import link as linkexperiments  # imports this module, so loaded on demand

        return getattr(linkexperiments, f"{name}_measured")  # type: ignore[no-any-return]  # getattr is Any; link defines every <name>_measured
    raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")


def _only_model(options: dict[str, object]) -> None:
    if options:
        raise TypeError(f"options {sorted(options)} exist only for the driver or measured variant")


def figure4(quick: bool = True, costs: Costs | None = None, *, variant: str = "model",
            **options: object) -> pd.DataFrame:
    """Throughput (Mbit/s) per file size for the nine protocols of Table III (warm cache).

    ``variant="driver"`` is :func:`figure4_driver`, ``"measured"``
    :func:`sine.experiments.link.figure4_measured` (``options`` go to them)."""
    other = figure_variant("figure4", variant)
    if other is not None:
        return other(quick, costs, **options)
    _only_model(options)
    sizes = _sizes(quick)
    sc = Scenario(costs=_costs(costs, quick))
    rows = []
    for protocol in PROTOCOLS:
        for size in sizes:
            latency = fetch_latency(protocol, size, sc)
            rows.append({"protocol": protocol, "size_bytes": size, "latency_s": latency,
                         "throughput_mbps": size * 8 / latency / 1e6})
    return pd.DataFrame(rows)


def figure5(quick: bool = True, costs: Costs | None = None, size: int = 100_000, *,
            variant: str = "model", **options: object) -> pd.DataFrame:
    """Latency (s) of one ``size``-byte file as the client's bandwidth grows.

    ``variant="driver"`` is :func:`figure5_driver`, ``"measured"``
    :func:`sine.experiments.link.figure5_measured` (``options`` go to them)."""
    other = figure_variant("figure5", variant)
    if other is not None:
        return other(quick, costs, size, **options)
    _only_model(options)
    bandwidths = _bandwidths(quick)
    c = _costs(costs, quick)
    rows = []
    for bw in bandwidths:
        sc = Scenario(client_bw=bw, costs=c)
        for protocol in PROTOCOLS:
            rows.append({"protocol": protocol, "client_kbps": bw / 1e3,
                         "latency_s": fetch_latency(protocol, size, sc)})
    return pd.DataFrame(rows)


def figure6(quick: bool = True, costs: Costs | None = None, hosts: int = 22,
            size: int = 15_000, *, variant: str = "model", **options: object) -> pd.DataFrame:
    """Latency (s) of a portal page (``hosts`` x ``size`` bytes), warm and cold cache.

    ``cache`` is ``"none"`` for the direct protocols (no proxy on the path).
    ``variant="driver"`` is :func:`figure6_driver`, ``"measured"``
    :func:`sine.experiments.link.figure6_measured` (``options`` go to them)."""
    other = figure_variant("figure6", variant)
    if other is not None:
        return other(quick, costs, hosts, size, **options)
    _only_model(options)
    sc = Scenario(costs=_costs(costs, quick))
    rows = []
    for protocol in PROTOCOLS:
        for warm in (True, False):
            if not protocol.endswith("-proxy") and not warm:
                continue  # no cache involved: warm == cold
            cache = ("warm" if warm else "cold") if protocol.endswith("-proxy") else "none"
            rows.append({"protocol": protocol, "cache": cache,
                         "page_bytes": hosts * size,
                         "latency_s": portal_latency(protocol, hosts, size, sc, warm)})
    return pd.DataFrame(rows)


# -- the same figures on the real objects (sine.model_driver), beside the model ---------------------


def _pair(model: Callable[[], float], driver: Callable[[], float]) -> dict[str, float]:
    """Run both callables; latencies, relative gap (driver vs model) and wall seconds."""
    old, model_wall = timed(model)
    new, driver_wall = timed(driver)
    return {"latency_model_s": old, "latency_driver_s": new, "rel_diff": new / old - 1,
            "model_wall_s": model_wall, "driver_wall_s": driver_wall}


def figure4_driver(quick: bool = True, costs: Costs | None = None) -> pd.DataFrame:
    """Figure 4 per point, model vs driver: latency and throughput per file size (warm)."""
    sizes = _sizes(quick)
    sc = Scenario(costs=_costs(costs, quick))
    rows = []
    with SimSite({SimSite.doc_path(s): s for s in sizes}) as site:
        for protocol in PROTOCOLS:
            for size in sizes:
                row = _pair(partial(fetch_latency, protocol, size, sc),
                            partial(driver_fetch_latency, protocol, size, sc, site=site))
                rows.append({"protocol": protocol, "size_bytes": size, **row,
                             "throughput_model_mbps": size * 8 / row["latency_model_s"] / 1e6,
                             "throughput_driver_mbps": size * 8 / row["latency_driver_s"] / 1e6})
    return pd.DataFrame(rows)


def figure5_driver(quick: bool = True, costs: Costs | None = None, size: int = 100_000
                   ) -> pd.DataFrame:
    """Figure 5 per point, model vs driver: latency of one file vs the client's bandwidth."""
    c = _costs(costs, quick)
    rows = []
    with SimSite({SimSite.doc_path(size): size}) as site:
        for bw in _bandwidths(quick):
            sc = Scenario(client_bw=bw, costs=c)
            for protocol in PROTOCOLS:
                row = _pair(partial(fetch_latency, protocol, size, sc),
                            partial(driver_fetch_latency, protocol, size, sc, site=site))
                rows.append({"protocol": protocol, "client_kbps": bw / 1e3, **row})
    return pd.DataFrame(rows)


def figure6_driver(quick: bool = True, costs: Costs | None = None, hosts: int = 22,
                   size: int = 15_000) -> pd.DataFrame:
    """Figure 6 per point, model vs driver: the portal page, warm and cold cache."""
    sc = Scenario(costs=_costs(costs, quick))
    rows = []
    with SimSite(dict.fromkeys(SimSite.portal_paths(hosts, size), size)) as site:
        for protocol in PROTOCOLS:
            for warm in (True, False):
                if not protocol.endswith("-proxy") and not warm:
                    continue
                cache = ("warm" if warm else "cold") if protocol.endswith("-proxy") else "none"
                row = _pair(
                    partial(portal_latency, protocol, hosts, size, sc, warm),
                    partial(driver_portal_latency, protocol, hosts, size, sc, warm, site=site))
                rows.append({"protocol": protocol, "cache": cache, "page_bytes": hosts * size,
                             "fetches": hosts, **row})
    return pd.DataFrame(rows)
