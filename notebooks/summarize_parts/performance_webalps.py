"""The WebALPS host benchmark's rows of the performance table (``bench_webalps_host.py``):
WebALPS against HTTPS on the same host program, and plain HTTP beside a frozen guardian."""

from __future__ import annotations

from typing import Any

from .base import Source
from .performance import cmd, load, med, n_of, rng, row, verdict


def _webalps_setting(d: dict[str, Any], setting: str, what: str) -> list[str]:
    """One setting of ``bench_webalps_host`` (1 and 8 clients) as a row."""
    one, eight = d["slowdown"][f"{setting}/1"], d["slowdown"][f"{setting}/8"]
    per = "connection" if setting == "new-connection" else "request"
    return [what + n_of(d), cmd("python benchmarks/bench_webalps_host.py", "webalps_host.json"),
            f"{med(one['webalps']['rps']):,.0f} / {med(eight['webalps']['rps']):,.0f} req/s; "
            f"{med(one['webalps'][f'round_trips_per_{per}']):.2f} guardian round trips per {per}",
            f"HTTPS on the same host program {med(one['https']['rps']):,.0f} / "
            f"{med(eight['https']['rps']):,.0f} req/s",
            f"slowdown {rng(one['slowdown'])}× / {rng(eight['slowdown'])}×",
            verdict(f"≤ {d['target']:g}×", one["target_met"] and eight["target_met"]), "measured"]


@row("performance")
def _webalps_host(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/webalps_host.json")
    f = d["freeze"]
    ratio = f["ratio_frozen_over_running"]
    return [
        _webalps_setting(d, "new-connection", "WebALPS vs HTTPS, the same host program (`--mode "
                         "https` / `--mode webalps`, guardian cost model off): 2 KB requests, a new "
                         "TLS connection per request, 1 / 8 closed-loop clients"),
        _webalps_setting(d, "keep-alive", "WebALPS vs HTTPS, the same host program: keep-alive "
                         "requests on a handshaken connection, 1 / 8 clients"),
        ["WebALPS host's plain HTTP (`--http-port`) with its guardian frozen (SIGSTOP) vs running"
         + n_of(d), cmd("python benchmarks/bench_webalps_host.py", "webalps_host.json"),
         f"frozen {med(f['frozen']['rps']):,.0f} req/s; HTTPS requests completed while frozen: "
         f"{med(f['frozen']['https_completed']):.0f}", f"running {med(f['running']['rps']):,.0f} req/s",
         f"frozen / running {rng(ratio, '.3f')}", verdict("≈ 1", 0.9 <= med(ratio) <= 1.1), "measured"],
    ]
