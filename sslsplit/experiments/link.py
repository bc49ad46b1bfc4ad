"""Figure 12 measured: the real servers, the real splitting proxy and curl over a kernel ADSL line.

:func:`sslsplit.experiments.figure12` computes the paper's latency-vs-size figure from the
SimPy model (:mod:`sslsplit.model_latency`). Here the same figure is *measured* on a
:class:`testbed.linux.linktestbed.LinkTestbed` with the :data:`~sslsplit.params.ADSL_PROFILE` profile (the
paper's §6.1 setup: the origin behind 160 kbit/s upstream, client and proxy on a 100 Mbit/s
LAN, 10 ms each way), with ``hop_by_hop=True`` so that the proxy's own connections cross the
delay relay too:

========  ======================================================================================
node      programs
========  ======================================================================================
origin    ``python -m sslsplit.server`` (splitting server + record store),
          ``python -m testbed.https_server`` (HTTPS, AES128-SHA: RSA key exchange as the model),
          ``python -m http.server`` (plain HTTP)
middle    ``python -m sslsplit.proxy`` (memory cache)
client    ``curl``: ``time_total`` is the latency (before the SYN .. the last body byte)
========  ======================================================================================

Protocols: ``http`` and ``https`` go straight to the origin; ``split_cold`` fetches a file the
proxy has never seen (a fresh file per download), ``split_warm`` fetches it again right after
(the payloads now come from the proxy's cache; only the handshake and the stubs cross the
ADSL line). The model for ``split_warm`` is :func:`split_warm_latency` (the cold flights
without the miss handler); for both ``split_*`` the model sends a stub instead of the
certificate, which our proxy caches (:func:`model_latency`). Every row says ``kind``: ``measured`` (curl), ``modelled``.

:func:`figure12_measured` puts, per (protocol, size), the measured median, the model (the
paper's setup, :class:`~sslsplit.model_latency.AdslTestbed`, and the same with Linux's TCP initial
window), latency / HTTPS latency for both and the paper's statement where it makes one
(:data:`sslsplit.paper_points.PAPER_POINTS`, Figure 12: cold splitting ~0.9 x HTTPS for small
files and ~1.1 x for large ones). :func:`recalibrate` fits the model's free parameters (the
server's RSA time and the proxy's per-flight time) on half of the points and reports the
agreement on the other half, before and after. Needs root, iproute2 and curl
(:class:`testbed.linux.linktestbed.NamespacesUnavailable` otherwise).

**What the line lacks for the proxy.** Packets *from* the proxy carry their hop's round trip
through the delay relay, but packets *to* it are shaped by ``tbf`` alone (see
:class:`~testbed.linux.linktestbed.LinkTestbed`'s ``hop_by_hop``): after an idle spell the origin's
160 kbit/s line lets two full frames (3 kB, 150 ms of line time) reach the proxy at once. A
small flight from the origin to the proxy (the handshake, the stubs of a small file) can
therefore arrive up to ~150 ms early, which favours ``split_cold`` and ``split_warm`` at small
sizes; ``http`` and ``https`` (forwarded, serialised by the relay) do not get this. Compare
small-file splitting with HTTPS with that in mind.
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import simpy
from simpy.events import ProcessGenerator

from netsim.link import Link
from netsim.tcp import HalfConnection, TcpConnection, TcpParams
from testbed.linux.linkruns import (
    alternate_halves,
    curl,
    grid_fit,
    log_error,
    run_capture,
    start_listening,
    stop,
)
from testbed.linux.linktestbed import ADDRESSES, LinkTestbed, check_available

from ..model_latency import AdslTestbed, _response_bytes, request_latency
from ..paper_points import PAPER_POINTS
from ..params import ADSL_PROFILE

__all__ = [
    "FIG12_AXIS",
    "QUICK_SIZES",
    "PROTOCOLS",
    "KERNEL_TCP",
    "measure_figure12",
    "split_warm_latency",
    "model_latency",
    "figure12_measured",
    "recalibrate",
    "RECAL_GRID",
    "CIPHERS",
    "agreement_summary",
]

#: Figure 12's x axis as :func:`sslsplit.experiments.figure12` draws it (12 sizes, bytes).
FIG12_AXIS: tuple[int, ...] = tuple(
    int(s) for s in np.unique(np.round(np.geomspace(100, 2_000_000, 12))))
#: Three sizes of that axis for ``quick`` runs: small, medium, large (~1 min over ADSL_PROFILE).
QUICK_SIZES: tuple[int, ...] = (FIG12_AXIS[2], FIG12_AXIS[5], FIG12_AXIS[8])
PROTOCOLS = ("http", "https", "split_cold", "split_warm")
#: Linux's TCP: RFC 6928 initial window, 66 bytes per segment (IP + TCP timestamps + Ethernet).
KERNEL_TCP = TcpParams(init_cwnd=10.0, header=66)
#: The suite curl offers: RSA key exchange, as the model's handshake.
CIPHERS = "AES128-SHA"
_SPLIT_PORT, _STORE_PORT, _HTTPS_PORT, _HTTP_PORT, _PROXY_PORT = 8443, 8444, 9443, 8080, 4433


def _files(root: Path, sizes: Sequence[int], repeat: int, seed: int = 0) -> None:
    """One file per (size, repeat), random bytes: every cold download is a new payload."""
    rng = random.Random(seed)
    for size in sizes:
        for r in range(repeat):
            (root / f"f{size}_{r}.bin").write_bytes(rng.randbytes(size))


def measure_figure12(quick: bool = True, sizes: Sequence[int] | None = None,
                     repeat: int = 1, protocols: Sequence[str] = PROTOCOLS,
                     capture_dir: Path | None = None) -> pd.DataFrame:
    """One row per download: ``protocol``, ``size``, ``rep``, curl's ``time_total`` as
    ``measured_s`` plus its connect / TLS / first-byte times, ``kind`` = ``measured``.

    ``sizes`` defaults to :data:`QUICK_SIZES` (``quick``) or :data:`FIG12_AXIS`. Downloads run
    one at a time on an idle line, as in the paper. With ``capture_dir`` (e.g.
    ``results/sslsplit/captures``) each download is also recorded on the client's link into
    ``<protocol>_<size>_<rep>.pcap`` there (:func:`testbed.linux.linkruns.run_capture`). Raises
    :class:`~testbed.linux.linktestbed.NamespacesUnavailable` where namespaces cannot be made."""
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown:
        raise ValueError(f"protocols must be among {PROTOCOLS}, got {sorted(unknown)}")
    if "split_warm" in protocols and "split_cold" not in protocols:
        raise ValueError("split_warm needs split_cold (the cold download fills the cache)")
    check_available()
    sizes = list(sizes if sizes is not None else (QUICK_SIZES if quick else FIG12_AXIS))
    origin, middle = ADDRESSES["origin"], ADDRESSES["middle"]
    py = [sys.executable, "-u", "-m"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="wstb-split-") as tmp, \
            LinkTestbed(ADSL_PROFILE, hop_by_hop=True) as tb:
        root = Path(tmp)
        root.chmod(0o755)
        _files(root, sizes, repeat)
        procs = [
            start_listening(tb, "origin", [*py, "sslsplit.server", "--root", tmp, "--host",
                                           origin, "--port", str(_SPLIT_PORT), "--store-port",
                                           str(_STORE_PORT)], "splitting server on"),
            start_listening(tb, "origin", [*py, "testbed.https_server", "--root", tmp, "--host",
                                           origin, "--port", str(_HTTPS_PORT), "--ciphers",
                                           CIPHERS], "listening on"),
            start_listening(tb, "origin", [*py, "http.server", "--bind", origin,
                                           str(_HTTP_PORT), "-d", tmp], "Serving HTTP"),
            start_listening(tb, "middle", [*py, "sslsplit.proxy", "--server",
                                           f"{origin}:{_SPLIT_PORT}", "--store",
                                           f"{origin}:{_STORE_PORT}", "--listen",
                                           f"{middle}:{_PROXY_PORT}"], "splitting proxy on"),
        ]
        urls = {"http": f"http://{origin}:{_HTTP_PORT}", "https": f"https://{origin}:{_HTTPS_PORT}",
                "split_cold": f"https://{middle}:{_PROXY_PORT}",
                "split_warm": f"https://{middle}:{_PROXY_PORT}"}
        try:
            for size in sizes:
                for r in range(repeat):
                    for proto in protocols:
                        with run_capture(tb, capture_dir, f"{proto}_{size}_{r}"):
                            t = curl(tb, f"{urls[proto]}/f{size}_{r}.bin", ciphers=CIPHERS)
                        if t.size_download != size:
                            raise RuntimeError(f"{proto} {size}: got {t.size_download} bytes")
                        rows.append({"protocol": proto, "size": size, "rep": r,
                                     "measured_s": t.time_total, "connect_s": t.time_connect,
                                     "tls_s": t.time_appconnect,
                                     "first_byte_s": t.time_starttransfer, "kind": "measured"})
        finally:
            for proc in procs:
                stop(proc)
    return pd.DataFrame(rows)


def split_warm_latency(size: int, params: AdslTestbed | None = None) -> float:
    """Modelled seconds for one download through a *warm* splitting proxy: the flights of
    :func:`sslsplit.model_latency.request_latency`'s cold splitting without the miss handler (every
    payload is in the proxy's cache; only the handshake, the key-expose messages and the
    stubs cross the ADSL line). As our server does, the HTTP head travels in a record of its
    own and every body record is a cacheable stub, even for a 100-byte file (Apache in the paper
    sent small bodies with the head). The handshake as given in ``params`` (see
    :func:`model_latency` for the cached certificate)."""
    p = params or AdslTestbed()
    w = p.wire
    env = simpy.Environment()
    lan_cp, lan_pc = Link(env, p.lan, "lan:c->p"), Link(env, p.lan, "lan:p->c")
    down, up = Link(env, p.server_down, "adsl:->s"), Link(env, p.server_up, "adsl:s->")
    done: list[float] = []

    def run() -> ProcessGenerator:
        cp = TcpConnection(env, (lan_cp,), (lan_pc,), p.tcp, "c-p")
        ps = TcpConnection(env, (down,), (up,), p.tcp, "p-s")

        def relay(first: HalfConnection, second: HalfConnection, nbytes: int) -> ProcessGenerator:
            yield first.send(nbytes)
            if p.proxy_seconds:
                yield env.timeout(p.proxy_seconds)
            yield second.send(nbytes)

        yield cp.open()
        yield ps.open()
        yield from relay(cp.a, ps.a, p.client_hello)
        yield from relay(ps.b, cp.b, w.tls_handshake - p.server_finished + w.key_expose)
        yield from relay(cp.a, ps.a, p.client_key_exchange)
        yield env.timeout(p.rsa_seconds)
        yield from relay(ps.b, cp.b, p.server_finished + w.key_expose)
        yield from relay(cp.a, ps.a, w.http_request + w.record_overhead)
        rec = w.large_file_record if size > w.large_file_bytes else w.record_payload
        n = -(-size // rec)  # our server puts even a tiny body in records of its own
        yield ps.b.send((1 + n) * w.stub_overhead + w.http_header)
        yield cp.b.send(_response_bytes(size, w, True))
        done.append(env.now)

    env.process(run())
    env.run()
    return done[0]


def model_latency(protocol: str, size: int, params: AdslTestbed | None = None,
                  certificate_cached: bool = True) -> float:
    """The model's seconds for one download (:func:`~sslsplit.model_latency.request_latency`, or
    :func:`split_warm_latency` for ``split_warm``).

    ``certificate_cached``: our proxy keeps the server's certificate record in its cache
    (§3.5) from the first download on, so for ``split_*`` the server's handshake flight
    carries a stub instead of the certificate (``WireParams.tls_certificate`` bytes fewer);
    ``False`` is the paper setup's model."""
    params = params or AdslTestbed()
    if certificate_cached and protocol.startswith("split"):
        w = params.wire
        params = replace(params, wire=replace(
            w, tls_handshake=w.tls_handshake - w.tls_certificate + w.stub_overhead))
    if protocol == "split_warm":
        return split_warm_latency(size, params)
    return request_latency(protocol, size, params)


