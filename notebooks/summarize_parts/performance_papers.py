"""The performance table's rows for the papers' systems and models (the rows after SINE's):
trace replay, the SimPy models and the driver, Barnraising, Reverse SSL, SSLACC, WebALPS and
the Dask sweeps. The helpers and the rows before these are in :mod:`.performance`; this module
is imported right after it, so the table keeps its order."""

from __future__ import annotations

from .base import Source
from .performance import cmd, fig, load, med, n_of, need, rng, row, verdict


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
    rel, how = "benchmarks/drive.json", "python benchmarks/bench_drive.py --json docs/results/benchmarks/drive.json"
    d = load(src, rel)
    ceiling = need(d, "ceiling_per_s", rel, how)
    return [
        f"SimPy driver: HTTPS GET of {d['size']:,} B over ADSL with the real `tls12` objects "
        "(byte-accurate TCP, CPU charged per operation)" + n_of(d),
        cmd("python benchmarks/bench_drive.py", "drive.json"),
        f"{med(d['driver_per_s']):,.0f} simulated connections per wall s",
        f"the same flights replayed as byte counts (the pre-driver models) "
        f"{med(d['size_only_per_s']):,.0f} per s; same latency without CPU: "
        + ("yes" if d["latency_agrees"] else "NO")
        + f"; ceiling, the same `tls12` objects in memory (no SimPy, no TCP) {med(ceiling):,.0f} per s, "
        f"driver / ceiling {rng(need(d, 'driver_vs_ceiling', rel, how), '.3f')}",
        rng(d["ratio"], ".3f"),
        verdict("≥ 0.5 (issue 24)", med(d["ratio"]) >= 0.5,
                " (not met: the real `tls12` handshake and GET alone, in memory, reach only "
                f"{rng(need(d, 'ceiling_vs_size_only', rel, how), '.3f')} of the byte-count replay)"),
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
