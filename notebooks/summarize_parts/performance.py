"""The README's performance rows (``make benchmarks`` -> ``results/benchmarks/*.json``).

Split from ``summarize.py``, which renders them first in the ``performance`` table, in the
order they are defined here.

Every benchmark measures each figure ``--repeats`` times, candidate and reference interleaved,
and writes it as ``{"median", "min", "max", "n", "repeats"}`` (``benchmarks/_common.py``).
A row shows each ratio as ``median (min–max)``, each result and reference by its median,
says n, and calls a target "met" only when the median meets it.  A result file without
repeats (a single run, or fewer than :data:`MIN_REPEATS`) is refused with
:class:`NotRepeated` instead of being shown as if it were as good.
"""

from __future__ import annotations

from typing import Any

from .base import MissingResult, Row, Source, registrar

ROWS: list[Row] = []
row = registrar(ROWS)

MIN_REPEATS = 5
"""Interleaved repeats a benchmark file needs before the README quotes it."""


class NotRepeated(MissingResult):
    """A benchmark file (or a figure in it) is a single run, not the median of repeats."""


def load(src: Source, rel: str) -> dict[str, Any]:
    """The benchmark file ``rel``; :class:`NotRepeated` unless it says ``"repeats": n >= 5``."""
    data = src.json(rel)
    n = data.get("repeats") if isinstance(data, dict) else None
    if isinstance(n, bool) or not isinstance(n, int):
        raise NotRepeated(f"{rel} has no \"repeats\" field: it is a single run; rerun its benchmark "
                          f"(make benchmarks) so that every figure is the median of >= {MIN_REPEATS} repeats")
    if n < MIN_REPEATS:
        raise NotRepeated(f"{rel} was run with --repeats {n}; the README needs >= {MIN_REPEATS}")
    return data


def fig(value: Any, what: str = "figure") -> dict[str, Any]:
    """``value`` checked to be a repeated figure (median, min, max, n, repeats)."""
    if not isinstance(value, dict) or not {"median", "min", "max", "n", "repeats"} <= value.keys():
        raise NotRepeated(f"{what} is a single number ({value!r}), not the median of repeats; "
                          "rerun its benchmark (make benchmarks)")
    if value["n"] < MIN_REPEATS or len(value["repeats"]) != value["n"]:
        raise NotRepeated(f"{what} has {len(value['repeats'])} repeats; the README needs >= {MIN_REPEATS}")
    return value


def med(value: Any, what: str = "figure") -> float:
    """The median of a repeated figure."""
    return float(fig(value, what)["median"])


def rng(value: Any, spec: str = ".2f", what: str = "ratio") -> str:
    """``median (min–max)`` of a repeated figure, each formatted with ``spec``."""
    v = fig(value, what)
    return f"{v['median']:{spec}} ({v['min']:{spec}}–{v['max']:{spec}})"


def need(data: dict[str, Any], key: str, rel: str, how: str) -> Any:
    """``data[key]``, or :class:`MissingResult` saying which run writes it (``how``)."""
    if key not in data:
        raise MissingResult(f"{rel} has no {key!r}: run `{how}` (as make benchmarks does)")
    return data[key]


def cmd(command: str, name: str) -> str:
    """The command cell: the command and the results file the row reads."""
    return f"`{command}` → `docs/results/benchmarks/{name}`"


def n_of(data: dict[str, Any]) -> str:
    return f"; median of n = {data['repeats']} interleaved repeats"


def verdict(target: str, met: bool, unmet: str = " (not met)") -> str:
    """A target cell: "met" only when the median meets it."""
    return target + (" (met by the median)" if met else unmet)


# --------------------------------------------------------------------------------------------
# Performance rows (make benchmarks -> results/benchmarks/*.json)
# --------------------------------------------------------------------------------------------