def _paper_vs_https(protocol: str, size: int, sizes: Sequence[int]) -> float:
    """The paper's latency / HTTPS for cold splitting at our smallest and largest size."""
    if protocol != "split_cold":
        return float("nan")
    pts = PAPER_POINTS[(PAPER_POINTS.figure == "12") & (PAPER_POINTS.protocol == protocol)]
    by_x = dict(zip(pts["x"], pts["paper_value"], strict=True))
    if size == min(sizes):
        return float(by_x["small files"])
    if size == max(sizes):
        return float(by_x["large files"])
    return float("nan")


def figure12_measured(quick: bool = True, runs: pd.DataFrame | None = None,
                      params: AdslTestbed | None = None, **measure: object) -> pd.DataFrame:
    """Figure 12 per point: measured (median of the runs) beside the model and the paper.

    Columns: ``protocol``, ``size``, ``runs``, ``measured_s`` (median), ``measured_min_s``,
    ``measured_max_s``, ``model_s`` (``params``, default the paper's setup),
    ``model_kernel_tcp_s`` (the same with :data:`KERNEL_TCP`), ``model_no_cert_cache_s``
    (the paper setup's splitting handshake, certificate sent), ``model_over_measured``,
    ``measured_vs_https`` / ``model_vs_https`` (latency / HTTPS latency at that size),
    ``paper_vs_https`` (cold splitting at the smallest / largest size, else NaN) and ``half``
    (:func:`testbed.linux.linkruns.alternate_halves` along the sizes, per protocol). ``runs`` is a
    :func:`measure_figure12` table (measured now when ``None``, with ``measure`` passed on)."""
    if runs is None:
        runs = measure_figure12(quick, **measure)  # type: ignore[arg-type]  # measure holds measure_figure12's own keyword arguments
    params = params or AdslTestbed()
    kernel = replace(params, tcp=KERNEL_TCP)
    g = runs.groupby(["protocol", "size"])["measured_s"]
    df = pd.DataFrame({"runs": g.size(), "measured_s": g.median(), "measured_min_s": g.min(),
                       "measured_max_s": g.max()}).reset_index()
    df["model_s"] = [model_latency(p, s, params) for p, s in zip(df.protocol, df["size"],
                                                                  strict=True)]
    df["model_kernel_tcp_s"] = [model_latency(p, s, kernel) for p, s in
                                zip(df.protocol, df["size"], strict=True)]
    df["model_no_cert_cache_s"] = [model_latency(p, s, params, certificate_cached=False)
                                   for p, s in zip(df.protocol, df["size"], strict=True)]
    df["model_over_measured"] = df["model_s"] / df["measured_s"]
    for col, out in (("measured_s", "measured_vs_https"), ("model_s", "model_vs_https")):
        https = df[df.protocol == "https"].set_index("size")[col]
        df[out] = df[col].to_numpy() / https.reindex(df["size"]).to_numpy()
    sizes = sorted(df["size"].unique())
    df["paper_vs_https"] = [_paper_vs_https(p, s, sizes) for p, s in
                            zip(df.protocol, df["size"], strict=True)]
    df = df.sort_values(["protocol", "size"]).reset_index(drop=True)
    df["half"] = [h for _, grp in df.groupby("protocol", sort=False)
                  for h in alternate_halves(len(grp))]
    return df


