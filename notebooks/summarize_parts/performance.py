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
    stream = next((r for r in data if r["name"].startswith("C seal_stream")), None)  # since multi-block
    if stream is None:
        return [
            "record seal, 16 KiB AES-128-CBC-SHA, C (stitched EVP cipher)" + n_of(d),
            cmd("python benchmarks/bench_record.py", "record.json"),
            f"{med(stitched['mb_per_s']):.0f} MB/s (`seal_many`: {med(many['mb_per_s']):.0f})",
            f"`openssl speed -evp aes-128-cbc-hmac-sha1` {med(ref['mb_per_s']):.0f} MB/s",
            f"{rng(stitched['ratio'])} ({rng(many['ratio'])})",
            verdict("≥ 1.0 (issue 24)", med(stitched["ratio"]) >= 1.0),
            "measured",
        ]
    mb = next((r for r in data if r["name"].startswith("openssl speed -mb")), None)
    return [
        "record seal, 16 KiB AES-128-CBC-SHA, C: `seal_stream` (OpenSSL's multi-block pass, 8 records"
        " at once, random IVs: `random_ivs=True`); one record at a time with k' IVs (`seal`, `seal_many`)"
        + n_of(d),
        cmd("python benchmarks/bench_record.py", "record.json"),
        f"{med(stream['mb_per_s']):.0f} MB/s (`seal` {med(stitched['mb_per_s']):.0f},"
        f" `seal_many` {med(many['mb_per_s']):.0f})",
        f"`openssl speed -evp aes-128-cbc-hmac-sha1` {med(ref['mb_per_s']):.0f} MB/s"
        + ("" if mb is None else f" (`-mb`, 8 × 16 KiB interleaved: {med(mb['mb_per_s']):.0f})"),
        f"{rng(stream['ratio'])} (`seal` {rng(stitched['ratio'])}, `seal_many` {rng(many['ratio'])})"
        + ("" if stream.get("ratio_mb") is None else f"; `seal_stream` vs `-mb` {rng(stream['ratio_mb'])}"),
        verdict("≥ 1.0, stretch 1.5 (issue 24)", med(stream["ratio"]) >= 1.0,
                " (not met)") + ("; stretch met" if med(stream["ratio"]) >= 1.5 else ""),
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
        f"{med(cpu['nginx']):.2f} CPU s/GB" + _pyssl_reference(d),
        f"{rng(d['ratio'])} (CPU {rng(d['server_cpu_ratio'])})" + _pyssl_ratio(d) + _multiblock_ratio(d),
        "≥ 1.0 vs Python ssl" + _pyssl_verdict(d) if "tls12/pyssl" in d.get("versus", {}) else "report",
        "measured",
    ]


def _multiblock_ratio(d: dict[str, Any]) -> str:
    """Ours with ``--random-ivs`` (OpenSSL's multi-block seal), when the file has it."""
    versus = d.get("versus", {})
    if "tls12-mb/pyssl" not in versus:
        return ""
    return (f"; with `--random-ivs` (multi-block seal) {med(d['mb_per_s']['tls12-mb']):.0f} MB/s,"
            f" vs Python `ssl` {rng(versus['tls12-mb/pyssl']['ratio'])}"
            f" (server CPU {rng(versus['tls12-mb/pyssl']['server_cpu_ratio'])}),"
            f" vs nginx {rng(versus['tls12-mb/nginx']['ratio'])}")


def _pyssl_verdict(d: dict[str, Any]) -> str:
    """Met by the default server, by ``--random-ivs`` only, or not at all (medians)."""
    if _pyssl_met(d):
        return " (met by the median)"
    versus = d.get("versus", {})
    if "tls12-mb/pyssl" in versus and med(versus["tls12-mb/pyssl"]["ratio"]) >= 1.0:
        return " (met by the median with `--random-ivs`; not with k' IVs)"
    return " (not met)"


def _pyssl_reference(d: dict[str, Any]) -> str:
    """The Python ``ssl`` asyncio server's figures, when the file has them."""
    if "pyssl" not in d["mb_per_s"]:
        return ""
    return f"; Python `ssl` asyncio server {med(d['mb_per_s']['pyssl']):.0f} MB/s"


def _pyssl_ratio(d: dict[str, Any]) -> str:
    versus = d.get("versus", {})
    out = f"; vs Python `ssl` {rng(versus['tls12/pyssl']['ratio'])}" if "tls12/pyssl" in versus else ""
    if "tls12-uvloop/nginx" in versus:
        out += f"; on uvloop vs nginx {rng(versus['tls12-uvloop/nginx']['ratio'])}"
    return out


