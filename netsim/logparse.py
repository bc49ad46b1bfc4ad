"""Vectorised parsers for web-server access logs.

Every parser turns text lines into the same *request table*, a pandas DataFrame with one row
per request and these columns:

============== ======== ===========================================================================
column         dtype    meaning
============== ======== ===========================================================================
``time``       int64    local wall-clock time of the request as written in the log, in seconds since
                        1970-01-01 00:00 (the log's own timezone; no conversion to UTC is made)
``method``     object   HTTP method (``"GET"``; formats without a method column say ``"GET"``)
``url``        object   request target as logged (canonicalise it with :mod:`testbed.traces.workload`)
``status``     int16    HTTP status code, ``-1`` when the log has none or writes ``-``
``size``       int64    response body bytes, ``-1`` when the log has none or writes ``-``
``utc_offset`` int32    seconds east of UTC of ``time``: from the line (CLF ``-0400``) or else the
                        format's ``utc_offset`` (0 when unknown); ``time - utc_offset`` is UTC
============== ======== ===========================================================================

Supported formats (:data:`FORMATS`):

``clf``
    Common Log Format and Combined Log Format
    (``host ident user [01/Jul/1995:00:00:01 -0400] "GET /x HTTP/1.0" 200 6245 "ref" "agent"``):
    NASA-HTTP, ClarkNet, Calgary, Saskatchewan, Apache and nginx defaults.
``epa``
    The EPA-HTTP variant ``host [29:23:53:25] "GET /x HTTP/1.0" 200 1497``: day of month only,
    so the year and month come from the :class:`LogFormat` (August 1995 by default).
``wc98csv``
    The WorldCup98 CSV export ``clientID,30/Apr/1998,22:46:12,/x.gif,200,508`` (no method).
``lpdaac``
    The LP DAAC OPeNDAP log: ``|&|``-separated ``date time(AM/PM)|user|...|path|status|bytes``.
``sdsc``
    The SDSC-HTTP log ``1+1: Tue Aug 22 00:00:00 1995 (/file): Sent binary: GET /x HTTP/1.0``
    (no status, no size: only popularity statistics are possible).

Lines that do not fit the format are *counted, not fatal*: :class:`ParseReport` says how many
and shows the first few, so a 2 GB log with a handful of garbled lines still loads.

Reading is chunked (:func:`iter_log`, ``chunk_lines`` lines at a time) so memory stays bounded
for multi-GB logs; :func:`read_log` concatenates the chunks and gives the same table as one pass.
Gzip input is detected from the magic bytes, not the file name.

Example::

    >>> table, report = read_log("epa-http.txt.gz")                # doctest: +SKIP
    >>> report.malformed, len(table)                               # doctest: +SKIP
    (0, 47748)
"""

from __future__ import annotations

import gzip
import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import IO

import numpy as np
import pandas as pd

__all__ = [
    "FORMATS",
    "COLUMNS",
    "LogFormat",
    "ParseReport",
    "LogFormatError",
    "open_text",
    "sniff_format",
    "parse_lines",
    "iter_log",
    "read_log",
    "empty_table",
]

#: Column order of every request table.
COLUMNS: tuple[str, ...] = ("time", "method", "url", "status", "size", "utc_offset")

