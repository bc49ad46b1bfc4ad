"""The README's result and performance tables, generated from the files the runs write.

Numbers in the README are never typed by hand.  The chain is::

    make reproduce / make benchmarks  ->  results/            (untracked, rewritten by every run)
    make readme                        ->  docs/results/       (tracked copy of exactly the files quoted)
                                       ->  README.md blocks    (rendered from docs/results/)

Each table row below names the file(s) it reads and says what kind of claim it is:
*measured* (a run of our code against real peers on this machine), *modelled* (SimPy or a
cost model, calibration named) or *true by construction* (a generator tuned to the paper).

Usage::

    python notebooks/summarize.py             # render from results/, write results/SUMMARY.md
    python notebooks/summarize.py --update    # copy the quoted files to docs/results/, rewrite README
    python notebooks/summarize.py --check     # exit 1 if the README differs from docs/results/

``tests/test_readme_tables.py`` runs the ``--check`` logic, so prose and results cannot drift.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
SNAPSHOT = REPO / "docs" / "results"
README = REPO / "README.md"


class MissingResult(Exception):
    """A row's source file (or a key in it) is absent: run the command that writes it."""


class Source:
    """Reads result files below one directory (``results/`` or ``docs/results/``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.used: set[str] = set()

    def path(self, rel: str) -> Path:
        path = self.root / rel
        if not path.is_file():
            raise MissingResult(f"{rel} not found under {self.root.name}/")
        self.used.add(rel)
        return path

    def json(self, rel: str) -> Any:
        return json.loads(self.path(rel).read_text())

    def csv(self, rel: str) -> list[dict[str, str]]:
        with self.path(rel).open(newline="") as f:
            return list(csv.DictReader(f))


@dataclass(frozen=True)
class Row:
    """One README table row: fixed cells plus the cells computed from result files."""

    table: str
    cells: Callable[[Source], list[str]]


ROWS: list[Row] = []


def row(table: str) -> Callable[[Callable[[Source], list[str]]], Callable[[Source], list[str]]]:
    def register(fn: Callable[[Source], list[str]]) -> Callable[[Source], list[str]]:
        ROWS.append(Row(table, fn))
        return fn

    return register


def f(value: float, spec: str = ".2f") -> str:
    return format(value, spec)


def find(rows: Iterable[dict[str, Any]], **match: Any) -> dict[str, Any]:
    for r in rows:
        if all(str(r.get(k)) == str(v) for k, v in match.items()):
            return r
    raise MissingResult(f"no row with {match}")


TABLE_HEADERS = {
    "performance": ["benchmark", "command", "result", "reference (same run)", "ratio", "target", "kind"],
}

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
        "≥ 0.7",
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


def render_table(name: str, src: Source) -> str:
    header = TABLE_HEADERS[name]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in ROWS:
        if r.table == name:
            cells = r.cells(src)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="copy quoted files to docs/results/ and rewrite README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 if README.md differs from docs/results/")
    args = parser.parse_args(argv)

    if args.check:
        problems = check(README.read_text())
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
        if SNAPSHOT.exists():
            shutil.rmtree(SNAPSHOT)
        for rel in sorted(src.used):
            (SNAPSHOT / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(RESULTS / rel, SNAPSHOT / rel)
        README.write_text(splice(README.read_text(), blocks))
        print(f"copied {len(src.used)} files to docs/results/ and rewrote the README tables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