@row("performance")
def _record(src: Source) -> list[str]:
    d = load(src, "benchmarks/record.json")
    data = d["rows"]
    ref = data[0]
    stitched = next(r for r in data if r["name"].startswith("C seal (") and "generic HMAC" not in r["name"])
    many = next(r for r in data if r["name"].startswith("C seal_many") and "generic)" not in r["name"])
    return [
        "record seal, 16 KiB AES-128-CBC-SHA, C (stitched EVP cipher)" + n_of(d),
        cmd("python benchmarks/bench_record.py", "record.json"),
        f"{med(stitched['mb_per_s']):.0f} MB/s (`seal_many`: {med(many['mb_per_s']):.0f})",
        f"`openssl speed -evp aes-128-cbc-hmac-sha1` {med(ref['mb_per_s']):.0f} MB/s",
        f"{rng(stitched['ratio'])} ({rng(many['ratio'])})",
        verdict("≥ 0.7", med(stitched["ratio"]) >= 0.7),
        "measured",
    ]


@row("performance")
def _record_py(src: Source) -> list[str]:
    d = load(src, "benchmarks/record.json")
    py = next(r for r in d["rows"] if r["name"].startswith("Python"))
    return [
        "record seal, no C extension (`TLS12_PURE_PYTHON=1`: the Python twin, still OpenSSL via `cryptography`)"
        + n_of(d),
        cmd("python benchmarks/bench_record.py", "record.json"),
        f"{med(py['mb_per_s']):.0f} MB/s",
        "same",
        rng(py["ratio"]),
        "report",
        "measured",
    ]


@row("performance")
def _https(src: Source) -> list[str]:
    d = load(src, "benchmarks/https.json")
    mb, cpu = d["mb_per_s"], d["server_cpu_s_per_gb"]
    if cpu is None:
        raise MissingResult("benchmarks/https.json has no server CPU figures (/proc was unreadable)")
    return [
        f"curl download of {d['size_bytes'] // 2**20} MiB, {d['suite']}, loopback" + n_of(d),
        cmd("python benchmarks/bench_https.py", "https.json"),
        f"{med(mb['tls12']):.0f} MB/s, {med(cpu['tls12']):.2f} server CPU s/GB",
        f"nginx (encrypt-then-MAC off, same record format) {med(mb['nginx']):.0f} MB/s, "
        f"{med(cpu['nginx']):.2f} CPU s/GB",
        f"{rng(d['ratio'])} (CPU {rng(d['server_cpu_ratio'])})",
        "report",
        "measured",
    ]


@row("performance")
def _https_small(src: Source) -> list[str]:
    d = load(src, "benchmarks/https_small.json")
    by = d["by_size"]
    sizes = sorted(by, key=int)
    ours = [by[n]["tls12"] for n in sizes]
    ng = [by[n]["nginx"] for n in sizes]
    label = " / ".join(f"{int(n):,} B" for n in sizes)
    return [
        f"keep-alive GETs of a {label} file, Python ssl clients, head and body coalesced" + n_of(d),
        cmd("python benchmarks/bench_https.py --small", "https_small.json"),
        " / ".join(f"{med(r['requests_per_s']):,.0f}" for r in ours) + " req/s, "
        + " / ".join(f"{med(r['server_cpu_us_per_request']):.0f}" for r in ours) + " µs server CPU per request",
        "nginx " + " / ".join(f"{med(r['requests_per_s']):,.0f}" for r in ng) + " req/s, "
        + " / ".join(f"{med(r['server_cpu_us_per_request']):.0f}" for r in ng) + " µs",
        " / ".join(rng(r["rate_vs_nginx"]) for r in ours),
        "report",
        "measured",
    ]


@row("performance")
def _https_coalesce(src: Source) -> list[str]:
    d = load(src, "benchmarks/https_small.json")
    by = d["by_size"]
    sizes = sorted(by, key=int)
    return [
        "effect of coalescing: same, head in a record of its own (`--no-coalesce`, SSL splitting's layout)"
        + n_of(d),
        cmd("python benchmarks/bench_https.py --small", "https_small.json"),
        " / ".join(f"{med(by[n]['tls12-separate']['requests_per_s']):,.0f}" for n in sizes) + " req/s, "
        + " / ".join(f"{by[n]['tls12-separate']['records']} vs {by[n]['tls12']['records']}" for n in sizes)
        + " records per response",
        "coalesced (same run)",
        "coalesced is " + " / ".join(f"{rng(by[n]['coalescing']['rate_ratio'])}×" for n in sizes) + " req/s",
        "report",
        "measured",
    ]


