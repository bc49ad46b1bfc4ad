"""What every README row of :mod:`summarize` is made of: the result files it reads
(:class:`Source`), the row registry, number formatting and the tables' headers.

Split from ``summarize.py`` so that the rows can live in more than one module
(:mod:`.performance` holds the benchmark rows); ``summarize.py`` re-exports these names.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


TABLE_HEADERS = {
    "others": ["paper", "result", "ours", "paper's", "kind"],
    "sslsplit": ["figure", "workload", "quantity", "paper", "measured", "model, calibrated here",
                 "model, paper's setup", "trace statistic"],
    "performance": ["benchmark", "command", "result", "reference (same run)", "ratio", "target", "kind"],
    "systems": ["paper", "result", "ours", "paper's", "kind"],
    "driver": ["figure", "points", "vs the old model: median / largest gap", "where they differ",
               "kind"],
}