#: Candidate values of the free parameters :func:`recalibrate` fits (seconds).
RECAL_GRID: dict[str, Sequence[float]] = {
    "rsa_seconds": (0.0, 0.002, 0.005, 0.010, 0.015, 0.025, 0.040, 0.060, 0.090),
    "proxy_seconds": (0.0, 0.001, 0.002, 0.005, 0.010, 0.020),
}


def recalibrate(fig: pd.DataFrame, params: AdslTestbed | None = None,
                grid: dict[str, Sequence[float]] | None = None
                ) -> tuple[dict[str, float], pd.DataFrame]:
    """Fit the model's free parameters on the ``calibration`` half of ``fig``, judge both.

    ``fig`` is a :func:`figure12_measured` table; the parameters are
    :class:`~sslsplit.model_latency.AdslTestbed`'s ``rsa_seconds`` (the origin's handshake CPU; the
    paper's 15 ms is a 500 MHz K6's) and ``proxy_seconds`` (the proxy's time per relayed
    flight), over :data:`RECAL_GRID`, minimising :func:`testbed.linux.linkruns.log_error` on the
    calibration points only. Returns the fitted values and ``fig`` with ``model_fit_s`` and
    ``fit_over_measured`` added; the held-out rows are the honest test.
    """
    base = params or AdslTestbed()
    cal = fig[fig.half == "calibration"]

    def loss(values: dict[str, float]) -> float:
        # the grid's keys name float fields of AdslTestbed; replace() checks them at run time
        p = replace(base, **cast("dict[str, Any]", values))
        return log_error([model_latency(proto, int(size), p) for proto, size in
                          zip(cal.protocol, cal["size"], strict=True)],
                         list(cal["measured_s"]))

    best, _ = grid_fit(loss, grid or RECAL_GRID)
    fitted = replace(base, **cast("dict[str, Any]", best))  # float fields, as in loss()
    out = fig.copy()
    out["model_fit_s"] = [model_latency(p, int(s), fitted) for p, s in
                          zip(out.protocol, out["size"], strict=True)]
    out["fit_over_measured"] = out["model_fit_s"] / out["measured_s"]
    return best, out


def agreement_summary(fig: pd.DataFrame) -> pd.DataFrame:
    """Per half: the mean ``|model / measured - 1|`` of the model before and after the fit (the
    ``held-out`` row is the test; ``calibration`` is in-sample)."""
    rows = []
    for half, g in fig.groupby("half"):
        rows.append({"half": half, "points": len(g),
                     "before_mean_abs_error": float((g.model_over_measured - 1).abs().mean()),
                     "after_mean_abs_error": float((g.fit_over_measured - 1).abs().mean())})
    return pd.DataFrame(rows)

