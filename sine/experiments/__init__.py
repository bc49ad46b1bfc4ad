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
                       (Figures 4-6 take ``variant="model" | "driver" | "measured"``)
:func:`figure4_driver`  Figures 4, 5 and 6 again, each point computed twice: by the model and by
:func:`figure5_driver`  :mod:`sine.model_driver` (the real origin, cache and verifier driven over
:func:`figure6_driver`  byte-accurate TCP by :mod:`netsim.drive`), side by side
=====================  ==========================================================================

Figures 4-6 come from the SimPy model in :mod:`sine.model_latency` (netsim links and TCP) fed with
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

from ..aio.client import SineClient
from ..aio.server import OriginServer, make_self_signed
from ..algorithms import SigAlg, SigningKey, VerifyingKey
from ..model_driver import SimSite, driver_fetch_latency, driver_portal_latency
from ..model_latency import PROTOCOLS, Costs, Scenario, fetch_latency, portal_latency
from ..site import sign_site
from ..tag import encode_stream, sign_document
from ..verifier import StreamVerifier

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


# -- measuring CPU costs with the real implementation ------------------------------------------


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _tls_pair(cert_pem: bytes, key_pem: bytes, tmpdir: str
              ) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    cert_file, key_file = Path(tmpdir, "c.pem"), Path(tmpdir, "k.pem")
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, payload: bytes = b""
               ) -> None:
    """One in-memory TLS handshake (MemoryBIO, no sockets), then ``payload`` one way."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if client.version() and server.version():
            try:
                client.do_handshake()
                server.do_handshake()
                break
            except ssl.SSLWantReadError:
                continue
    view = memoryview(payload)
    for i in range(0, len(payload), 16384):
        server.write(view[i : i + 16384])
        c_in.write(s_out.read())
        while True:
            try:
                client.read(65536)
            except ssl.SSLWantReadError:
                break


def measure_sine_costs(quick: bool = True) -> Costs:
    """Measure the model's :class:`~sine.model_latency.Costs` on this machine with the real code
    (best of a few runs): an RSA-PSS verification, the streaming verifier's bytes per second, and
    a Python ``ssl`` handshake and record stream in memory (P-256 certificate)."""
    repeat = 3 if quick else 10
    key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
    pk = key.verifying_key()
    msg = b"x" * 200
    sig = key.sign(msg)
    signature_verify = _best(lambda: [pk.verify(msg, sig) for _ in range(20)], repeat) / 20
    doc = bytes(range(256)) * (4096 if quick else 16384)
    signed = sign_document(doc, "/m", key, 1e9)
    body = b"".join(encode_stream(doc, signed))

    def verify() -> None:
        v = StreamVerifier("/m", 1e9, trusted_digest=signed.info.at_sign())
        view = memoryview(body)
        for i in range(0, len(body), 65536):
            v.receive_data(view[i : i + 65536])
        v.receive_eof()

    hash_per_byte = _best(verify, repeat) / len(body)
    cert, tls_key = make_self_signed("127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        server_ctx, client_ctx = _tls_pair(cert, tls_key, tmp)
        handshake = _best(lambda: _handshake(server_ctx, client_ctx), repeat)
        with_data = _best(lambda: _handshake(server_ctx, client_ctx, doc), repeat)
    per_byte = max(with_data - handshake, 0.0) / len(doc)
    return Costs(signature_verify, hash_per_byte, handshake, per_byte, source="measured")


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

        return getattr(linkexperiments, f"{name}_measured")  # type: ignore[no-any-return]
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