# Each regex captures named groups; the per-format post-processing below turns them into the
# five table columns. They are anchored so that a garbled line fails to match as a whole.
_CLF_RE = (
    r'^\S+ \S+ .*?\[(?P<stamp>\d{1,2}/[A-Za-z]{3}/\d{4}:\d{1,2}:\d\d:\d\d)(?: (?P<tz>[+-]\d{4}))?\] '
    r'"(?P<request>.*?)" (?P<status>\d{3}|-) (?P<size>\d+|-)(?:\s.*)?$'
)
_EPA_RE = (
    r'^\S+ \[(?P<stamp>\d{1,2}:\d\d:\d\d:\d\d)\] "(?P<request>.*)" '
    r'(?P<status>\d{3}|-)(?: (?P<size>\d+|-))?\s*$'
)
_WC98CSV_RE = (
    r'^[^,]*,(?P<stamp>\d{1,2}/[A-Za-z]{3}/\d{4},\d\d:\d\d:\d\d),'
    r'(?P<url>.*),(?P<status>\d{3}|-),(?P<size>\d+|-)\s*$'
)
_LPDAAC_RE = (
    r'^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d[AP]M)\|&\|(?:[^|]*\|&\|){5}(?P<url>.*?)\|&\|'
    r'(?P<status>\d{3}|-)\|&\|(?P<size>\d+|-)(?:\|&\|.*)?\s*$'
)
_SDSC_RE = (
    r'^.+?: [A-Z][a-z]{2} (?P<stamp>[A-Za-z]{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}) '
    r'\((?P<file>.*?)\): (?P<action>[^:]*):?(?: (?P<request>.*))?$'
)
#: strptime pattern of the ``stamp`` group of each format (``epa`` gets "YYYY-MM-" prefixed).
_STAMP_FORMATS = {
    "clf": "%d/%b/%Y:%H:%M:%S",
    "epa": "%Y-%m-%d:%H:%M:%S",
    "wc98csv": "%d/%b/%Y,%H:%M:%S",
    "lpdaac": "%Y-%m-%d %I:%M%p",
    "sdsc": "%b %d %H:%M:%S %Y",
}
# "GET /a b HTTP/1.0" -> method, target (may contain blanks), optional version.
_REQUEST_RE = r'^\s*(?P<method>[A-Za-z]+)\s+(?P<url>.*?)(?:\s+HTTP/\S*)?\s*$'


@dataclass(frozen=True)
class LogFormat:
    """A log format: its name plus the facts a line does not carry itself.

    ``year`` and ``month`` are only used by formats whose timestamps omit them (``epa``);
    ``utc_offset`` (seconds east of UTC) applies to lines that carry no offset of their own.
    """

    name: str
    year: int = 1995
    month: int = 8
    utc_offset: int = 0

    def __post_init__(self) -> None:
        if self.name not in _REGEXES:
            raise ValueError(
                f"unknown log format {self.name!r}; known formats: {', '.join(sorted(_REGEXES))}")
        if not 1 <= self.month <= 12:
            raise ValueError(f"month must be 1..12, got {self.month}")


_REGEXES: dict[str, str] = {
    "clf": _CLF_RE,
    "epa": _EPA_RE,
    "wc98csv": _WC98CSV_RE,
    "lpdaac": _LPDAAC_RE,
    "sdsc": _SDSC_RE,
}
#: Names of the supported formats.
FORMATS: tuple[str, ...] = tuple(_REGEXES)
_COMPILED = {name: re.compile(rx) for name, rx in _REGEXES.items()}


class LogFormatError(ValueError):
    """The input is not a log in any supported format (or not in the one that was asked for)."""


@dataclass
class ParseReport:
    """What happened while parsing: totals and the first few malformed lines.

    ``lines`` counts non-empty input lines; ``parsed + malformed == lines``.
    ``examples`` holds up to ``max_examples`` ``(line_number, text)`` pairs (1-based numbers).
    """

    fmt: str
    lines: int = 0
    parsed: int = 0
    malformed: int = 0
    examples: list[tuple[int, str]] = field(default_factory=list)
    max_examples: int = 5

    def merge(self, other: ParseReport) -> None:
        """Add the counts of ``other`` (a later chunk of the same input) to this report."""
        self.lines += other.lines
        self.parsed += other.parsed
        self.malformed += other.malformed
        room = self.max_examples - len(self.examples)
        self.examples.extend(other.examples[: max(room, 0)])

    def __str__(self) -> str:
        text = f"{self.fmt}: {self.lines} lines, {self.parsed} parsed, {self.malformed} malformed"
        for number, line in self.examples:
            text += f"\n  line {number}: {line[:120]!r}"
        return text


