"""Experiments of the SINE paper as functions returning pandas DataFrames.

=====================  ==========================================================================
function               what it reproduces
=====================  ==========================================================================
:func:`table2`         Table II: public-key operations and origin round trips for N requests in
                       one session -- counted by instrumentation on a real loopback run of the
                       origin server and the verifying client (SINE, SINEB, SINEB+AT_collect,
                       SINEX)
:func:`cpu_costs`      the CPU costs measured with the real implementation that the model uses
:func:`figure4`        Figure 4: throughput per file size, nine protocols (Table III)
:func:`figure5`        Figure 5: latency of one 100 KB file vs the client's bandwidth
                       (128 kbit/s .. 100 Mbit/s; server-proxy ~4 Mbit/s)
:func:`figure6`        Figure 6: a 330 KB portal page from 22 hosts x 15 KB, warm and cold cache
:func:`figure4_driver`  Figures 4, 5 and 6 again, each point computed twice: by the model and by
:func:`figure5_driver`  :mod:`sine.simulate` (the real origin, cache and verifier driven over
:func:`figure6_driver`  byte-accurate TCP by :mod:`netsim.drive`), side by side
=====================  ==========================================================================

Figures 4-6 come from the SimPy model in :mod:`sine.model` (netsim links and TCP) fed with
costs measured on this machine; the ``*_driver`` functions set the model beside the real objects
driven in simulated time (``latency_model_s`` / ``latency_driver_s``, their relative gap and
the wall-clock seconds each took).  The paper gives its figures only as plots; the numbers it
states in the text are in :data:`PAPER_CLAIMS` and are set beside ours.  Every function takes
``quick`` (CI-sized sweeps and fewer repetitions).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd

from .algorithms import SigAlg, SigningKey, VerifyingKey
from .client import SineClient
from .model import PROTOCOLS, Costs, Scenario, fetch_latency, measure_costs, portal_latency
from .server import OriginServer, make_self_signed
from .simulate import SimSite, driver_fetch_latency, driver_portal_latency
from .site import sign_site

__all__ = ["PAPER_CLAIMS", "PAPER_TABLE2", "table2", "cpu_costs", "figure4", "figure5",
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


def _site(root: Path, pages: int) -> list[str]:
    """An index linking ``pages`` pages of ~8 KB (a navigation bar), each linking back."""
    links = " ".join(f'<a href="p{i}.html">page {i}</a>' for i in range(pages))
    (root / "index.html").write_text(f"<html><nav>{links}</nav></html>\n")
    for i in range(pages):
        filler = ("lorem ipsum " * 700)[: 8000]
        (root / f"p{i}.html").write_text(
            f'<html><a href="index.html">home</a> <a href="p{(i + 1) % pages}.html">next</a>'
            f"<p>{filler}</p></html>\n")
    return ["/index.html"] + [f"/p{i}.html" for i in range(pages)]


def table2(n_requests: tuple[int, ...] = (1, 5, 10, 20), quick: bool = True) -> pd.DataFrame:
    """Count public-key operations and origin round trips per protocol for N requests."""
    if quick:
        n_requests = tuple(n for n in n_requests if n <= 10)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "site")
        root.mkdir()
        paths = _site(root, max(n_requests))
        key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
        sign_site(root, key, time.time())
        cert, tls_key = make_self_signed("127.0.0.1")
        Path(tmp, "c.pem").write_bytes(cert)
        Path(tmp, "k.pem").write_bytes(tls_key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(Path(tmp, "c.pem"), Path(tmp, "k.pem"))

        async def run() -> None:
            origin = OriginServer(root)
            port, tls_port = await origin.start(tls=ctx)
            try:
                for n in n_requests:
                    for label, mode, collect in [("SINE", "sine", False),
                                                 ("SINEB", "sineb", False),
                                                 ("SINEB (AT_collect)", "sineb", True),
                                                 ("SINEX", "sinex", False)]:
                        pk = VerifyingKey.from_pem(key.verifying_key().to_pem())
                        client = SineClient(
                            f"http://127.0.0.1:{port}", mode=mode, public_key=pk,
                            tls_origin=f"https://127.0.0.1:{tls_port}", tls_ca=cert,
                            collect=collect)
                        async with client:
                            results = [await client.get(p) for p in paths[:n]]
                        c = client.counters
                        paper = PAPER_TABLE2[mode]
                        rows.append({
                            "protocol": label, "N": n,
                            "verified": sum(r.ok for r in results),
                            "signature_verifications": c.signature_verifications,
                            "tls_handshakes": c.tls_handshakes,
                            "public_key_operations": c.public_key_operations,
                            "origin_round_trips": c.origin_round_trips,
                            "paper_public_key": paper[0], "paper_round_trips": paper[1],
                        })
            finally:
                await origin.close()

        _run_async(run)
    return pd.DataFrame(rows)


def _run_async(coro_fn) -> None:  # type: ignore[no-untyped-def]
    """``asyncio.run``, also from inside a running loop (Jupyter): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro_fn())
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro_fn()).result()


