"""The README's performance rows (``make benchmarks`` -> ``results/benchmarks/*.json``).

Split from ``summarize.py``, which renders them first in the ``performance`` table, in the
order they are defined here.
"""

from __future__ import annotations

import statistics

from .base import Row, Source, registrar

ROWS: list[Row] = []
row = registrar(ROWS)

# --------------------------------------------------------------------------------------------
# Performance rows (make benchmarks -> results/benchmarks/*.json)
# --------------------------------------------------------------------------------------------


@row("performance")
def _record(src: Source) -> list[str]:
    data = src.json("benchmarks/record.json")["rows"]
    ref = data[0]
    stitched = next(r for r in data if r["name"].startswith("C seal (") and "generic HMAC" not in r["name"])
    many = next(r for r in data if r["name"].startswith("C seal_many") and "generic)" not in r["name"])
    return [
        "record seal, 16 KiB AES-128-CBC-SHA, C (stitched EVP cipher)",
        "`python benchmarks/bench_record.py`",
        f"{stitched['mb_per_s']:.0f} MB/s (`seal_many`: {many['mb_per_s']:.0f})",
        f"`openssl speed -evp aes-128-cbc-hmac-sha1` {ref['mb_per_s']:.0f} MB/s",
        f"{stitched['ratio']:.2f} ({many['ratio']:.2f})",
        "≥ 0.7" + ("" if stitched["ratio"] >= 0.7 else " (not met in this run)"),
        "measured",
    ]


@row("performance")
def _record_py(src: Source) -> list[str]:
    data = src.json("benchmarks/record.json")["rows"]
    py = next(r for r in data if r["name"].startswith("Python"))
    return [
        "record seal, no C extension (`TLS12_PURE_PYTHON=1`: the Python twin, still OpenSSL via `cryptography`)",
        "same",
        f"{py['mb_per_s']:.0f} MB/s",
        "same",
        f"{py['ratio']:.2f}",
        "report",
        "measured",
    ]


@row("performance")
def _https(src: Source) -> list[str]:
    d = src.json("benchmarks/https.json")
    mb = d["mb_per_s_median"]
    cpu = {k: statistics.median(v) / (d["size_bytes"] / 1e9) for k, v in d["server_cpu_seconds"].items()}
    return [
        f"curl download of {d['size_bytes'] // 2**20} MiB, {d['suite']}, loopback",
        "`python benchmarks/bench_https.py`",
        f"{mb['tls12']:.0f} MB/s, {cpu['tls12']:.2f} server CPU s/GB",
        f"nginx (encrypt-then-MAC off, same record format) {mb['nginx']:.0f} MB/s, {cpu['nginx']:.2f} CPU s/GB",
        f"{d['ratio_median']:.2f} (CPU {d['server_cpu_ratio_median']:.2f})",
        "report",
        "measured",
    ]


@row("performance")
def _https_small(src: Source) -> list[str]:
    d = src.json("benchmarks/https_small.json")["median"]
    sizes = sorted(d, key=int)
    ours = [d[n]["tls12"] for n in sizes]
    ng = [d[n]["nginx"] for n in sizes]
    label = " / ".join(f"{int(n):,} B" for n in sizes)
    return [
        f"keep-alive GETs of a {label} file, Python ssl clients, head and body coalesced",
        "`python benchmarks/bench_https.py --small`",
        " / ".join(f"{r['requests_per_s']:,.0f}" for r in ours) + " req/s, "
        + " / ".join(f"{r['server_cpu_us_per_request']:.0f}" for r in ours) + " µs server CPU per request",
        "nginx " + " / ".join(f"{r['requests_per_s']:,.0f}" for r in ng) + " req/s, "
        + " / ".join(f"{r['server_cpu_us_per_request']:.0f}" for r in ng) + " µs",
        " / ".join(f"{r['rate_vs_nginx']:.2f}" for r in ours),
        "report",
        "measured",
    ]


@row("performance")
def _https_coalesce(src: Source) -> list[str]:
    d = src.json("benchmarks/https_small.json")["median"]
    sizes = sorted(d, key=int)
    return [
        "effect of coalescing: same, head in a record of its own (`--no-coalesce`, SSL splitting's layout)",
        "same",
        " / ".join(f"{d[n]['tls12-separate']['requests_per_s']:,.0f}" for n in sizes) + " req/s, "
        + " / ".join(f"{d[n]['tls12-separate']['records']} vs {d[n]['tls12']['records']}" for n in sizes)
        + " records per response",
        "coalesced (same run)",
        "coalesced is " + " / ".join(f"{d[n]['coalescing']['rate_ratio']:.2f}×" for n in sizes) + " req/s",
        "report",
        "measured",
    ]