def _pyssl_met(d: dict[str, Any]) -> bool:
    return med(d["versus"]["tls12/pyssl"]["ratio"]) >= 1.0


def _inverse(value: Any) -> dict[str, Any]:
    """A repeated ratio turned upside down, pair by pair (CPU per request -> requests per CPU s)."""
    reps = [1 / v for v in fig(value)["repeats"]]
    return {"median": sorted(reps)[len(reps) // 2] if len(reps) % 2 else
            (sorted(reps)[len(reps) // 2 - 1] + sorted(reps)[len(reps) // 2]) / 2,
            "min": min(reps), "max": max(reps), "n": len(reps), "repeats": reps}


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
        " / ".join(rng(r["rate_vs_nginx"]) for r in ours) + " req/s; per server CPU s "
        + " / ".join(rng(_inverse(r["cpu_vs_nginx"])) for r in ours) + _uvloop_small(by, sizes),
        verdict("≥ 0.5 per server CPU s (1 KiB)", med(_inverse(by["1024"]["tls12"]["cpu_vs_nginx"])) >= 0.5)
        if "1024" in by else "report",
        "measured",
    ]


def _uvloop_small(by: dict[str, Any], sizes: list[str]) -> str:
    """Ours on uvloop, per server CPU second vs nginx, when the file has it."""
    if not all("tls12-uvloop" in by[n] for n in sizes):
        return ""
    return "; on uvloop " + " / ".join(rng(_inverse(by[n]["tls12-uvloop"]["cpu_vs_nginx"])) for n in sizes)


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


def _handshake_where(d: dict[str, Any], mode: str) -> str:
    """On uvloop, and the server's CPU per handshake split into the core alone and the rest (µs)."""
    if "ratio_uvloop" not in d:
        return ""
    us = d["us_per_handshake"][mode]
    return (f"; on uvloop {rng(d['ratio_uvloop'][mode]['per_cpu_s'])}; per handshake {us['tls12']:.0f} µs ="
            f" core alone {us['core']:.0f} (in memory) + {us['rest_asyncio']:.0f} event loop, sockets, kernel"
            f" ({us['rest_uvloop']:.0f} on uvloop) vs `s_server` {us['openssl']:.0f} µs in all")


@row("performance")
def _handshake(src: Source) -> list[str]:
    d = load(src, "benchmarks/handshake.json")
    ours, ref, r = _handshake_row(d, "new")
    return [
        f"P3b: full {d['config']['key']} handshakes, {d['config']['suite']}" + n_of(d),
        cmd("python benchmarks/bench_handshake.py", "handshake.json"),
        f"{med(ours['per_cpu_s']):,.0f} per server CPU s ({med(ours['per_wall_s']):,.0f}/s wall)",
        f"`openssl s_server` {med(ref['per_cpu_s']):,.0f} per CPU s ({med(ref['per_wall_s']):,.0f}/s wall)",
        f"{rng(r['per_cpu_s'])} (wall {rng(r['per_wall_s'])})" + _handshake_where(d, "new"),
        verdict("≥ 1.0 (issue 24)", med(r["per_cpu_s"]) >= 1.0,
                " (not met: the core's per-handshake Python and the per-connection event loop,"
                " see docs/performance.md)"),
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
        f"{rng(r['per_cpu_s'])} (wall {rng(r['per_wall_s'])})" + _handshake_where(d, "reuse"),
        verdict("≥ 0.7 (issue 24)", med(r["per_cpu_s"]) >= 0.7,
                " (not met: the core alone costs about what `s_server` spends in all,"
                " see docs/performance.md)"),
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
            verdict("≥ 0.5 (issue 24)", med(warm["x_aes"]) >= 0.5),
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
def _sine(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/sine.json")
    v = {r["block_size"]: r for r in d["verify"]}
    big, small = v[16384], v[1024]
    twin = "python_twin" in small  # written since the C chain verifier (issue 24)
    runs = small.get("events") == "run"  # since coalesce=True: one event per run of records
    rows = [[
        "SINE verification, 16 KiB / 1 KiB blocks"
        + (" (`StreamVerifier(coalesce=True)`: runs of records in one call to the C chain"
           " verifier, one event per run)" if runs else
           " (`StreamVerifier`, runs of records in one call to the C chain verifier)" if twin else "")
        + n_of(d),
        cmd("python benchmarks/bench_sine.py", "sine.json"),
        f"{med(big['verify_MBps']):.0f} / {med(small['verify_MBps']):.0f} MB/s",
        f"hashlib SHA-256 {med(big['hashlib_MBps']):.0f} / {med(small['hashlib_MBps']):.0f} MB/s",
        f"{rng(big['ratio'])} / {rng(small['ratio'])}",
        verdict("≥ 0.6 (16 KiB)", med(big["ratio"]) >= 0.6)
        + ("; " + verdict("≥ 1.0 (1 KiB: one call per chain)", med(small["ratio"]) >= 1.0)
           if twin else ""),
        "measured",
    ]]
    if twin:
        paths = (("python_twin", "Python twin (`SINE_PURE_PYTHON=1`)"),
                 ("per_record", "record by record (before issue 24)"),
                 ("chain_run", "`sine.chaincrypto.verify_run` alone, no events"))
        if runs:
            paths = (("python_twin", "Python twin (`SINE_PURE_PYTHON=1`), an event a run"),
                     ("block_events", "C runs, an event a block (`coalesce=False`, the default)"),
                     ("per_record", "record by record, an event a block (before issue 24)"),
                     ("chain_run", "`sine.chaincrypto.verify_run_joined` alone (the floor)"))
        rows.append([
            "SINE verification paths, 16 KiB / 1 KiB blocks: " + "; ".join(w for _, w in paths)
            + n_of(d),
            cmd("python benchmarks/bench_sine.py", "sine.json"),
            "; ".join(f"{med(big[k]['verify_MBps']):.0f} / {med(small[k]['verify_MBps']):.0f} MB/s"
                      for k, _ in paths),
            "hashlib SHA-256, as above",
            "; ".join(f"{rng(big[k]['ratio'])} / {rng(small[k]['ratio'])}" for k, _ in paths),
            "report",
            "measured",
        ])
    return rows


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


#: Chain vs tree rows (issue 25): mode in ``chain_vs_tree`` of ``sine.json`` -> what the row says.
CHAIN_VS_TREE = {
    "sine-inline": "SINE chain (`Content-Encoding: sine` body, `StreamVerifier`)",
    "mice": "MICE chain (`mi-sha256-03`, head signed per RFC 9421, `MiceDecoder`)",
    "tree-sha256": "tree, SHA-256 (combined stream, `TreeVerifier`; a 1 MiB range, `SliceVerifier`)",
    "tree-blake3": "tree, BLAKE3 (combined stream; a 1 MiB range)",
}


@row("performance")
def _sine_chain_vs_tree(src: Source) -> list[list[str]]:  # type: ignore[override]
    d = load(src, "benchmarks/sine.json")
    rows = need(d, "chain_vs_tree", "benchmarks/sine.json", "python benchmarks/bench_sine.py")
    by = {(r["mode"], r["kind"], r["group_size"]): r for r in rows}
    sizes = sorted({r["group_size"] for r in rows})
    kib = " / ".join(str(g // 1024) for g in sizes) + " KiB"
    mb = rows[0]["bytes"] / 2**20
    out = []
    for mode, what in CHAIN_VS_TREE.items():
        if mode == "sine-inline" and d["verify"][0].get("events") == "run":  # same run's flag
            what = what.replace("`StreamVerifier`", "`StreamVerifier(coalesce=True)`")
        stream = [by[(mode, "stream", g)] for g in sizes]
        slices = [by[(mode, "slice", g)] for g in sizes if (mode, "slice", g) in by]
        result = " / ".join(f"{med(r['verify_ms_per_MB']):.2f}" for r in stream) + " ms CPU per MB"
        ref = " / ".join(f"{med(r['plain_ms_per_MB']):.2f}" for r in stream)
        ratio = " / ".join(rng(r["ratio"]) for r in stream)
        if slices:
            result += "; range " + " / ".join(f"{med(r['verify_ms_per_MB']):.2f}" for r in slices)
            ratio += "; range " + " / ".join(rng(r["ratio"]) for r in slices)
        out.append([
            f"verification CPU, {what}, {kib} {'chunk groups' if slices else 'records'}, "
            f"{mb:.0f} MiB document (plain hash time / "
            "verify time)" + n_of(d),
            cmd("python benchmarks/bench_sine.py", "sine.json"),
            result,
            f"{stream[0]['plain_hash']} of the same bytes in blocks of the same size {ref} ms/MB",
            ratio,
            "report",
            "measured (process CPU time)",
        ])
    return out
