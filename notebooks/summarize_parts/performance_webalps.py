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
            f"{med(eight['https']['rps']):,.0f} req/s" + _same_chain(one, eight),
            f"slowdown {rng(one['slowdown'])}× / {rng(eight['slowdown'])}×",
            verdict(f"≤ {d['target']:g}×", one["target_met"] and eight["target_met"]), "measured"]


def _same_chain(one: dict[str, Any], eight: dict[str, Any]) -> str:
    """The HTTPS host with a certificate chain of the guardian's shape, where it was measured."""
    if "https-chain" not in one or "https-chain" not in eight:
        return ""
    return (f" (with a chain of the guardian's shape {med(one['https-chain']['rps']):,.0f} / "
            f"{med(eight['https-chain']['rps']):,.0f} req/s: WebALPS "
            f"{rng(one['slowdown_same_chain'])}× / {rng(eight['slowdown_same_chain'])}× slower)")


def _floor(d: dict[str, Any]) -> list[list[str]]:
    """The floor row: a minimal Python ping-pong against WebALPS's extra time per request."""
    if "floor" not in d:
        return []
    f = d["floor"]
    new, keep = f["new-connection"], f["keep-alive"]
    return [[
        "WebALPS floor: a minimal Python ping-pong over a Unix socket between two processes "
        "(blocking `recv_into` / `sendall`, the bytes per round trip the host exchanged), paced "
        "like the run; new connection / keep-alive, 1 client" + n_of(d),
        cmd("python benchmarks/bench_webalps_host.py", "webalps_host.json"),
        f"{med(new['paced']['round_trip_us']):.0f} / {med(keep['paced']['round_trip_us']):.0f} µs "
        f"per round trip (back to back {med(new['back-to-back']['round_trip_us']):.0f} µs); "
        f"× {new['1']['round_trips']:.0f} / {keep['1']['round_trips']:.0f} round trips = "
        f"{new['1']['floor_us']:.0f} / {keep['1']['floor_us']:.0f} µs of WebALPS's "
        f"{new['1']['extra_us_per_request']:.0f} / {keep['1']['extra_us_per_request']:.0f} µs "
        f"extra per request ({100 * new['1']['floor_share']:.0f} / "
        f"{100 * keep['1']['floor_share']:.0f} %); the guardian's longer certificate chain "
        f"{new['1']['chain_us']:.0f} µs; the rest is Python work around the round trips",
        f"HTTPS {new['1']['https_us_per_request']:,.0f} / {keep['1']['https_us_per_request']:,.0f} "
        "µs per request",
        f"slowdown at the floor {new['1']['slowdown_at_floor']:.2f}× / "
        f"{keep['1']['slowdown_at_floor']:.2f}×",
        "report", "measured"]]


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
        *_floor(d),
        ["WebALPS host's plain HTTP (`--http-port`) with its guardian frozen (SIGSTOP) vs running"
         + n_of(d), cmd("python benchmarks/bench_webalps_host.py", "webalps_host.json"),
         f"frozen {med(f['frozen']['rps']):,.0f} req/s; HTTPS requests completed while frozen: "
         f"{med(f['frozen']['https_completed']):.0f}", f"running {med(f['running']['rps']):,.0f} req/s",
         f"frozen / running {rng(ratio, '.3f')}", verdict("≈ 1", 0.9 <= med(ratio) <= 1.1), "measured"],
    ]
