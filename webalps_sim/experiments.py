"""WebALPS experiments: Tables 1 and 2, Figure 4 and the cost of the trust boundary.

Every function returns a DataFrame; the notebook (``notebooks/webalps.ipynb``) plots them.

* :func:`table1`: requests/s, connect time and request time for one closed-loop client fetching
  a 2 KB file for a fixed time (``http_load`` in the paper, :mod:`webalps_sim.aio.loadgen`
  here), from real server processes (:func:`webalps_sim.aio.testbed.testbed`) on loopback:
  plain HTTP, normal HTTPS, and WebALPS with the 4758 cost model off (native speed) and on.
  **Measured**; the WebALPS-4758 request
  time is close to the paper's *by construction* (the cost model's one tuned constant, see
  :mod:`webalps_sim.costmodel`), nothing else is tuned.
* :func:`table2`: the slowdowns derived from :func:`table1`, beside the paper's 11.68 / 5.85;
  the hosts run in five interleaved rounds and every ratio is the median of the five per-round
  ratios, with its range (one closed-loop run is too noisy on a shared machine).
* :func:`figure4_measured`: requests/s against the number of closed-loop clients under the
  e-commerce mix (92 % HTTP, 8 % secure), HTTPS host against WebALPS host. **Measured**, small
  loads only (the load generator shares the machine's cores with the servers).
* :func:`calibrate_model` / :func:`figure4`: the SimPy model (:mod:`webalps_sim.model_throughput`)
  calibrated from the *single-client* runs of Table 1 only, compared with the measured mix runs
  (which it never saw) and extended to the paper's 8 clients x 3 threads. **Modelled.**
* :func:`figure4_variant`: Figure 4 by ``variant="measured" | "model" | "driver"`` (a
  dispatcher over the two functions above and :func:`webalps_sim.model_driver.figure4_rows`:
  real connections through the delegate seam in simulated time).
* :func:`cost_breakdown`: where the modelled card time of one WebALPS request goes (RSA,
  records, Finished, host-card transfers), from the guardian's per-operation counters.

Every run is re-runnable from the command line (``python -m webalps_sim.experiments table1``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any, cast

import pandas as pd

from .aio.loadgen import closed_loop
from .aio.testbed import FILE_SIZE, HOSTS, Testbed, measure_run, testbed
from .costmodel import PAPER_EXTRA_PER_REQUEST_S, Card4758, CostAccount
from .model_driver import figure4_rows
from .model_throughput import ServerParams, simulate, sweep

__all__ = [
    "FILE_SIZE", "HOSTS", "PAPER_TABLE1", "PAPER_TABLE2", "Testbed", "VARIANTS",
    "calibrate_model", "cost_breakdown", "figure4", "figure4_measured", "figure4_variant",
    "measured_cost_breakdown", "run_config", "table1", "table2", "testbed",
]

#: Paper, Table 1 (Apache + 4758, http_load, one client, 2 s, 2 KB file).
PAPER_TABLE1 = pd.DataFrame([
    {"host": "WebALPS", "rps": 9.8922, "connect_ms": 0.7235, "request_ms": 100.368},
    {"host": "HTTPS", "rps": 67.7246, "connect_ms": 0.6335, "request_ms": 14.1461},
    {"host": "HTTP", "rps": 858.7989, "connect_ms": 0.1832, "request_ms": 0.9060},
])
#: Paper, Table 2 (slowdown factors as printed).
PAPER_TABLE2 = pd.DataFrame([
    {"slowdown": "SSL (HTTP -> HTTPS)", "rps": 11.68, "connect": 2.46, "request": 14.6},
    {"slowdown": "WebALPS (HTTPS -> WebALPS)", "rps": 5.85, "connect": 0.14, "request": 6.1},
])
#: Figure 4's workload: WebBench e-commerce suite, 8 clients x 3 threads at most.
SECURE_FRACTION, PAPER_MAX_LOAD = 0.08, 24


def run_config() -> dict[str, Any]:
    """What the results depend on beyond the code and the quick flag (for ``run.json``)."""
    return {"file_bytes": FILE_SIZE, "secure_fraction": SECURE_FRACTION,
            "card_4758": asdict(Card4758()), "hosts": {k: list(v) for k, v in HOSTS.items()}}


def _seconds(quick: bool, seconds: float | None) -> float:
    return seconds if seconds is not None else (2.0 if quick else 10.0)


# -- Tables 1 and 2 ------------------------------------------------------------------------------
def table1(quick: bool = True, seconds: float | None = None,
           hosts: Sequence[str] = tuple(HOSTS), repeats: int = 5) -> pd.DataFrame:
    """Measured Table 1: one client, one connection per request, a 2 KB file, fixed time.

    The hosts are measured in ``repeats`` interleaved rounds (HTTP, HTTPS, WebALPS-native,
    WebALPS-4758, HTTP, HTTPS, ...), so that background load on a shared machine lands on every
    host alike; each round is one closed-loop run of ``seconds``.  One row per host holds the
    **median** over the rounds of: rps, connect_ms, request_ms (means over complete fetches within
    a round), requests, errors (sums), host_cpu_ms / guardian_cpu_ms (server CPU per request),
    card_ms (modelled 4758 time per request from the guardian's counters); ``rps_min`` /
    ``rps_max`` and ``repeats`` give the range; the paper's three values where it has the row.
    The per-round rows are in ``df.attrs["rounds"]`` (a DataFrame with a ``round`` column), from
    which :func:`table2` takes its ratios round by round.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    secs = _seconds(quick, seconds)
    rows = []
    with testbed(hosts) as bed:
        for host in hosts:
            closed_loop(bed.urls[host], seconds=min(0.5, secs))  # warm-up, not counted
        for rnd in range(repeats):
            for host in hosts:
                rows.append({"round": rnd, **_table1_point(bed, host, secs)})
    rounds = pd.DataFrame(rows)
    df = _median_by_host(rounds, list(hosts))
    paper = PAPER_TABLE1.set_index("host")
    key = {"HTTP": "HTTP", "HTTPS": "HTTPS", "WebALPS-4758": "WebALPS"}
    for col in ("rps", "connect_ms", "request_ms"):
        df[f"paper_{col}"] = [paper[col].get(key.get(h, ""), float("nan")) for h in df["host"]]
    df.attrs["rounds"] = rounds
    return df


def _table1_point(bed: Testbed, host: str, secs: float) -> dict[str, Any]:
    """One closed-loop run of ``host``: Table 1's columns for that run."""
    card_before = _card_counters(bed, host)
    result, cpu = measure_run(bed, host, bed.urls[host], secs)
    n = max(result.requests, 1)
    card_after = _card_counters(bed, host)
    handshakes = max(card_after[1] - card_before[1], 1)
    return {"host": host, **{k: result.summary()[k] for k in
                             ("rps", "connect_ms", "request_ms", "tcp_ms", "requests", "errors")},
            "host_cpu_ms": cpu["host"] / n * 1e3,
            "guardian_cpu_ms": cpu.get("guardian", 0.0) / n * 1e3,
            "client_cpu_ms": cpu["client"] / n * 1e3,
            "card_ms": (card_after[0] - card_before[0]) / handshakes * 1e3,
            "first_error": result.errors[0] if result.errors else ""}


def _median_by_host(rounds: pd.DataFrame, hosts: list[str]) -> pd.DataFrame:
    """One row per host: medians of the rounds (sums for requests and errors), rps range, n."""
    out = []
    for host in hosts:
        mine = rounds[rounds["host"] == host]
        row: dict[str, Any] = {"host": host}
        for col in ("rps", "connect_ms", "request_ms", "tcp_ms", "host_cpu_ms",
                    "guardian_cpu_ms", "client_cpu_ms", "card_ms"):
            row[col] = float(mine[col].median())
        row["requests"] = int(mine["requests"].sum())
        row["errors"] = int(mine["errors"].sum())
        row["first_error"] = next((e for e in mine["first_error"] if e), "")
        row["rps_min"], row["rps_max"] = float(mine["rps"].min()), float(mine["rps"].max())
        row["repeats"] = len(mine)
        out.append(row)
    return pd.DataFrame(out)


def _card_counters(bed: Testbed, host: str) -> tuple[float, int]:
    """(modelled card seconds, RSA operations) so far; per request = delta / delta RSA (one
    full handshake per request), which the flushing request in between does not skew."""
    if host not in bed.stats:
        return 0.0, 0
    _flush_stats(bed, host)
    try:
        ops = CostAccount.read(bed.stats[host])
    except FileNotFoundError:
        return 0.0, 0
    return sum(op["seconds"] for op in ops.values()), int(ops.get("rsa", {}).get("calls", 0))


def _flush_stats(bed: Testbed, host: str) -> None:
    """The counters are written at most every 0.2 s: wait until the last write is fresh."""
    time.sleep(0.25)
    try:
        closed_loop(bed.urls[host], seconds=0.01)  # one more charge triggers a write
    except ValueError:
        pass
    time.sleep(0.05)


def _cell(df: pd.DataFrame, row: str, col: str) -> float:
    """``df.at[row, col]`` as a float."""
    # cast: the columns read here are numeric; the stubs type a cell as any scalar
    return float(cast("float", df.at[row, col]))


def table2(t1: pd.DataFrame) -> pd.DataFrame:
    """Slowdowns from a measured Table 1: HTTP -> HTTPS and HTTPS -> WebALPS (each cost model).

    ``rps`` is the ratio of requests/s, ``connect`` / ``request`` the ratios of the times (the
    paper prints the WebALPS connect "slowdown" as 0.14, i.e. 1.14x; we print ratios, and the
    paper's rows converted the same way are in ``paper_*``).  When ``t1`` carries its rounds
    (``t1.attrs["rounds"]``, as :func:`table1` returns it), each ratio is taken round by round
    -- the two hosts of a pair ran next to each other -- and the row gives the **median**, with
    ``rps_min`` / ``rps_max`` and ``repeats``; a table without rounds counts as one round.
    """
    rounds = t1.attrs.get("rounds")
    if rounds is None:
        rounds = t1.assign(round=0)
    by_round = [r.set_index("host") for _, r in rounds.groupby("round")]
    rows = []

    def ratio(slow: str, fast: str, label: str, paper: dict[str, float]) -> None:
        if slow not in by_round[0].index or fast not in by_round[0].index:
            return
        each = pd.DataFrame([
            {"rps": _cell(by, fast, "rps") / _cell(by, slow, "rps"),
             "connect": _cell(by, slow, "connect_ms") / _cell(by, fast, "connect_ms"),
             "request": _cell(by, slow, "request_ms") / _cell(by, fast, "request_ms")}
            for by in by_round])
        rows.append({"slowdown": label, **{str(k): float(each[k].median()) for k in each},
                     "rps_min": float(each["rps"].min()), "rps_max": float(each["rps"].max()),
                     "repeats": len(each), **{f"paper_{k}": v for k, v in paper.items()}})

    p1 = PAPER_TABLE1.set_index("host")

    def paper_ratio(slow: str, fast: str) -> dict[str, float]:
        return {"rps": _cell(p1, fast, "rps") / _cell(p1, slow, "rps"),
                "connect": _cell(p1, slow, "connect_ms") / _cell(p1, fast, "connect_ms"),
                "request": _cell(p1, slow, "request_ms") / _cell(p1, fast, "request_ms")}

    ratio("HTTPS", "HTTP", "SSL (HTTP -> HTTPS)", paper_ratio("HTTPS", "HTTP"))
    ratio("WebALPS-native", "HTTPS", "WebALPS native (HTTPS -> WebALPS, cost model off)",
          dict.fromkeys(("rps", "connect", "request"), float("nan")))
    ratio("WebALPS-4758", "HTTPS", "WebALPS 4758 (HTTPS -> WebALPS, cost model on)",
          paper_ratio("WebALPS", "HTTPS"))
    return pd.DataFrame(rows)


# -- where the trust boundary's cost goes --------------------------------------------------------
def cost_breakdown(stats: dict[str, dict[str, float]], requests: int) -> pd.DataFrame:
    """Modelled card milliseconds per request by kind, from a guardian's counters.

    Groups: ``rsa``, ``records`` (seal + open), ``finished``, ``transfers`` (host-card round
    trips); also calls and bytes per request. The paper's 86.2 ms extra is in ``paper_total_ms``.
    """
    groups = {"rsa": ("rsa",), "records": ("seal", "open"), "finished": ("finished",),
              "transfers": ("transfer",)}
    n = max(requests, 1)
    rows = [{"part": part,
             "ms_per_request": sum(stats.get(o, {}).get("seconds", 0.0) for o in ops) / n * 1e3,
             "calls_per_request": sum(stats.get(o, {}).get("calls", 0) for o in ops) / n,
             "bytes_per_request": sum(stats.get(o, {}).get("bytes", 0) for o in ops) / n}
            for part, ops in groups.items()]
    df = pd.DataFrame(rows)
    df["paper_total_ms"] = PAPER_EXTRA_PER_REQUEST_S * 1e3
    return df


def measured_cost_breakdown(quick: bool = True, seconds: float | None = None) -> pd.DataFrame:
    """Run WebALPS-4758 alone and break its per-request card time down (:func:`cost_breakdown`).

    Requests are counted as RSA operations (one full handshake per request, as ``http_load``),
    between two reads of the counters, each after a flushing request, so that a request is
    either wholly inside the difference or wholly outside it.
    """
    secs = _seconds(quick, seconds)
    name = "WebALPS-4758"
    with testbed([name]) as bed:
        closed_loop(bed.urls[name], seconds=min(0.5, secs))  # warm-up
        time.sleep(0.3)
        _flush_stats(bed, name)
        before = CostAccount.read(bed.stats[name])
        closed_loop(bed.urls[name], seconds=secs)
        time.sleep(0.3)
        _flush_stats(bed, name)
        after = CostAccount.read(bed.stats[name])
    stats = {op: {k: after[op][k] - before.get(op, {}).get(k, 0) for k in after[op]}
             for op in after}
    return cost_breakdown(stats, int(stats.get("rsa", {}).get("calls", 0)))


# -- Figure 4 ------------------------------------------------------------------------------------
def _mix(bed: Testbed, secure_host: str) -> list[tuple[str, float]]:
    return [(bed.urls["HTTP"], 1 - SECURE_FRACTION), (bed.urls[secure_host], SECURE_FRACTION)]


def figure4_measured(quick: bool = True, seconds: float | None = None,
                     loads: Sequence[int] | None = None,
                     secure_hosts: Sequence[str] = ("HTTPS", "WebALPS-4758", "WebALPS-native"),
                     ) -> pd.DataFrame:
    """Measured requests/s against load under the e-commerce mix (8 % secure) on loopback.

    The HTTP share is served by the plain HTTP host, the secure share by ``secure_host``; one
    closed-loop client thread per unit of load.
    """
    secs = _seconds(quick, seconds)
    loads = list(loads or ([1, 3, 6] if quick else [1, 2, 3, 6, 12]))
    rows = []
    with testbed(["HTTP", *secure_hosts]) as bed:
        for host in secure_hosts:
            for clients in loads:
                result = closed_loop(_mix(bed, host), seconds=secs, clients=clients, seed=clients)
                s = result.summary()
                rows.append({"clients": clients, "host": host, "rps": s["rps"],
                             "seconds": result.seconds,
                             "secure_rps": s["https_requests"] / result.seconds,
                             "errors": s["errors"], "source": "measured"})
    return pd.DataFrame(rows)


def calibrate_model(t1: pd.DataFrame, webalps_host: str = "WebALPS-4758",
                    cores: int | None = None) -> ServerParams:
    """:class:`~webalps_sim.model_throughput.ServerParams` from the single-client rows of Table 1.

    CPU demands are the server processes' and the load generator's measured CPU per request;
    the card's demand is the guardian's CPU plus the modelled 4758 time per request; each kind's
    fixed latency is what is left of its measured per-request time (``1 / rps``) after those.
    The result has ``loopback=True`` (clients share the cores, as measured); use
    ``dataclasses.replace(params, loopback=False)`` for a server with remote clients.
    """
    by = t1.set_index("host")

    def per_request(host: str) -> float:
        return 1.0 / _cell(by, host, "rps")

    def ms(host: str, col: str) -> float:
        return _cell(by, host, col) / 1e3 if col in by.columns else 0.0

    http_cpu, https_cpu = ms("HTTP", "host_cpu_ms"), ms("HTTPS", "host_cpu_ms")
    w_host = ms(webalps_host, "host_cpu_ms")
    card = ms(webalps_host, "guardian_cpu_ms") + ms(webalps_host, "card_ms")
    client = {h: ms(h, "client_cpu_ms") for h in ("HTTP", "HTTPS", webalps_host)}
    return ServerParams(
        http_cpu_s=http_cpu, https_cpu_s=https_cpu, webalps_host_cpu_s=w_host, card_s=card,
        http_latency_s=max(0.0, per_request("HTTP") - http_cpu - client["HTTP"]),
        https_latency_s=max(0.0, per_request("HTTPS") - https_cpu - client["HTTPS"]),
        webalps_latency_s=max(0.0, per_request(webalps_host) - w_host - card
                              - client[webalps_host]),
        http_client_cpu_s=client["HTTP"], https_client_cpu_s=client["HTTPS"],
        webalps_client_cpu_s=client[webalps_host],
        cores=cores or os.cpu_count() or 1, secure_fraction=SECURE_FRACTION, loopback=True,
    )


def figure4(t1: pd.DataFrame, measured: pd.DataFrame, *, model_seconds: float = 20.0,
            max_load: int = PAPER_MAX_LOAD, seeds: int = 5) -> pd.DataFrame:
    """Measured and modelled requests/s against load, one row per (source, host, clients).

    The model is calibrated per secure host from Table 1 (:func:`calibrate_model`) and run

    * at the measured loads exactly as measured -- load generator on the same cores, clients
      starting together, for the measured seconds, no warm-up -- averaged over ``seeds`` (rows
      ``source="model"``, with ``measured_rps`` and ``error`` beside them: runs the model never
      saw; a short run with a saturated card is far from steady state, so this matters);
    * in steady state at 1..``max_load`` clients with the clients on other machines, as in the
      paper's WebBench set-up (``source="model-extended"``, ``model_seconds`` after a warm-up).
    """
    frames = [measured]
    for host in measured["host"].unique():
        webalps = host.startswith("WebALPS")
        params = calibrate_model(t1, host if webalps else "WebALPS-4758")
        kind = "webalps" if webalps else "https"
        loads = sorted(set(measured.loc[measured["host"] == host, "clients"]))
        extended = sorted({1, 2, 4, *range(8, max_load + 1, 4), max_load})
        rows = []
        for clients in loads:
            secs = float(measured.loc[(measured["host"] == host)
                                      & (measured["clients"] == clients), "seconds"].mean())
            runs = [simulate(params, clients=clients, secure=kind, seconds=secs, warmup=0.0,
                             seed=seed) for seed in range(1, seeds + 1)]
            rows.append({"clients": clients, "host": host, "source": "model",
                         "rps": sum(r.rps for r in runs) / seeds,
                         "secure_rps": sum(r.secure_done for r in runs) / seeds / secs,
                         "card_util": sum(r.card_busy for r in runs) / seeds,
                         "cpu_util": sum(r.cpu_busy for r in runs) / seeds})
        frames.append(pd.DataFrame(rows))
        df = sweep(replace(params, loopback=False), extended, seconds=model_seconds, warmup=2.0,
                   hosts=(kind,))
        frames.append(df.assign(host=host, source="model-extended"))
    out = pd.concat(frames, ignore_index=True)
    meas = measured.set_index(["host", "clients"])["rps"]
    out["measured_rps"] = [meas.get((h, c), float("nan")) if s == "model" else float("nan")
                           for h, c, s in zip(out["host"], out["clients"], out["source"],
                                          strict=True)]
    out["error"] = out["rps"] / out["measured_rps"] - 1
    return out


VARIANTS = ("measured", "model", "driver")
"""The variants of Figure 4 (:func:`figure4_variant`)."""


def figure4_variant(variant: str = "model", *, t1: pd.DataFrame | None = None,
                    measured: pd.DataFrame | None = None, quick: bool = True,
                    seconds: float | None = None, **model_options: Any) -> pd.DataFrame:
    """Figure 4 by ``variant``: ``"measured"``, ``"model"`` or ``"driver"``, one row per (host, clients).

    ``"measured"``: :func:`figure4_measured` (real processes on loopback).  ``"model"``: the
    rows of :func:`figure4` that come from the SimPy model (``source`` ``"model"`` and
    ``"model-extended"``), calibrated on ``t1`` (:func:`table1`) and matched to ``measured``;
    either is measured first when not given.  ``model_options`` go to :func:`figure4`.
    ``"driver"``: real connections through the WebALPS delegate seam in simulated time
    (:func:`webalps_sim.model_driver.figure4_rows`, calibrated on the paper's Table 1, nothing
    measured here); ``model_options`` go to it.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if variant == "driver":
        return figure4_rows(**model_options)
    if measured is None:
        measured = figure4_measured(quick, seconds)
    if variant == "measured":
        return measured
    if t1 is None:
        t1 = table1(quick, seconds)
    out = figure4(t1, measured, **model_options)
    return out[out["source"] != "measured"].reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m webalps_sim.experiments {table1,figure4,breakdown} [--seconds S] [--full]``."""
    from testbed import cli

    parser = argparse.ArgumentParser(prog=cli.program_name("webalps_sim.experiments"),
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("what", choices=["table1", "figure4", "breakdown"])
    parser.add_argument("--seconds", type=cli.positive_float,
                        help="per measured point (quick: 2, full: 10)")
    parser.add_argument("--full", action="store_true", help="full-size runs instead of quick")
    parser.add_argument("--repeats", type=cli.positive_int, default=5,
                        help="interleaved rounds of Table 1 (default 5; ratios are their medians)")
    parser.add_argument("--out", type=cli.directory, help="also write the tables here as CSV")
    args = parser.parse_args(argv)
    quick = not args.full
    pd.set_option("display.width", 250)
    tables: dict[str, pd.DataFrame] = {}
    if args.what == "breakdown":
        tables["cost_breakdown"] = measured_cost_breakdown(quick, args.seconds)
    else:
        tables["table1"] = t1 = table1(quick, args.seconds, repeats=args.repeats)
        tables["table2"] = table2(t1)
        if args.what == "figure4":
            tables["figure4_measured"] = measured = figure4_measured(quick, args.seconds)
            tables["figure4"] = figure4(t1, measured)
    for name, df in tables.items():
        print(f"# {name}")
        print(df.drop(columns=["first_error"], errors="ignore").to_string(index=False))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            df.to_csv(args.out / f"{name}.csv", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