@row("performance")
def _handshake(src: Source) -> list[str]:
    d = src.json("benchmarks/handshake.json")
    m, r = d["median"], d["ratio"]
    return [
        f"P3b: full {d['config']['key']} handshakes, {d['config']['suite']}",
        "`python benchmarks/bench_handshake.py`",
        f"{m['tls12_new']['per_cpu_s']:,.0f} per server CPU s ({m['tls12_new']['per_wall_s']:,.0f}/s wall)",
        f"`openssl s_server` {m['openssl_new']['per_cpu_s']:,.0f} per CPU s ({m['openssl_new']['per_wall_s']:,.0f}/s wall)",
        f"{r['new']['per_cpu_s']:.2f} (wall {r['new']['per_wall_s']:.2f})",
        "≥ 0.5" + ("" if r["new"]["per_cpu_s"] >= 0.5 else " (not met)"),
        "measured",
    ]


@row("performance")
def _handshake_resumed(src: Source) -> list[str]:
    d = src.json("benchmarks/handshake.json")
    m, r = d["median"], d["ratio"]
    return [
        "P3b: resumed (session-ID) handshakes",
        "same",
        f"{m['tls12_reuse']['per_cpu_s']:,.0f} per server CPU s ({m['tls12_reuse']['per_wall_s']:,.0f}/s wall)",
        f"`openssl s_server -no_ticket` {m['openssl_reuse']['per_cpu_s']:,.0f} per CPU s"
        f" ({m['openssl_reuse']['per_wall_s']:,.0f}/s wall)",
        f"{r['reuse']['per_cpu_s']:.2f} (wall {r['reuse']['per_wall_s']:.2f})",
        "≥ 0.5" + ("" if r["reuse"]["per_cpu_s"] >= 0.5 else " (not met: asyncio adapter cost per connection)"),
        "measured",
    ]


