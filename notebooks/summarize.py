"""The README's result and performance tables, generated from the files the runs write.

Numbers in the README are never typed by hand.  The chain is::

    make reproduce / make benchmarks  ->  results/            (untracked, rewritten by every run)
    make readme                        ->  docs/results/       (tracked copy of exactly the files quoted,
                                                                with PROVENANCE.json: hash, command,
                                                                date and machine of each)
                                       ->  README.md blocks    (rendered from docs/results/)

Each table row below reads its file(s) through :class:`Source`, which records them, and the
tables other than the performance table end in a ``source`` cell naming each file and the
command that wrote it (:func:`summarize_parts.base.source_cell`).  Each row says what kind
of claim it is:
*measured* (a run of our code against real peers on this machine), *modelled* (SimPy or a
cost model, calibration named) or *true by construction* (a generator tuned to the paper).

Usage::

    python notebooks/summarize.py             # render from results/, write results/SUMMARY.md
    python notebooks/summarize.py --update    # copy the quoted files to docs/results/, rewrite README
    python notebooks/summarize.py --check     # exit 1 if the README differs from docs/results/
    python notebooks/summarize.py --render-snapshot   # re-render the README from docs/results/
                                                      # (a rendering change; no new results)

``tests/test_readme_tables.py`` runs the ``--check`` logic, so prose and results cannot drift.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # summarize_parts, however loaded

from summarize_parts import (  # noqa: E402, F401
    mutation,
    performance,
    performance_papers,
    performance_sslacc,
    performance_webalps,
    systems,
)
from summarize_parts.base import (  # noqa: E402, F401  (re-exported: the tests use them)
    REPRODUCE_STEPS,
    SOURCED_TABLES,
    TABLE_HEADERS,
    MissingResult,
    Row,
    Source,
    f,
    find,
    registrar,
    source_cell,
    writer_of,
)

from testbed.results import PROVENANCE_FILE, git_revision  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
SNAPSHOT = REPO / "docs" / "results"
README = REPO / "README.md"


ROWS: list[Row] = list(performance.ROWS)  # the performance table's rows come first
row = registrar(ROWS)


# --------------------------------------------------------------------------------------------
# SSL splitting next to the paper (make reproduce -> results/sslsplit/*.csv)
# --------------------------------------------------------------------------------------------

QUANTITY = {
    "http_over_split_warm": "HTTP bytes / warm-splitting bytes",
    "split_warm_saving_vs_http": "warm splitting's saving over HTTP",
    "marginal": "warm splitting's marginal bytes per payload byte",
    "vs_http": "bytes / HTTP bytes",
    "ratio": "ideal (1 / compressibility) / HTTP",
    "warm_bytes": "cache warmth from the previous two weeks",
    "latency_vs_https": "latency / HTTPS latency (ADSL)",
}
ESTIMATES = ["measured", "model, calibrated here", "model, paper's setup", "trace statistic"]


def _num(value: str) -> str:
    return f"{float(value):.3g}"


@row("sslsplit")
def _paper_comparison(src: Source) -> list[list[str]]:  # type: ignore[override]
    data = src.csv("sslsplit/paper_comparison.csv")
    groups: dict[tuple[str, ...], dict[str, dict[str, str]]] = {}
    for r in data:
        key = (r["figure"], r["x"], r["paper_trace"], r["protocol"], r["quantity"])
        groups.setdefault(key, {})[r["estimate"]] = r
    out = []
    for (fig, x, trace, proto, qty), by in groups.items():
        first = next(iter(by.values()))
        cells = [
            f"Fig. {fig}" if fig[0].isdigit() else fig,
            f"{trace}, {x}",
            f"{proto}: {QUANTITY.get(qty, qty)}",
            f"{_num(first['paper_value'])} ({first['paper_value_source']})",
        ]
        for est in ESTIMATES:
            r = by.get(est)
            if r is None:
                cells.append("—")
                continue
            tag = r["kind"] + (f", {r['fit']}" if r["fit"] else "")
            cells.append(f"{_num(r['value'])} ({tag})")
        out.append(cells)
    return out


@row("sslsplit")
def _held_out(src: Source) -> list[list[str]]:  # type: ignore[override]
    errors: dict[str, list[float]] = {}
    files = ["sslsplit/agreement.csv", "sslsplit/held_out_agreement.csv"]
    n = 0
    for rel in files:
        for r in src.csv(rel):
            errors.setdefault(r["protocol"], []).append(abs(float(r["error"])))
            n += 1
    fit: dict[str, float] = {}
    for r in src.csv("sslsplit/sweep_fit.csv"):
        fit[r["protocol"]] = max(fit.get(r["protocol"], 0.0), abs(float(r["error"])))
    order = [p for p in ("http", "https", "split_cold", "split_warm") if p in errors]
    return [[
        "§6.3",
        f"{n // max(len(order), 1)} replays not used for calibration (trace chunks, fresh synthetic chunks)",
        "largest error of the calibrated model vs measured bytes, " + " / ".join(order),
        "\"agree very closely\" (text; no number)",
        " / ".join(f"{100 * max(errors[p]):.2f} %" for p in order) + " (modelled vs measured, held-out)",
        " / ".join(f"{100 * fit[p]:.1f} %" for p in order if p in fit) + " (in-sample fit to the file-size sweep)",
        "—",
        "—",
    ]]


@row("sslsplit")
def _synthetic_traces(src: Source) -> list[list[str]]:  # type: ignore[override]
    paper = {"synthetic-lcs": ("www.lcs", "≈ 10; chunk 2.26"), "synthetic-amsterdam": ("amsterdam", "≈ 3.5; chunk 1.37")}
    out = []
    for r in src.csv("sslsplit_traces/traces.csv"):
        if r["trace"] not in paper:
            continue
        name, value = paper[r["trace"]]
        out.append([
            "§6.3",
            f"{r['trace']} ({float(r['requests']):,.0f} requests, {float(r['days']):.0f} days)",
            "inherent compressibility (transferred / unique bytes): whole trace; chosen chunk",
            f"{name}: {value} (text)",
            "—",
            "—",
            "—",
            f"{float(r['compressibility']):.3g}; {float(r['chunk_compressibility']):.3g}"
            " (true by construction: generator tuned to the paper's totals, chunk picked as the closest)",
        ])
    return out


# --------------------------------------------------------------------------------------------
# SINE and Reverse SSL next to their papers (make reproduce -> results/{sine,reverse_ssl}/*.csv)
# --------------------------------------------------------------------------------------------


def _gaps(values: Any) -> str:
    gaps = [abs(float(v)) for v in values]
    gaps.sort()
    return f"{gaps[len(gaps) // 2] * 100:.1f} % / {gaps[-1] * 100:.1f} %"


@row("driver")
def _linktestbed(src: Source) -> list[str]:
    rows = src.csv("benchmarks/linktestbed.csv")
    sizes = " / ".join(f"{int(r['size_bytes']):,} B" for r in rows)
    return [
        "SSL splitting Fig. 12, HTTPS only: the real `tls12` HTTPS server and curl over the "
        "kernel-shaped ADSL line (`python benchmarks/bench_linktestbed.py`), vs the old model",
        str(len(rows)),
        " / ".join(
            f"{float(r['measured_over_model']) - 1:+.1%} "
            f"({float(r['measured_over_model_min']) - 1:+.1%}…{float(r['measured_over_model_max']) - 1:+.1%})"
            for r in rows
        ) + f" at {sizes} (median (min…max) of {rows[0]['repeats']} repeats)",
        "measured, not model vs model: the model keeps the paper's RSA time and handshake sizes "
        "(small files); it was not recalibrated from these runs",
        "measured (median of curl's time_total) vs modelled",
    ]


@row("driver")
def _driver_fig12(src: Source) -> list[str]:
    rows = src.csv("sslsplit/figure12_driver.csv")
    rows = [r for r in rows if r["model_latency_s"] not in ("", "nan")]
    return [
        "SSL splitting Fig. 12 (HTTP, HTTPS, cold splitting over ADSL)",
        str(len(rows)),
        _gaps(float(r["driver_latency_s"]) / float(r["model_latency_s"]) - 1 for r in rows),
        "the old model's paper-setup handshake is ~700 B longer (HTTP/HTTPS); the real proxy "
        "fetches each missing payload with its own ADSL round trip (cold splitting, small files)",
        "modelled (both), bytes from the real objects on the driver",
    ]


@row("driver")
def _driver_sine(src: Source) -> list[list[str]]:  # type: ignore[override]
    out = []
    why = {
        "4": "HTTPS: the model's typed handshake sizes; large cached files: the verifier hashes "
             "while bytes arrive, the model after the last byte",
        "5": "HTTPS: the model's typed handshake sizes (one more TCP segment, a smaller window)",
        "6": "SINEB, warm cache: the model starts all 22 exchanges at once, the real handshakes "
             "finish tens of ms apart",
    }
    for fig, what in (("4", "latency vs file size"), ("5", "latency vs client bandwidth"),
                      ("6", "portal page of 22 objects")):
        rows = src.csv(f"sine/figure{fig}_driver.csv")
        out.append([
            f"SINE Fig. {fig} ({what})",
            str(len(rows)),
            _gaps(r["rel_diff"] for r in rows),
            why[fig],
            "modelled (both), bytes from the real objects on the driver",
        ])
        src.end_row()
    return out


@row("driver")
def _driver_dos(src: Source) -> list[str]:
    rows = src.csv("reverse_ssl/dos_driver.csv")
    old = {(r["puzzles"], r["attack_rate"]): r for r in rows if r["model"] == "old"}
    pairs = [(old[(r["puzzles"], r["attack_rate"])], r) for r in rows
             if r["model"] == "driver" and (r["puzzles"], r["attack_rate"]) in old]
    return [
        "Reverse SSL DoS (legitimate handshakes served vs attack rate, with and without puzzles)",
        str(len(pairs)),
        _gaps(float(d["legit_success_rate"]) - float(o["legit_success_rate"]) for o, d in pairs)
        + " (absolute, fraction served)",
        "agree until the server saturates; beyond, a real handshake queues for the CPU twice "
        "and a real flood sends its garbage in one write, so the driver is more pessimistic",
        "modelled (both), bytes replayed from real recorded handshakes",
    ]


@row("others")
def _sine_table2(src: Source) -> list[list[str]]:  # type: ignore[override]
    data = src.csv("sine/table2.csv")
    n = max(int(r["N"]) for r in data)
    out = []
    for r in data:
        if int(r["N"]) != n:
            continue
        out.append([
            "SINE, Table II",
            f"{r['protocol']}: public-key operations, origin round trips for N = {n} requests",
            f"{r['public_key_operations']}, {r['origin_round_trips']}",
            f"{r['paper_public_key']}, {r['paper_round_trips']}",
            "measured (counted in real fetches from the origin server on loopback)",
        ])
    return out


@row("others")
def _rssl_table3(src: Source) -> list[str]:
    data = [r for r in src.csv("reverse_ssl/table3.csv") if r["bits"] in ("1024", "2048", "4096")]
    return [
        "Reverse SSL, Table 3",
        "online public-key speedup at " + " / ".join(r["bits"] for r in data) + " bits (RSA times from `openssl speed`)",
        " / ".join(f"{float(r['cli_speedup']):.1f}" for r in data),
        " / ".join(f"{float(r['paper_speedup']):.1f}" for r in data),
        "measured",
    ]


@row("others")
def _rssl_dos(src: Source) -> list[str]:
    data = src.csv("reverse_ssl/dos.csv")
    x = [2.0, 10.0]

    def rate(puzzles: str, mult: float) -> float:
        return float(find(data, puzzles=puzzles, attack_rate_x_capacity=mult)["legit_success_rate"])

    return [
        "Reverse SSL, DoS model",
        "legitimate handshakes served under an attack of " + " / ".join(f"{m:g}×" for m in x)
        + " server capacity, with vs without puzzles",
        " / ".join(f"{rate('True', m):.2f} vs {rate('False', m):.2f}" for m in x),
        "puzzles keep the server available (no number)",
        "modelled (SimPy, calibrated with this run's measured handshake and puzzle costs)",
    ]


ROWS += systems.ROWS  # SSLACC, WebALPS, measured links; their benchmark rows end the performance table
ROWS += mutation.ROWS  # the tests section's mutation scores (make mutation)


def render_table(name: str, src: Source) -> str:
    header = TABLE_HEADERS[name]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in ROWS:
        if r.table == name:
            src.begin_row()
            produced = r.cells(src)
            table_rows = produced if produced and isinstance(produced[0], list) else [produced]
            for cells, files in zip(table_rows, src.sources(len(table_rows)), strict=True):
                if name in SOURCED_TABLES:
                    cells = [*cells, source_cell(files)]
                if len(cells) != len(header):
                    raise ValueError(f"{r.cells.__name__}: {len(cells)} cells for {len(header)} columns")
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def begin(name: str) -> str:
    return f"<!-- BEGIN {name}: generated by `make readme` from docs/results/; do not edit -->"


def end(name: str) -> str:
    return f"<!-- END {name} -->"


def render_all(src: Source) -> dict[str, str]:
    return {name: render_table(name, src) for name in TABLE_HEADERS}


def splice(readme: str, blocks: dict[str, str]) -> str:
    """Replace each generated block of the README by its new rendering."""
    for name, body in blocks.items():
        b, e = begin(name), end(name)
        head, sep, rest = readme.partition(b)
        if not sep:
            raise MissingResult(f"README has no block {b!r}")
        _, sep2, tail = rest.partition(e)
        if not sep2:
            raise MissingResult(f"README block {name} has no end marker")
        readme = head + b + "\n" + body + e + tail
    return readme


def check(readme_text: str, snapshot: Path = SNAPSHOT) -> list[str]:
    """Differences between the README's blocks and their rendering from ``snapshot``."""
    src = Source(snapshot)
    blocks = render_all(src)
    wanted = splice(readme_text, blocks)
    if wanted == readme_text:
        return []
    got_lines, want_lines = readme_text.splitlines(), wanted.splitlines()
    return [f"README: {g!r}\n  docs/results: {w!r}" for g, w in zip(got_lines, want_lines, strict=False) if g != w] or [
        "README differs in length from its rendering"
    ]


