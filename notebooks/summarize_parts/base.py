"""What every README row of :mod:`summarize` is made of: the result files it reads
(:class:`Source`), the row registry, number formatting and the tables' headers.

Split from ``summarize.py`` so that the rows can live in more than one module
(:mod:`.performance` holds the benchmark rows); ``summarize.py`` re-exports these names.

**Every number names its file and its command.**  :class:`Source` records which files each
row reads (:attr:`Source.reads`, reset per row by :meth:`Source.begin_row`), and the tables
of :data:`SOURCED_TABLES` end in a ``source`` cell made from that record by
:func:`source_cell`: each file as ``docs/results/<file>`` and the command that wrote it
(:func:`writer_of`: a benchmark's line of the ``Makefile``, a step of ``make reproduce`` in
:data:`REPRODUCE_STEPS`, or the notebook whose ``results/<folder>/`` it is).  Nothing in the
cell is typed per row, so it cannot name a file the row did not read.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class MissingResult(Exception):
    """A row's source file (or a key in it) is absent: run the command that writes it."""


class Source:
    """Reads result files below one directory (``results/`` or ``docs/results/``).

    ``used``: every file read so far; ``reads``: the files read since the last
    :meth:`begin_row`, in order (what one row's ``source`` cell names).  A row maker that
    makes several table rows from different files calls :meth:`end_row` after each, so
    that each names only its own files (``per_row``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.used: set[str] = set()
        self.reads: list[str] = []
        self.per_row: list[list[str]] = []
        self._mark = 0

    def begin_row(self) -> None:
        """Start recording the files of a new row maker."""
        self.reads, self.per_row, self._mark = [], [], 0

    def end_row(self) -> None:
        """Close one table row of a multi-row maker: the files read since the previous
        :meth:`end_row` are its files."""
        self.per_row.append(self.reads[self._mark:])
        self._mark = len(self.reads)

    def sources(self, rows: int) -> list[list[str]]:
        """The files of each of the ``rows`` table rows the current maker made."""
        if not self.per_row:
            return [list(self.reads)] * rows
        if len(self.per_row) != rows:
            raise ValueError(f"{len(self.per_row)} end_row() calls for {rows} rows")
        return self.per_row

    def path(self, rel: str) -> Path:
        path = self.root / rel
        if not path.is_file():
            raise MissingResult(f"{rel} not found under {self.root.name}/")
        self.used.add(rel)
        if rel not in self.reads[self._mark:]:
            self.reads.append(rel)
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


RowMaker = Callable[[Source], list[str]]


def registrar(rows: list[Row]) -> Callable[[str], Callable[[RowMaker], RowMaker]]:
    """A decorator ``row(table)`` that appends each function it decorates to ``rows``, in the
    order of definition (the order of the table's rows)."""

    def row(table: str) -> Callable[[RowMaker], RowMaker]:
        def register(fn: RowMaker) -> RowMaker:
            rows.append(Row(table, fn))
            return fn

        return register

    return row


def f(value: float, spec: str = ".2f") -> str:
    return format(value, spec)


def _same_number(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def find(rows: Iterable[dict[str, Any]], **match: Any) -> dict[str, Any]:
    for r in rows:
        if all(str(r.get(k)) == str(v) or _same_number(r.get(k), v) for k, v in match.items()):
            return r
    raise MissingResult(f"no row with {match}")


#: Files that a step of ``make reproduce`` (``notebooks/run_all.py``) writes before the
#: notebooks run, with the step's command.
REPRODUCE_STEPS = {
    "sslacc/cluster_costs.json":
        "python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json",
    "webalps_campaign/fault_campaign.json":
        "python -m webalps_sim.campaign --trials 40 --seed 1 --out results/webalps_campaign",
}


@lru_cache(maxsize=1)
def _makefile_commands() -> dict[str, str]:
    """``results/benchmarks/<file>`` -> the ``make benchmarks`` line that writes it."""
    out: dict[str, str] = {}
    makefile = REPO / "Makefile"
    if not makefile.is_file():
        return out
    for line in makefile.read_text().splitlines():
        cmd = line.strip().replace("$(PY) ", "python ", 1)
        if not cmd.startswith("python "):
            continue
        for word in cmd.split():
            if word.startswith("results/benchmarks/"):
                out.setdefault(word.removeprefix("results/"), cmd)
    return out


def writer_of(rel: str) -> str:
    """The command that writes ``results/<rel>`` (``rel`` as the rows read it), in Markdown.

    Raises :class:`MissingResult` for a file nothing is known to write."""
    if rel in REPRODUCE_STEPS:
        return f"`{REPRODUCE_STEPS[rel]}` (`make reproduce`)"
    if rel.startswith("mutation/"):
        return "`python mutation/run.py` (`make mutation`)"
    bench = _makefile_commands().get(rel)
    if bench is not None:
        return f"`{bench}` (`make benchmarks`)"
    folder = rel.split("/", 1)[0]
    if "/" in rel and (REPO / "notebooks" / f"{folder}.ipynb").is_file():
        return f"`make reproduce` (notebooks/{folder}.ipynb)"
    raise MissingResult(f"no command is known to write results/{rel}")


def source_cell(reads: Iterable[str]) -> str:
    """The ``source`` cell of a row: the files it read, grouped by the command that wrote them."""
    by_writer: dict[str, list[str]] = {}
    for rel in reads:
        by_writer.setdefault(writer_of(rel), []).append(f"`docs/results/{rel}`")
    if not by_writer:
        raise MissingResult("the row read no result file")
    return "; ".join(", ".join(files) + " from " + writer for writer, files in by_writer.items())


TABLE_HEADERS = {
    "others": ["paper", "result", "ours", "paper's", "kind", "source"],
    "sslsplit": ["figure", "workload", "quantity", "paper", "measured", "model, calibrated here",
                 "model, paper's setup", "trace statistic", "source"],
    "performance": ["benchmark", "command", "result", "reference (same run)", "ratio", "target", "kind"],
    "systems": ["paper", "result", "ours", "paper's", "kind", "source"],
    "driver": ["figure", "points", "vs the old model: median / largest gap", "where they differ",
               "kind", "source"],
    "mutation": ["group", "safety checks mutated", "mutants", "killed", "accepted with a reason",
                 "unexplained", "score", "killed / all", "kind", "source"],
}
#: Tables whose last column, ``source``, :func:`source_cell` fills (the performance table
#: names its command in its own column).
SOURCED_TABLES = frozenset({"others", "sslsplit", "systems", "driver", "mutation"})