def empty_table() -> pd.DataFrame:
    """A request table with no rows and the right dtypes."""
    return pd.DataFrame({
        "time": np.empty(0, np.int64),
        "method": pd.Series([], dtype=object),
        "url": pd.Series([], dtype=object),
        "status": np.empty(0, np.int16),
        "size": np.empty(0, np.int64),
        "utc_offset": np.empty(0, np.int32),
    })


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a log for reading text, transparently un-gzipping it.

    Gzip is recognised by its magic bytes (``1f 8b``), so a renamed file still works. Bytes
    that are not UTF-8 are decoded as Latin-1: old logs contain raw 8-bit URLs.
    """
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    stream: gzip.GzipFile | io.BufferedReader = (
        gzip.open(path, "rb") if gzipped else open(path, "rb"))  # noqa: SIM115
    return io.TextIOWrapper(stream, encoding="latin-1", newline=None)


def sniff_format(lines: Sequence[str]) -> str:
    """Guess the format of a log from some of its lines.

    Returns the format whose regex matches the most lines; raises :class:`LogFormatError` if
    none matches at least half of the non-empty sample.
    """
    sample = [ln for ln in lines if ln.strip()]
    if not sample:
        raise LogFormatError("cannot guess the format of an empty log")
    scores = {name: sum(1 for ln in sample if rx.match(ln)) for name, rx in _COMPILED.items()}
    best = max(scores, key=lambda n: scores[n])
    if scores[best] * 2 < len(sample):
        raise LogFormatError(
            f"no supported log format matches these lines (best: {best}, "
            f"{scores[best]}/{len(sample)} lines); first line: {sample[0][:100]!r}")
    return best


def _int_or_missing(col: pd.Series, dtype: type) -> np.ndarray:
    """Digit strings → integers; ``'-'`` and unmatched (NaN) → -1."""
    digits = col.where(col.notna() & (col != "-"), "-1")
    return digits.to_numpy(dtype=object).astype(dtype)


def _parse_stamps(stamp: pd.Series, fmt: LogFormat) -> pd.Series:
    """Seconds since the epoch (local wall clock) from the ``stamp`` group; NaN if invalid."""
    text = stamp
    if fmt.name == "epa":
        text = f"{fmt.year:04d}-{fmt.month:02d}-" + stamp
    elif fmt.name == "sdsc":
        text = stamp.str.replace(r"\s+", " ", regex=True)
    parsed = pd.to_datetime(text, format=_STAMP_FORMATS[fmt.name], errors="coerce")
    secs = parsed.astype("datetime64[s]").astype("int64").astype("float64")
    return secs.where(parsed.notna())


def _method_and_url(g: pd.DataFrame, fmt: LogFormat) -> tuple[pd.Series, pd.Series]:
    """The request method (upper case) and URL of each matched line; a format without a
    request field (a CSV of URLs) is all GETs."""
    if "request" not in g:
        return pd.Series("GET", index=g.index, dtype=object), g["url"]
    req = g["request"].fillna("").str.extract(_REQUEST_RE)
    method = req["method"].str.upper()
    url = req["url"]
    if fmt.name == "sdsc":
        # SDSC lines without a request part still name the file in parentheses.
        method = method.fillna("GET")
        url = url.where(url.notna() & (url.str.len() > 0), g["file"])
    return method, url


def _utc_offsets(g: pd.DataFrame, fmt: LogFormat) -> np.ndarray:
    """Seconds east of UTC per line: the line's ``+hhmm`` zone, else the format's default."""
    offset = np.full(len(g), fmt.utc_offset, dtype=np.int32)
    if "tz" in g:
        tz = g["tz"]
        has = tz.notna().to_numpy()
        if has.any():
            txt = tz[has].astype(str)
            sign = np.where(txt.str[0] == "-", -1, 1)
            hh = txt.str[1:3].astype(int).to_numpy()
            mm = txt.str[3:5].astype(int).to_numpy()
            offset[has] = sign * (hh * 3600 + mm * 60)
    return offset


def parse_lines(lines: Sequence[str], fmt: LogFormat | str, first_line: int = 1
                ) -> tuple[pd.DataFrame, ParseReport]:
    """Parse a batch of lines (one chunk) into a request table and a report.

    ``first_line`` is the 1-based number of ``lines[0]`` in the whole file, used in the
    report's examples. Empty lines are skipped and not counted.
    """
    if isinstance(fmt, str):
        fmt = LogFormat(fmt)
    report = ParseReport(fmt.name)
    series = pd.Series(list(lines), dtype=object)
    series = series.str.rstrip("\r\n")
    nonempty = series.str.strip().str.len() > 0
    series = series[nonempty]
    report.lines = len(series)
    if not len(series):
        return empty_table(), report
    g = series.str.extract(_REGEXES[fmt.name])
    ok = g.notna().any(axis=1) & g.iloc[:, 0].notna()

    secs = _parse_stamps(g["stamp"], fmt)
    ok &= secs.notna()

    method, url = _method_and_url(g, fmt)
    if "request" in g:
        ok &= url.notna() & method.notna()

    status = _int_or_missing(g["status"], np.int16) if "status" in g else np.full(len(g), -1,
                                                                                    np.int16)
    size = _int_or_missing(g["size"], np.int64) if "size" in g else np.full(len(g), -1, np.int64)

    offset = _utc_offsets(g, fmt)

    okv = ok.to_numpy()
    report.parsed = int(okv.sum())
    report.malformed = report.lines - report.parsed
    if report.malformed:
        bad_idx = series.index[~okv][: report.max_examples]
        report.examples = [(first_line + int(i), str(series.loc[i])) for i in bad_idx]
    table = pd.DataFrame({
        "time": secs[okv].to_numpy(dtype=np.int64),
        "method": method[okv].to_numpy(dtype=object),
        "url": url[okv].to_numpy(dtype=object),
        "status": status[okv],
        "size": size[okv],
        "utc_offset": offset[okv],
    })
    return table, report


def _chunks(stream: Iterable[str], chunk_lines: int) -> Iterator[list[str]]:
    it = iter(stream)
    while True:
        block = list(islice(it, chunk_lines))
        if not block:
            return
        yield block


def _resolve_format(fmt: LogFormat | str | None, head: Sequence[str]) -> LogFormat:
    if fmt is None or fmt == "auto":
        return LogFormat(sniff_format(head))
    return LogFormat(fmt) if isinstance(fmt, str) else fmt


def iter_log(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
             fmt: LogFormat | str | None = None, chunk_lines: int = 200_000,
             report: ParseReport | None = None) -> Iterator[pd.DataFrame]:
    """Yield request tables of at most ``chunk_lines`` lines each, file after file, in order.

    Several paths are read as one trace (e.g. a month split into days). ``fmt=None`` sniffs
    the format of each file from its first 50 lines. If ``report`` is given, the counts of
    every chunk are merged into it as the chunks are consumed.
    """
    if chunk_lines < 1:
        raise ValueError(f"chunk_lines must be >= 1, got {chunk_lines}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"trace file not found: {os.fspath(path)}")
        with open_text(path) as stream:
            line_no = 1
            resolved: LogFormat | None = None
            for block in _chunks(stream, chunk_lines):
                if resolved is None:
                    resolved = _resolve_format(fmt, block[:50])
                    if report is not None and report.fmt == "auto":
                        report.fmt = resolved.name
                table, rep = parse_lines(block, resolved, first_line=line_no)
                line_no += len(block)
                if report is not None:
                    report.merge(rep)
                yield table


def read_log(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
             fmt: LogFormat | str | None = None, chunk_lines: int = 200_000
             ) -> tuple[pd.DataFrame, ParseReport]:
    """Read whole log file(s) into one request table; returns ``(table, report)``."""
    name = fmt.name if isinstance(fmt, LogFormat) else (fmt or "auto")
    report = ParseReport(name)
    parts = list(iter_log(paths, fmt, chunk_lines, report))
    parts = [p for p in parts if len(p)]
    table = pd.concat(parts, ignore_index=True) if parts else empty_table()
    table["status"] = table["status"].astype(np.int16)
    table["size"] = table["size"].astype(np.int64)
    table["time"] = table["time"].astype(np.int64)
    table["utc_offset"] = table["utc_offset"].astype(np.int32)
    return table, report