def cpu_costs(quick: bool = True) -> pd.DataFrame:
    """The measured costs (one row) the model runs with."""
    c = measure_costs(quick)
    return pd.DataFrame([{
        "signature_verify_us": c.signature_verify * 1e6,
        "verify_MBps": 1 / c.hash_per_byte / 1e6,
        "tls_handshake_ms": c.tls_handshake * 1e3,
        "tls_record_MBps": (1 / c.tls_per_byte / 1e6) if c.tls_per_byte else float("inf"),
    }])


def _costs(costs: Costs | None, quick: bool) -> Costs:
    return costs if costs is not None else measure_costs(quick)


def _sizes(quick: bool) -> list[int]:
    return [1_000, 10_000, 100_000, 1_000_000] + ([] if quick else [5_000_000, 10_000_000])


def _bandwidths(quick: bool) -> list[float]:
    return [128e3, 512e3, 1e6, 4e6, 10e6, 100e6] if quick else [
        128e3, 256e3, 512e3, 1e6, 2e6, 4e6, 10e6, 20e6, 50e6, 100e6]


def figure4(quick: bool = True, costs: Costs | None = None) -> pd.DataFrame:
    """Throughput (Mbit/s) per file size for the nine protocols of Table III (warm cache)."""
    sizes = _sizes(quick)
    sc = Scenario(costs=_costs(costs, quick))
    rows = []
    for protocol in PROTOCOLS:
        for size in sizes:
            latency = fetch_latency(protocol, size, sc)
            rows.append({"protocol": protocol, "size_bytes": size, "latency_s": latency,
                         "throughput_mbps": size * 8 / latency / 1e6})
    return pd.DataFrame(rows)


def figure5(quick: bool = True, costs: Costs | None = None, size: int = 100_000
            ) -> pd.DataFrame:
    """Latency (s) of one ``size``-byte file as the client's bandwidth grows."""
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
            size: int = 15_000) -> pd.DataFrame:
    """Latency (s) of a portal page (``hosts`` x ``size`` bytes), warm and cold cache.

    ``cache`` is ``"none"`` for the direct protocols (no proxy on the path)."""
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


# -- the same figures on the real objects (sine.simulate), beside the model ---------------------


def _pair(model: Callable[[], float], driver: Callable[[], float]) -> dict[str, float]:
    """Run both callables; latencies, relative gap (driver vs model) and wall seconds."""
    t0 = time.perf_counter()
    old = model()
    t1 = time.perf_counter()
    new = driver()
    t2 = time.perf_counter()
    return {"latency_model_s": old, "latency_driver_s": new, "rel_diff": new / old - 1,
            "model_wall_s": t1 - t0, "driver_wall_s": t2 - t1}


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