def _handshake_row(d: dict[str, Any], mode: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    f = d["figures"]
    return f[f"tls12_{mode}"], f[f"openssl_{mode}"], d["ratio"][mode]


@row("performance")
def _handshake(src: Source) -> list[str]:
    d = load(src, "benchmarks/handshake.json")
    ours, ref, r = _handshake_row(d, "new")
    return [
        f"P3b: full {d['config']['key']} handshakes, {d['config']['suite']}" + n_of(d),
        cmd("python benchmarks/bench_handshake.py", "handshake.json"),
        f"{med(ours['per_cpu_s']):,.0f} per server CPU s ({med(ours['per_wall_s']):,.0f}/s wall)",
        f"`openssl s_server` {med(ref['per_cpu_s']):,.0f} per CPU s ({med(ref['per_wall_s']):,.0f}/s wall)",
        f"{rng(r['per_cpu_s'])} (wall {rng(r['per_wall_s'])})",
        verdict("≥ 0.5", med(r["per_cpu_s"]) >= 0.5),
        "measured",
    ]


@row("performance")
def _handshake_resumed(src: Source) -> list[str]:
    d = load(src, "benchmarks/handshake.json")
    ours, ref, r = _handshake_row(d, "reuse")
    return [
        "P3b: resumed (session-ID) handshakes" + n_of(d),
        cmd("python benchmarks/bench_handshake.py", "handshake.json"),
        f"{med(ours['per_cpu_s']):,.0f} per server CPU s ({med(ours['per_wall_s']):,.0f}/s wall)",
        f"`openssl s_server -no_ticket` {med(ref['per_cpu_s']):,.0f} per CPU s"
        f" ({med(ref['per_wall_s']):,.0f}/s wall)",
        f"{rng(r['per_cpu_s'])} (wall {rng(r['per_wall_s'])})",
        verdict("≥ 0.5", med(r["per_cpu_s"]) >= 0.5, " (not met: asyncio adapter cost per connection)"),
        "measured",
    ]


@row("performance")
def _splice_deployed(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/splice.json")
    ref, r = d["references_MBps"], d["rows"]
    warm, fill = r["deployed warm"], r["deployed verify-on-fill"]
    return [
        [
            "SSL-splitting proxy as deployed (own process; curl and origin in other processes), key-expose, "
            "warm memory cache" + n_of(d),
            cmd("python benchmarks/bench_splice.py", "splice.json"),
            f"{med(warm['mb_per_cpu_s']):.0f} MB per proxy CPU s ({med(warm['cpu_s_per_gb']):.2f} CPU s/GB; "
            f"{med(warm['wall_mb_per_s']):.0f} MB/s wall)",
            f"`openssl speed -evp aes-128-cbc` {med(ref['openssl_aes_128_cbc']):.0f} MB/s",
            rng(warm["x_aes"]),
            "report",
            "measured",
        ],
        [
            "same proxy, verify-on-fill (`--memory-mb 0`: every payload fetched from the origin's store, "
            "SHA-256 id checked)" + n_of(d),
            cmd("python benchmarks/bench_splice.py", "splice.json"),
            f"{med(fill['mb_per_cpu_s']):.0f} MB per CPU s ({med(fill['cpu_s_per_gb']):.1f} CPU s/GB)",
            f"AES-128-CBC + SHA-256 once per byte {med(ref['aes_plus_sha256']):.0f} MB/s",
            rng(fill["x_aes_sha"]),
            "report",
            "measured",
        ],
    ]


@row("performance")
def _splice_inprocess(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/splice.json")
    ref, r = d["references_MBps"], d["rows"]
    warm, read, fill = r["in-process warm"], r["in-process verify-on-read"], r["in-process verify-on-fill"]
    o = d["origin"]
    return [
        [
            "proxy splice in-process, warm memory cache (trusted on read, no hash)" + n_of(d),
            cmd("python benchmarks/bench_splice.py", "splice.json"),
            f"{med(warm['mb_per_cpu_s']):.0f} MB/s",
            f"`openssl speed -evp aes-128-cbc` {med(ref['openssl_aes_128_cbc']):.0f} MB/s",
            rng(warm["x_aes"]),
            verdict("≥ 0.5", med(warm["x_aes"]) >= 0.5),
            "measured",
        ],
        [
            "proxy splice in-process, verify on read / verify-on-fill (SHA-256 in the timed loop)" + n_of(d),
            cmd("python benchmarks/bench_splice.py", "splice.json"),
            f"{med(read['mb_per_cpu_s']):.0f} / {med(fill['mb_per_cpu_s']):.0f} MB/s",
            f"AES-128-CBC + SHA-256 {med(ref['aes_plus_sha256']):.0f} MB/s",
            f"{rng(read['x_aes_sha'])} / {rng(fill['x_aes_sha'])}",
            "report",
            "measured",
        ],
        [
            "splitting server CPU per warm 1 MiB download" + n_of(d),
            cmd("python benchmarks/bench_splice.py", "splice.json"),
            f"{med(o['split_cpu_ms_per_download']):.1f} ms",
            f"`testbed.https_server` {med(o['https_cpu_ms_per_download']):.1f} ms",
            rng(o["ratio"]),
            "report",
            "measured",
        ],
    ]


@row("performance")
def _sine(src: Source) -> list[str]:
    d = load(src, "benchmarks/sine.json")
    v = {r["block_size"]: r for r in d["verify"]}
    return [
        "SINE verification, 16 KiB / 1 KiB blocks" + n_of(d),
        cmd("python benchmarks/bench_sine.py", "sine.json"),
        f"{med(v[16384]['verify_MBps']):.0f} / {med(v[1024]['verify_MBps']):.0f} MB/s",
        f"hashlib SHA-256 {med(v[16384]['hashlib_MBps']):.0f} / {med(v[1024]['hashlib_MBps']):.0f} MB/s",
        f"{rng(v[16384]['ratio'])} / {rng(v[1024]['ratio'])}",
        verdict("≥ 0.6 (16 KiB)", med(v[16384]["ratio"]) >= 0.6),
        "measured",
    ]


@row("performance")
def _sine_sign(src: Source) -> list[str]:
    d = load(src, "benchmarks/sine.json")
    s = {r["block_size"]: r for r in d["sign"]}
    mb = s[1024]["document_bytes"] / 1e6
    return [
        f"SINE tag generation, {mb:.0f} MB document, 1 KiB / 16 KiB blocks" + n_of(d),
        cmd("python benchmarks/bench_sine.py", "sine.json"),
        f"{med(s[1024]['sign_s']):.2f} s / {med(s[16384]['sign_s']):.2f} s",
        "hashlib SHA-256 over the same blocks",
        f"{rng(s[1024]['ratio'])} / {rng(s[16384]['ratio'])}",
        "report",
        "measured",
    ]


@row("performance")
def _traces(src: Source) -> list[str]:
    d = load(src, "benchmarks/traces.json")
    real, synthetic = d["replay_real_req_per_s"], d["replay_synthetic_req_per_s"]
    met = med(real) >= 1e6 and med(synthetic) >= 1e6
    return [
        "cost-model replay, real trace sample / synthetic trace" + n_of(d),
        cmd("python benchmarks/bench_traces.py", "traces.json"),
        f"{med(real) / 1e6:.1f} M req/s ({d['replay_real_trace']},"
        f" {d['replay_real_requests'] / 1e3:,.0f} k requests; min–max {fig(real)['min'] / 1e6:.1f}–"
        f"{fig(real)['max'] / 1e6:.1f}) / {med(synthetic) / 1e6:.1f} M req/s ({d['synthetic_requests'] / 1e6:,.0f} M "
        f"requests; {fig(synthetic)['min'] / 1e6:.1f}–{fig(synthetic)['max'] / 1e6:.1f})",
        "—",
        "—",
        verdict("≥ 10^6 req/s", met),
        "measured",
    ]


@row("performance")
def _simpy(src: Source) -> list[str]:
    d = load(src, "benchmarks/traces.json")
    return [
        "SimPy TCP-over-ADSL model" + n_of(d),
        cmd("python benchmarks/bench_traces.py", "traces.json"),
        f"{med(d['simpy_tcp_events_per_s']) / 1e3:.0f} k events/s",
        f"trivial SimPy model {med(d['simpy_trivial_events_per_s']) / 1e3:.0f} k events/s",
        rng(d["simpy_tcp_vs_trivial"]),
        "report",
        "measured",
    ]


@row("performance")
def _drive(src: Source) -> list[str]:
    d = load(src, "benchmarks/drive.json")
    return [
        f"SimPy driver: HTTPS GET of {d['size']:,} B over ADSL with the real `tls12` objects "
        "(byte-accurate TCP, CPU charged per operation)" + n_of(d),
        cmd("python benchmarks/bench_drive.py", "drive.json"),
        f"{med(d['driver_per_s']):,.0f} simulated connections per wall s",
        f"the same flights replayed as byte counts (the pre-driver models) "
        f"{med(d['size_only_per_s']):,.0f} per s; same latency without CPU: "
        + ("yes" if d["latency_agrees"] else "NO"),
        rng(d["ratio"], ".3f"),
        "report",
        "measured",
    ]


@row("performance")
def _drive_split(src: Source) -> list[str]:
    top = load(src, "benchmarks/drive.json")
    d = top["split_cold"]
    return [
        "SimPy driver: cold SSL splitting (real splitting server, proxy `Splicer`, cache-miss fetches)" + n_of(top),
        cmd("python benchmarks/bench_drive.py", "drive.json"),
        f"{med(d['driver_per_s']):,.0f} simulated connections per wall s",
        f"the same flights as byte counts {med(d['size_only_per_s']):,.0f} per s",
        rng(d["ratio"], ".3f"),
        "report",
        "measured",
    ]


@row("performance")
def _barnraising_sharing(src: Source) -> list[str]:
    d = load(src, "benchmarks/barnraising.json")
    return [
        f"Barnraising cache sharing: 3 volunteers, a {d['sharing_file_bytes']:,} B file "
        f"({d['sharing_records']} records) fetched through each; consistent-hashing ring lookup" + n_of(d),
        cmd("python benchmarks/bench_barnraising.py", "barnraising.json"),  # not bench_drive (the row above)
        f"origin sent {d['origin_payloads_download_1']} payloads for the first download, "
        f"{d['origin_payloads_downloads_2_3']} for the next two; "
        f"{d['messages_per_lookup']:.2f} messages per peer lookup (counted); ring owner lookup at 10^4 "
        f"volunteers {rng(d['ring_owner_us_n10000'], '.1f')} µs",
        f"SHA-256 of one stub id {med(d['reference_sha256_us']):.2f} µs",
        "—",
        "O(1) or O(log n) messages per lookup (met: 1)",
        "measured",
    ]


@row("performance")
def _barnraising(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/barnraising.json")
    return [
        [
            "Barnraising broker: volunteer joins over loopback (JSON over HTTP/1.1, SQLite WAL commit per join)"
            + n_of(d),
            cmd("python benchmarks/bench_barnraising.py", "barnraising.json"),
            f"{med(d['joins_per_s']):,.0f} joins/s",
            f"a trivial h11 server {med(d['reference_http_requests_per_s']):,.0f} requests/s",
            rng(d["joins_ratio_to_reference"]),
            verdict("≥ 1,000 joins/s", med(d["joins_per_s"]) >= 1000),
            "measured",
        ],
        [
            "Barnraising DNS responder: A answers over UDP, repeated / all-different queries" + n_of(d),
            cmd("python benchmarks/bench_barnraising.py", "barnraising.json"),
            f"{med(d['dns_answers_per_s']):,.0f} / {med(d['dns_answers_per_s_uncached']):,.0f} answers/s",
            f"a UDP echo server {med(d['reference_udp_echo_per_s']):,.0f} datagrams/s",
            f"{rng(d['dns_ratio_to_reference'])} / {rng(d['dns_uncached_ratio_to_reference'])}",
            "≥ 5,000 answers/s" + (
                " (met by the median)" if med(d["dns_answers_per_s_uncached"]) >= 5000
                else " (met by the median for repeated queries; all-different queries render every answer "
                     "with dnspython)" if med(d["dns_answers_per_s"]) >= 5000 else " (not met)"),
            "measured",
        ],
    ]


@row("performance")
def _barnraising_model(src: Source) -> list[str]:
    d = load(src, "benchmarks/barnraising_model.json")
    runs = d["days"]
    return [
        "Barnraising SimPy model: one trace day, 10^4 churning volunteers ("
        + " / ".join(f"{r['trace']}, {r['requests']:,} requests" for r in runs) + ")" + n_of(d),
        cmd("python benchmarks/bench_barnraising_model.py", "barnraising_model.json"),
        " / ".join(f"{med(r['seconds']):.2f} s" for r in runs),
        "origin alone, same trace and process " + " / ".join(
            f"{med(r['reference_origin_alone_s']):.2f} s" for r in runs),
        " / ".join(rng(r["ratio_to_reference"], ".1f") for r in runs),
        verdict("< 120 s", all(med(r["seconds"]) < 120 for r in runs)),
        "measured (wall time of the model)",
    ]


@row("performance")
def _rssl_sign(src: Source) -> list[str]:
    d = load(src, "benchmarks/reverse_ssl.json")
    return [
        "Reverse SSL online signing (Lamport / Winternitz w=16)" + n_of(d),
        cmd("python benchmarks/bench_reverse_ssl.py --throughput", "reverse_ssl.json"),
        f"{rng(d['lamport_sign_us'], '.0f')} µs / {rng(d['winternitz16_sign_us'], '.0f')} µs",
        "—",
        "—",
        "\"a few µs\" (paper, in C)",
        "measured",
    ]


@row("performance")
def _rssl_online(src: Source) -> list[str]:
    d = load(src, "benchmarks/reverse_ssl.json")
    ratio = d["online_cost_ratio"]
    return [
        "Reverse SSL online public-key cost at 2048 bits" + n_of(d),
        cmd("python benchmarks/bench_reverse_ssl.py --throughput", "reverse_ssl.json"),
        f"{med(d['reverse_online_ms']):.3f} ms",
        f"original handshake {med(d['original_online_ms']):.3f} ms",
        f"{rng(ratio, '.3f')} ({1 / med(ratio):.1f}× faster; paper 34×)",
        verdict("≤ 0.1", med(ratio) <= 0.1),
        "measured",
    ]


@row("performance")
def _rssl_hs(src: Source) -> list[str]:
    d = load(src, "benchmarks/reverse_ssl.json")
    ms = d["handshake_server_ms"]
    cap = need(d, "throughput_hs_per_cpu_s", "benchmarks/reverse_ssl.json",
               "python benchmarks/bench_reverse_ssl.py --throughput")
    return [
        "Reverse SSL whole-handshake server CPU / asyncio throughput, 2048 bits" + n_of(d),
        cmd("python benchmarks/bench_reverse_ssl.py --throughput", "reverse_ssl.json"),
        f"{med(ms['client_auth']):.3f} ms / {med(cap['client-auth']):.0f} hs per CPU s",
        f"original {med(ms['original']):.3f} ms / {med(cap['original']):.0f}",
        f"{rng(d['handshake_ratio'])} / {rng(d['throughput_capacity_ratio'])}",
        "report",
        "measured",
    ]


# --------------------------------------------------------------------------------------------
# Rows that used to live in systems.py (SSLACC, WebALPS, Dask sweeps): they read benchmark files,
# so they are rendered here with the same repeats rules; systems.py must no longer define them.
# --------------------------------------------------------------------------------------------


@row("performance")
def _sslacc_sweep(src: Source) -> list[str]:
    d = load(src, "benchmarks/sslacc.json")
    need(d, "dask_1_worker_s", "benchmarks/sslacc.json", "python benchmarks/bench_sslacc.py (without --no-dask)")
    return [
        f"SSLACC Fig. 28/29 sweep, quick ({d['points']} points: 7 sizes × 2 cards × 3 variants)" + n_of(d),
        cmd("python benchmarks/bench_sslacc.py", "sslacc.json"),
        f"{med(d['in_process_s']):.1f} s in process ({med(d['connections_per_wall_s']):.0f} simulated "
        f"connections per wall s); Dask 1 / 2 workers {med(d['dask_1_worker_s']):.1f} / "
        f"{med(d['dask_2_workers_s']):.1f} s",
        "1 Dask worker, same run",
        f"speedup 2 vs 1 worker {rng(d['speedup_2_vs_1'])}",
        verdict("< 60 s", med(d["in_process_s"]) < 60),
        "measured (wall time of the model)",
    ]


@row("performance")
def _sslacc_failover(src: Source) -> list[str]:
    d = load(src, "benchmarks/sslacc_failover.json")
    med_rows = [m for m in d["medians"] if m["variant"] == "rebase"] or d["medians"]
    rep = [m["repeated"] for m in med_rows]
    return [
        "SSLACC real failover: curl downloads 16 MiB (AES128-SHA), node A cut and killed, node B "
        "restores TCP (`TCP_REPAIR`) and TLS state; at " + " / ".join(m["point"] for m in med_rows) + n_of(d),
        cmd("python benchmarks/bench_sslacc_failover.py", "sslacc_failover.json"),
        "cut to the client's next new byte " + " / ".join(
            f"{med(r['next_new_byte_s']):.3f}" for r in rep) + " s (B's restore " + " / ".join(
            "—" if r["restored_s"] is None else f"{med(r['restored_s']):.3f}" for r in rep) + " s)",
        f"the same download without a failure {med(d['reference']):.2f} s",
        " / ".join(rng(r["slowdown"]) for r in rep) + " (download time)",
        "report",
        "measured",
    ]


@row("performance")
def _webalps(src: Source) -> list[str]:
    d = load(src, "benchmarks/webalps.json")
    https, native = d["HTTPS"], d["WebALPS-native"]
    slowdown = d["slowdown_https_to_webalps"]
    return [
        "WebALPS at native speed (cost model off): 2 KB requests, one closed-loop client, a new "
        "TLS connection per request" + n_of(d),
        cmd("python benchmarks/bench_webalps.py", "webalps.json"),
        f"{med(native['rps']):,.0f} req/s; guardian {med(d['guardian_ms_per_handshake']):.2f} ms per "
        f"handshake, {med(d['guardian_ms_per_record_round_trip']):.3f} ms per record round trip",
        f"the same host as plain HTTPS {med(https['rps']):,.0f} req/s",
        f"slowdown {rng(slowdown)}×",
        verdict(f"≤ {d['target']:g}×", med(slowdown) <= d["target"]),
        "measured",
    ]


@row("performance")
def _dask_sweeps(src: Source) -> list[list[str]]:  # type: ignore[override]
    tw = load(src, "benchmarks/sweep.json")
    br = load(src, "benchmarks/barnraising_sweep.json")
    return [[
        f"Dask: trace replay by day ({tw['chunks']} chunks of a {tw['days']:.0f}-day trace)" + n_of(tw),
        cmd("python benchmarks/bench_sweep.py", "sweep.json"),
        f"1 / 2 workers {med(tw['dask_1_worker_s']):.1f} / {med(tw['dask_2_workers_s']):.1f} s",
        f"in process {med(tw['in_process_s']):.1f} s",
        f"speedup 2 vs 1 worker {rng(tw['speedup_2_vs_1'])}",
        "report",
        "measured (tables equal to the serial run)",
    ], [
        f"Dask: Barnraising volunteer-count sweep ({br['sweep_points']} points)" + n_of(br),
        cmd("python benchmarks/bench_barnraising_model.py --sweep", "barnraising_sweep.json"),
        f"1 / 2 workers {med(br['sweep_1_worker_s']):.1f} / {med(br['sweep_2_workers_s']):.1f} s "
        f"(running cluster {med(br['sweep_1_worker_running_cluster_s']):.1f} / "
        f"{med(br['sweep_2_workers_running_cluster_s']):.1f} s)",
        f"in process {med(br['sweep_serial_s']):.1f} s",
        f"speedup 2 vs 1 worker {rng(br['sweep_speedup_1_to_2_workers'])} "
        f"({rng(br['sweep_speedup_1_to_2_workers_running_cluster'])} on a running cluster)",
        "report",
        "measured (tables equal to the serial run)",
    ]]