@row("performance")
def _splice_deployed(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = src.json("benchmarks/splice.json")
    ref, r = d["references_MBps"], d["rows"]
    warm, fill = r["deployed warm"], r["deployed verify-on-fill"]
    return [
        [
            "SSL-splitting proxy as deployed (own process; curl and origin in other processes), key-expose, warm memory cache",
            "`python benchmarks/bench_splice.py`",
            f"{warm['mb_per_cpu_s']:.0f} MB per proxy CPU s ({warm['cpu_s_per_gb']:.2f} CPU s/GB; {warm['wall_mb_per_s']:.0f} MB/s wall)",
            f"`openssl speed -evp aes-128-cbc` {ref['openssl_aes_128_cbc']:.0f} MB/s",
            f"{warm['x_aes']:.2f}",
            "report",
            "measured",
        ],
        [
            "same proxy, verify-on-fill (`--memory-mb 0`: every payload fetched from the origin's store, SHA-256 id checked)",
            "same",
            f"{fill['mb_per_cpu_s']:.0f} MB per CPU s ({fill['cpu_s_per_gb']:.1f} CPU s/GB)",
            f"AES-128-CBC + SHA-256 once per byte {ref['aes_plus_sha256']:.0f} MB/s",
            f"{fill['x_aes_sha']:.2f}",
            "report",
            "measured",
        ],
    ]


@row("performance")
def _splice_inprocess(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = src.json("benchmarks/splice.json")
    ref, r = d["references_MBps"], d["rows"]
    warm, read, fill = r["in-process warm"], r["in-process verify-on-read"], r["in-process verify-on-fill"]
    o = d["origin"]
    return [
        [
            "proxy splice in-process, warm memory cache (trusted on read, no hash)",
            "same",
            f"{warm['mb_per_cpu_s']:.0f} MB/s",
            f"`openssl speed -evp aes-128-cbc` {ref['openssl_aes_128_cbc']:.0f} MB/s",
            f"{warm['x_aes']:.2f}",
            "≥ 0.5" + ("" if warm["x_aes"] >= 0.5 else " (not met in this run)"),
            "measured",
        ],
        [
            "proxy splice in-process, verify on read / verify-on-fill (SHA-256 in the timed loop)",
            "same",
            f"{read['mb_per_cpu_s']:.0f} / {fill['mb_per_cpu_s']:.0f} MB/s",
            f"AES-128-CBC + SHA-256 {ref['aes_plus_sha256']:.0f} MB/s",
            f"{read['x_aes_sha']:.2f} / {fill['x_aes_sha']:.2f}",
            "report",
            "measured",
        ],
        [
            "splitting server CPU per warm 1 MiB download",
            "same",
            f"{o['split_cpu_ms_per_download']:.1f} ms",
            f"`tls12.https_server` {o['https_cpu_ms_per_download']:.1f} ms",
            f"{o['split_cpu_ms_per_download'] / o['https_cpu_ms_per_download']:.2f}",
            "report",
            "measured",
        ],
    ]


@row("performance")
def _sine(src: Source) -> list[str]:
    d = src.json("benchmarks/sine.json")
    v = {r["block_size"]: r for r in d["verify"]}
    return [
        "SINE verification, 16 KiB / 1 KiB blocks",
        "`python benchmarks/bench_sine.py`",
        f"{v[16384]['verify_MBps']:.0f} / {v[1024]['verify_MBps']:.0f} MB/s",
        f"hashlib SHA-256 {v[16384]['hashlib_MBps']:.0f} / {v[1024]['hashlib_MBps']:.0f} MB/s",
        f"{v[16384]['ratio']:.2f} / {v[1024]['ratio']:.2f}",
        "≥ 0.6 (16 KiB)" + ("" if v[16384]["ratio"] >= 0.6 else " (not met in this run)"),
        "measured",
    ]


@row("performance")
def _sine_sign(src: Source) -> list[str]:
    d = src.json("benchmarks/sine.json")
    s = {r["block_size"]: r for r in d["sign"]}
    mb = s[1024]["document_bytes"] / 1e6
    return [
        f"SINE tag generation, {mb:.0f} MB document, 1 KiB / 16 KiB blocks",
        "same",
        f"{s[1024]['sign_s']:.2f} s / {s[16384]['sign_s']:.2f} s",
        "hashlib SHA-256 over the same blocks",
        f"{s[1024]['ratio']:.2f} / {s[16384]['ratio']:.2f}",
        "report",
        "measured",
    ]


@row("performance")
def _traces(src: Source) -> list[str]:
    d = src.json("benchmarks/traces.json")
    return [
        "cost-model replay, real trace sample / synthetic trace",
        "`python benchmarks/bench_traces.py`",
        f"{d['replay_real_req_per_s'] / 1e6:.1f} M req/s ({d.get('replay_real_trace', 'largest bundled trace')},"
        f" {d.get('replay_real_requests', 0) / 1e3:,.0f} k requests) / {d['replay_synthetic_req_per_s'] / 1e6:.1f} M req/s"
        f" ({d['synthetic_requests'] / 1e6:,.0f} M requests)",
        "—",
        "—",
        "≥ 10^6 req/s",
        "measured",
    ]


@row("performance")
def _simpy(src: Source) -> list[str]:
    d = src.json("benchmarks/traces.json")
    return [
        "SimPy TCP-over-ADSL model",
        "same",
        f"{d['simpy_tcp_events_per_s'] / 1e3:.0f} k events/s",
        f"trivial SimPy model {d['simpy_trivial_events_per_s'] / 1e3:.0f} k events/s",
        f"{d['simpy_tcp_vs_trivial']:.2f}",
        "report",
        "measured",
    ]


@row("performance")
def _drive(src: Source) -> list[str]:
    d = src.json("benchmarks/drive.json")
    return [
        f"SimPy driver: HTTPS GET of {d['size']:,} B over ADSL with the real `tls12` objects "
        "(byte-accurate TCP, CPU charged per operation)",
        "`python benchmarks/bench_drive.py`",
        f"{d['driver_per_s']:,.0f} simulated connections per wall s",
        f"the same flights replayed as byte counts (the pre-driver models) "
        f"{d['size_only_per_s']:,.0f} per s; same latency without CPU: "
        + ("yes" if d["latency_agrees"] else "NO"),
        f"{d['ratio']:.3f}",
        "report",
        "measured",
    ]


@row("performance")
def _drive_split(src: Source) -> list[str]:
    d = src.json("benchmarks/drive.json")["split_cold"]
    return [
        "SimPy driver: cold SSL splitting (real splitting server, proxy `Splicer`, cache-miss fetches)",
        "same",
        f"{d['driver_per_s']:,.0f} simulated connections per wall s",
        f"the same flights as byte counts {d['size_only_per_s']:,.0f} per s",
        f"{d['ratio']:.3f}",
        "report",
        "measured",
    ]


@row("performance")
def _barnraising_sharing(src: Source) -> list[str]:
    d = src.json("benchmarks/barnraising.json")
    return [
        f"Barnraising cache sharing: 3 volunteers, a {d['sharing_file_bytes'] / 1e6:.0f} MB file "
        f"({d['sharing_records']} records) fetched through each; consistent-hashing ring lookup",
        "same",
        f"origin sent {d['origin_payloads_download_1']} payloads for the first download, "
        f"{d['origin_payloads_downloads_2_3']} for the next two; "
        f"{d['messages_per_lookup']:.2f} messages per peer lookup; ring owner lookup at 10^4 "
        f"volunteers {d['ring_owner_us_n10000']:.1f} µs",
        f"SHA-256 of one stub id {d['reference_sha256_us']:.2f} µs",
        "—",
        "O(1) or O(log n) messages per lookup (met: 1)",
        "measured",
    ]


@row("performance")
def _barnraising(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = src.json("benchmarks/barnraising.json")
    return [
        [
            "Barnraising broker: volunteer joins over loopback (JSON over HTTP/1.1, SQLite WAL commit per join)",
            "`python benchmarks/bench_barnraising.py`",
            f"{d['joins_per_s']:,.0f} joins/s",
            f"a trivial h11 server {d['reference_http_requests_per_s']:,.0f} requests/s",
            f"{d['joins_ratio_to_reference']:.2f}",
            "≥ 1,000 joins/s" + (" (met)" if d["joins_per_s"] >= 1000 else " (not met)"),
            "measured",
        ],
        [
            "Barnraising DNS responder: A answers over UDP, repeated / all-different queries",
            "same",
            f"{d['dns_answers_per_s']:,.0f} / {d['dns_answers_per_s_uncached']:,.0f} answers/s",
            f"a UDP echo server {d['reference_udp_echo_per_s']:,.0f} datagrams/s",
            f"{d['dns_ratio_to_reference']:.2f} / {d['dns_answers_per_s_uncached'] / d['reference_udp_echo_per_s']:.2f}",
            "≥ 5,000 answers/s" + (
                " (met)" if d["dns_answers_per_s_uncached"] >= 5000
                else " (met for repeated queries; all-different queries render every answer with dnspython)"),
            "measured",
        ],
    ]


@row("performance")
def _barnraising_model(src: Source) -> list[str]:
    runs = src.json("benchmarks/barnraising_model.json")
    runs = runs if isinstance(runs, list) else [runs]
    return [
        "Barnraising SimPy model: one trace day, 10^4 churning volunteers ("
        + " / ".join(f"{r['trace']}, {r['requests']:,} requests" for r in runs) + ")",
        "`python benchmarks/bench_barnraising_model.py`",
        " / ".join(f"{r['seconds']:.2f} s" for r in runs),
        "origin alone, same trace and process " + " / ".join(
            f"{r['reference_origin_alone_s']:.2f} s" for r in runs),
        " / ".join(f"{r['ratio_to_reference']:.1f}" for r in runs),
        "< 120 s" + (" (met)" if all(r["seconds"] < 120 for r in runs) else " (not met)"),
        "measured (wall time of the model)",
    ]


@row("performance")
def _rssl_sign(src: Source) -> list[str]:
    d = src.json("benchmarks/reverse_ssl.json")
    return [
        "Reverse SSL online signing (Lamport / Winternitz w=16)",
        "`python benchmarks/bench_reverse_ssl.py --throughput`",
        f"{d['lamport_sign_us']:.0f} µs / {d['winternitz16_sign_us']:.0f} µs",
        "—",
        "—",
        "\"a few µs\" (paper, in C)",
        "measured",
    ]


@row("performance")
def _rssl_online(src: Source) -> list[str]:
    d = src.json("benchmarks/reverse_ssl.json")
    original = d["private_decrypt_ms"] + d["public_verify_ms"]
    reverse = d["public_encrypt_ms"] + d["lamport_sign_us"] / 1e3
    return [
        "Reverse SSL online public-key cost at 2048 bits",
        "same",
        f"{reverse:.3f} ms",
        f"original handshake {original:.3f} ms",
        f"{d['online_cost_ratio']:.3f} ({1 / d['online_cost_ratio']:.1f}× faster; paper 34×)",
        "≤ 0.1" + ("" if d["online_cost_ratio"] <= 0.1 else " (not met in this run)"),
        "measured",
    ]


@row("performance")
def _rssl_hs(src: Source) -> list[str]:
    d = src.json("benchmarks/reverse_ssl.json")
    ms = d["handshake_server_ms"]
    cap = {r["mode"]: r["server_capacity_hs"] for r in d["throughput"]}
    return [
        "Reverse SSL whole-handshake server CPU / asyncio throughput, 2048 bits",
        "same",
        f"{ms['client_auth']:.3f} ms / {cap['client-auth']:.0f} hs per CPU s",
        f"original {ms['original']:.3f} ms / {cap['original']:.0f}",
        f"{d['handshake_ratio']:.2f} / {d['throughput_capacity_ratio']:.2f}",
        "report",
        "measured",
    ]