def provenance(used: Iterable[str], results: Path) -> dict[str, Any]:
    """What ``docs/results/PROVENANCE.json`` says about each copied file: its SHA-256, the
    command that wrote it (:func:`writer_of`), when (the file's modification time in
    ``results/``, i.e. when that run wrote it) and where (the platform and git revision
    recorded by the run's own ``run.json`` when its folder has one, else this machine's:
    ``results/`` is written only by runs on this checkout)."""
    here = f"{platform.platform()}, {os.cpu_count()} CPUs"
    files: dict[str, Any] = {}
    for rel in sorted(used):
        path = results / rel
        run_json = path.parent / "run.json"
        run = json.loads(run_json.read_text()) if run_json.is_file() else {}
        mtime = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
        files[rel] = {
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "command": writer_of(rel).replace("`", ""),
            "written_utc": mtime.isoformat(timespec="seconds"),
            "machine": (f"{run['platform']}, {run.get('cpus')} CPUs" if "platform" in run
                        else here),
            "git_revision": run.get("git_revision") or git_revision(REPO),
        }
    return {"written_by": "python notebooks/summarize.py --update (make readme)", "files": files}


def write_snapshot(used: Iterable[str], results: Path, snapshot: Path) -> None:
    """Replace ``snapshot`` (``docs/results/``) by copies of the ``used`` files of ``results``
    and their :func:`provenance` in ``PROVENANCE.json``."""
    used = sorted(used)
    record = provenance(used, results)
    if snapshot.exists():
        shutil.rmtree(snapshot)
    for rel in used:
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(results / rel, snapshot / rel)
    (snapshot / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="copy quoted files to docs/results/ and rewrite README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 if README.md differs from docs/results/")
    mode.add_argument("--render-snapshot", action="store_true",
                      help="rewrite the README tables from docs/results/ as it is (after a change "
                           "to how rows are rendered; copies nothing)")
    args = parser.parse_args(argv)

    if args.render_snapshot:
        try:
            blocks = render_all(Source(SNAPSHOT))
        except MissingResult as exc:
            print(f"summarize: {exc}; run `make reproduce`, `make benchmarks` and `make readme`",
                  file=sys.stderr)
            return 1
        README.write_text(splice(README.read_text(), blocks))
        print("rewrote the README tables from docs/results/")
        return 0

    if args.check:
        try:
            problems = check(README.read_text())
        except MissingResult as exc:
            print(f"summarize: {exc}; run `make reproduce`, `make benchmarks` and `make readme`",
                  file=sys.stderr)
            return 1
        for p in problems:
            print(p)
        print("README tables match docs/results/" if not problems else "README is out of date: run `make readme`")
        return 1 if problems else 0

    src = Source(RESULTS)
    try:
        blocks = render_all(src)
    except MissingResult as exc:
        print(f"summarize: {exc}; run `make reproduce` and `make benchmarks` first", file=sys.stderr)
        return 1
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "SUMMARY.md").write_text("\n".join(f"## {n}\n\n{b}" for n, b in blocks.items()))
    print(f"wrote {(RESULTS / 'SUMMARY.md').relative_to(REPO)}")
    if args.update:
        write_snapshot(src.used, RESULTS, SNAPSHOT)
        README.write_text(splice(README.read_text(), blocks))
        print(f"copied {len(src.used)} files to docs/results/ (their provenance in "
              f"docs/results/{PROVENANCE_FILE}) and rewrote the README tables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
