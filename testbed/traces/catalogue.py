"""The trace catalogue: manifest, locating and fetching traces, and the ``stats`` command.

The ``bundled/`` folder of this package (``testbed/traces/bundled/``, installed with the wheel
as package data) holds small, redistributable access logs (gzip-compressed) and
``manifest.json``, which also knows the larger classic traces (NASA-HTTP, ClarkNet, Calgary,
Saskatchewan, WorldCup98 days) and traces that may not be redistributed. A trace file is looked
for, in order, in:

1. the bundled folder (:func:`bundled_dir`, or the folder given as ``bundled``);
2. ``$TRACES_DIR`` — a folder of already-obtained traces, laid out ``NAME/filename`` or flat;
3. the download cache (``$XDG_CACHE_HOME/websec-testbed/traces``, default ``~/.cache/...``).

Command line (``python -m testbed.traces --help``)::

    python -m testbed.traces list
    python -m testbed.traces stats EPA-HTTP                 # a manifest name ...
    python -m testbed.traces stats day1.log.gz day2.log.gz   # ... or files: one trace, in order
    python -m testbed.traces fetch LPDAAC-OPeNDAP --from /media/usb/logs_for_opendap.txt.gz
    python -m testbed.traces verify

``fetch`` copies (from a local path or ``file://`` URL) or downloads (``http(s)://``,
``ftp://``) each file into a temporary file next to its destination, checks the sha256 from
the manifest, and only then renames it into place: an interrupted or corrupt fetch leaves
nothing half-written. When the manifest pins no checksum the digest seen is recorded beside
the file (``.sha256``) and printed, so that it can be pinned in the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from netsim.logparse import LogFormat, ParseReport, iter_log, read_log

from .stats import StatsAccumulator, TraceStats
from .workload import preprocess

__all__ = [
    "TraceFile",
    "TraceEntry",
    "Manifest",
    "TraceError",
    "bundled_dir",
    "load_manifest",
    "locate",
    "fetch",
    "load_trace",
    "load_workload",
    "stats_for_paths",
    "main",
]


class TraceError(RuntimeError):
    """A trace cannot be found, fetched, verified or read; the message says what to do."""


def bundled_dir() -> Path:
    """The bundled traces and ``manifest.json``: ``bundled/`` beside this module, in a checkout
    and in an installed wheel alike (package data of :mod:`testbed.traces`)."""
    return Path(__file__).resolve().parent / "bundled"


def cache_dir() -> Path:
    """Where ``fetch`` stores traces when ``$TRACES_DIR`` is not set."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "websec-testbed" / "traces"


@dataclass(frozen=True)
class TraceFile:
    """One file of a trace: its relative ``filename``, pinned ``sha256``/``size``, sources."""

    filename: str
    sha256: str | None = None
    size: int | None = None
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceEntry:
    """A manifest entry: what the trace is, where it came from, its terms and its files."""

    name: str
    title: str
    origin: str
    licence: str
    format: str
    files: tuple[TraceFile, ...]
    bundled: bool = False
    redistributable: bool = False
    format_options: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def log_format(self) -> LogFormat:
        """The :class:`~netsim.logparse.LogFormat` to read this trace with."""
        try:
            return LogFormat(self.format, **self.format_options)
        except ValueError as exc:
            raise TraceError(f"trace {self.name}: {exc}") from exc


@dataclass(frozen=True)
class Manifest:
    """All known traces, by name."""

    entries: dict[str, TraceEntry]
    path: Path

    def __getitem__(self, name: str) -> TraceEntry:
        for key, entry in self.entries.items():
            if key.lower() == name.lower():
                return entry
        raise TraceError(
            f"unknown trace {name!r}; known traces: {', '.join(self.entries)} "
            "(or give file paths instead of a name)")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in {k.lower() for k in self.entries}


_ENTRY_KEYS = {"name", "title", "origin", "licence", "format", "files", "bundled",
               "redistributable", "format_options", "reference"}


def load_manifest(path: str | os.PathLike[str] | None = None) -> Manifest:
    """Read ``manifest.json`` (default: the bundled one)."""
    path = Path(path) if path is not None else bundled_dir() / "manifest.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TraceError(f"trace manifest not found: {path}") from exc
    except OSError as exc:
        raise TraceError(f"trace manifest {path}: cannot read ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"trace manifest {path} is not valid JSON: {exc}") from exc
    entries = {}
    try:
        items = list(raw.get("traces", []))
    except AttributeError:
        raise TraceError(f"trace manifest {path}: expected an object with a 'traces' list") from None
    for number, item in enumerate(items, 1):
        try:
            files = tuple(TraceFile(f["filename"], f.get("sha256"), f.get("size"),
                                    tuple(f.get("urls", ()))) for f in item["files"])
            item["name"], item["format"]  # noqa: B018 -- required keys, checked here
        except (KeyError, TypeError, AttributeError) as exc:
            raise TraceError(f"trace manifest {path}: entry {number} is malformed "
                             f"(missing or wrong key {exc})") from None
        entries[item["name"]] = TraceEntry(
            name=item["name"], title=item.get("title", ""), origin=item.get("origin", ""),
            licence=item.get("licence", ""), format=item["format"], files=files,
            bundled=bool(item.get("bundled", False)),
            redistributable=bool(item.get("redistributable", False)),
            format_options=dict(item.get("format_options", {})),
            reference=dict(item.get("reference", {})),
            extra={k: v for k, v in item.items() if k not in _ENTRY_KEYS})
    return Manifest(entries, path)


def _search_dirs(bundled: Path | None = None) -> list[Path]:
    dirs = [bundled if bundled is not None else bundled_dir()]
    if os.environ.get("TRACES_DIR"):
        dirs.append(Path(os.environ["TRACES_DIR"]))
    dirs.append(cache_dir())
    return dirs


def locate(entry: TraceEntry, bundled: Path | None = None) -> list[Path]:
    """Paths of all files of ``entry``; raises :class:`TraceError` naming what is missing."""
    found: list[Path] = []
    for tf in entry.files:
        candidates = []
        for d in _search_dirs(bundled):
            candidates += [d / tf.filename, d / Path(tf.filename).name]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            where = ", ".join(str(d) for d in _search_dirs(bundled))
            raise TraceError(
                f"trace {entry.name}: file {tf.filename} not found (looked in {where}). "
                f"Obtain it with: python -m testbed.traces fetch {entry.name} "
                "[--from PATH_OR_URL], or set TRACES_DIR to a folder that has it.")
        found.append(hit)
    return found


def sha256_file(path: str | os.PathLike[str], block: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def _copy_source(source: str, dest: Path, timeout: float) -> None:
    """Copy a local path or URL to ``dest`` (an open temporary file's path)."""
    parsed = urllib.parse.urlparse(source)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        local = urllib.request.url2pathname(parsed.path) if parsed.scheme == "file" else source
        if not os.path.isfile(local):
            raise TraceError(f"source file not found: {local}")
        shutil.copyfile(local, dest)
        return
    if parsed.scheme not in ("http", "https", "ftp"):
        raise TraceError(f"unsupported source {source!r}: give a path, file://, http(s):// or "
                         "ftp:// URL")
    try:
        with urllib.request.urlopen(source, timeout=timeout) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TraceError(
            f"cannot download {source}: {reason}. If this machine has no network access, "
            "obtain the file elsewhere and run fetch again with --from PATH.") from exc


def fetch(entry: TraceEntry, source: str | None = None, dest_dir: Path | None = None,
          timeout: float = 30.0, progress: bool = False) -> list[Path]:
    """Obtain every file of ``entry`` into ``dest_dir``, verified, atomically.

    ``source`` is a file, a folder holding the trace's file(s), or a URL; by default the
    manifest's URLs are tried in order. ``dest_dir`` defaults to ``$TRACES_DIR`` or the cache
    folder. Returns the final paths. Raises :class:`TraceError` (and leaves no partial file)
    when a file cannot be obtained or its checksum or size does not match.
    """
    if dest_dir is None:
        dest_dir = Path(os.environ["TRACES_DIR"]) if os.environ.get("TRACES_DIR") else cache_dir()
    out: list[Path] = []
    for tf in entry.files:
        if source is None:
            sources = list(tf.urls)
            if not sources:
                raise TraceError(f"trace {entry.name}: no known download location for "
                                 f"{tf.filename}; use --from PATH")
        elif os.path.isdir(source):
            base = Path(source)
            cands = [base / tf.filename, base / Path(tf.filename).name]
            hit = next((c for c in cands if c.is_file()), None)
            if hit is None:
                raise TraceError(f"folder {source} has no {Path(tf.filename).name}")
            sources = [str(hit)]
        else:
            sources = [source]
        final = dest_dir / tf.filename
        final.parent.mkdir(parents=True, exist_ok=True)
        errors: list[str] = []
        for src in sources:
            fd, tmp_name = tempfile.mkstemp(prefix=".fetch-", dir=final.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                if progress:
                    print(f"fetching {src} ...", file=sys.stderr)
                _copy_source(src, tmp, timeout)
                _verify(tf, tmp, src)
            except TraceError as exc:
                tmp.unlink(missing_ok=True)
                errors.append(str(exc))
                continue
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            os.replace(tmp, final)
            os.chmod(final, 0o644)
            if tf.sha256 is None:
                digest = sha256_file(final)
                final.with_name(final.name + ".sha256").write_text(digest + "\n")
                print(f"note: no checksum pinned for {tf.filename}; sha256 {digest} recorded "
                      f"(pin it in {bundled_dir() / 'manifest.json'})", file=sys.stderr)
            out.append(final)
            break
        else:
            raise TraceError(f"trace {entry.name}: could not obtain {tf.filename}:\n  "
                             + "\n  ".join(errors))
    return out


def _verify(tf: TraceFile, path: Path, src: str) -> None:
    size = path.stat().st_size
    if tf.size is not None and size != tf.size:
        raise TraceError(f"{src}: size {size} B, expected {tf.size} B (wrong or truncated file)")
    if tf.sha256 is not None:
        digest = sha256_file(path)
        if digest != tf.sha256:
            raise TraceError(f"{src}: sha256 {digest} does not match the manifest's {tf.sha256}")


def load_trace(name: str, manifest: Manifest | None = None, chunk_lines: int = 200_000
               ) -> tuple[pd.DataFrame, ParseReport]:
    """Parse a manifest trace (all its files, in order) into a request table."""
    entry = (manifest or load_manifest())[name]
    return read_log(locate(entry), entry.log_format(), chunk_lines)


def load_workload(name: str, manifest: Manifest | None = None) -> pd.DataFrame:
    """Parse and preprocess a manifest trace (GET/200, canonical URLs, object ids)."""
    table, _ = load_trace(name, manifest)
    return preprocess(table)


def stats_for_paths(paths: Sequence[str | os.PathLike[str]], fmt: LogFormat | str | None = None,
                    chunk_lines: int = 200_000, progress: bool = False) -> TraceStats:
    """Statistics of one trace stored in ``paths`` (read in order), chunk by chunk.

    Memory stays bounded by the number of distinct objects (see
    :class:`~testbed.traces.stats.StatsAccumulator`), so multi-GB logs are fine.
    """
    name = fmt.name if isinstance(fmt, LogFormat) else (fmt or "auto")
    report = ParseReport(name)
    acc = StatsAccumulator()
    chunks: Iterable[pd.DataFrame] = iter_log(paths, fmt, chunk_lines, report)
    if progress:
        chunks = tqdm(chunks, desc="parsing", unit="chunk", mininterval=1.0)
    for chunk in chunks:
        acc.add(chunk)
    return acc.result(report.lines, report.malformed)


def _cmd_list(args: argparse.Namespace) -> int:
    man = load_manifest(args.manifest)
    for e in man.entries.values():
        try:
            where = "available: " + ", ".join(str(p) for p in locate(e))
        except TraceError:
            where = "not present (fetch it)"
        tag = "bundled" if e.bundled else "external"
        print(f"{e.name:24s} {tag:8s} {e.format:8s} {e.title}\n{'':24s} {where}")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    man = load_manifest(args.manifest)
    fmt: LogFormat | str | None = args.format
    ref: dict[str, Any] = {}
    if len(args.paths) == 1 and args.paths[0] in man and not os.path.exists(args.paths[0]):
        entry = man[args.paths[0]]
        paths: list[str | os.PathLike[str]] = list(locate(entry))
        fmt = fmt or entry.log_format()
        ref = entry.reference
    else:
        paths = list(args.paths)
    st = stats_for_paths(paths, fmt, args.chunk_lines, progress=not args.json)
    if args.json:
        d = {k: (str(v) if isinstance(v, pd.Timestamp) else v) for k, v in st.__dict__.items()}
        print(json.dumps(d, indent=2, default=str))
        return 0
    print("| quantity | value |\n|---|---|")
    for q, v in st.rows():
        print(f"| {q} | {v} |")
    if st.get200 == 0:
        print("\nno GET/200 requests with a size: byte statistics are not computable")
    if ref.get("redundancy"):
        dev = (st.redundancy / ref["redundancy"] - 1) * 100
        print(f"\nreference redundancy {ref['redundancy']} (manifest); measured "
              f"{st.redundancy:.3f} ({dev:+.2f} %)")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    entry = load_manifest(args.manifest)[args.name]
    dest = Path(args.dest) if args.dest else None
    src = args.source
    if src is not None and urllib.parse.urlparse(src).scheme in ("", "file"):
        local = urllib.request.url2pathname(urllib.parse.urlparse(src).path) if src.startswith(
            "file:") else src
        if not os.path.exists(local):
            raise TraceError(f"--from {src}: not found")
    try:
        paths = fetch(entry, src, dest, args.timeout, progress=True)
    except TraceError as exc:
        raise _FetchFailed(str(exc)) from None
    for p in paths:
        print(p)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    man = load_manifest(args.manifest)
    names = args.names or [n for n, e in man.entries.items() if e.bundled]
    bad = 0
    for name in names:
        entry = man[name]
        for tf, path in zip(entry.files, locate(entry), strict=True):
            digest = sha256_file(path)
            ok = tf.sha256 is None or digest == tf.sha256
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {name} {path} {digest}")
    return 1 if bad else 0


def _positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a finite ``kind`` greater than zero (the message names the value)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
        return value
    return parse


class _FetchFailed(Exception):
    """``fetch`` could not obtain a verified copy: a failure at run time (exit status 1)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m testbed.traces`` argument parser."""
    from testbed.cli import program_name  # only the command line needs it

    p = argparse.ArgumentParser(
        prog=program_name("testbed.traces"),
        description="List, fetch, verify and summarise web access-log traces.")
    p.add_argument("--manifest", help="manifest.json to use (default: the bundled one)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", help="list known traces and where they are")
    s.set_defaults(func=_cmd_list)
    s = sub.add_parser("stats", help="print statistics of a trace (a manifest name or files)",
                       description="Requests, GET/200 requests, bytes transferred, unique "
                       "objects and bytes, redundancy. Several files are one trace, in order.")
    s.add_argument("paths", nargs="+", metavar="PATH_OR_NAME")
    s.add_argument("--format", choices=["clf", "epa", "wc98csv", "lpdaac", "sdsc"],
                   help="log format (default: the manifest's, or guessed from the first lines)")
    s.add_argument("--chunk-lines", type=_positive(int), default=200_000,
                   help="lines per parsing chunk (bounds memory; default 200000)")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_stats)
    s = sub.add_parser("fetch", help="obtain a trace, verify its checksum, cache it")
    s.add_argument("name")
    s.add_argument("--from", dest="source", metavar="PATH_OR_URL",
                   help="local file, folder, file:// or http(s)/ftp URL (default: manifest URLs)")
    s.add_argument("--dest", help="folder to store into (default: $TRACES_DIR or the cache)")
    s.add_argument("--timeout", type=_positive(float), default=30.0,
                   help="network timeout in seconds")
    s.set_defaults(func=_cmd_fetch)
    s = sub.add_parser("verify", help="check sha256 of present trace files")
    s.add_argument("names", nargs="*", help="trace names (default: the bundled ones)")
    s.set_defaults(func=_cmd_verify)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status, never shows a traceback.

    Bad input (an unknown trace, a missing or unreadable file, a malformed manifest) is one
    line on stderr, ``python -m testbed.traces: error: ...``, and status 2; a fetch that fails
    at run time (refused connection, checksum mismatch) status 1.
    """
    parser = build_parser()
    args = parser.parse_args(argv)

    def fail(status: int, message: object) -> int:
        lines = [line.strip() for line in str(message).splitlines() if line.strip()]
        text = lines[0] + ("" if len(lines) < 2 else " " + "; ".join(lines[1:])) if lines else ""
        print(f"{parser.prog}: error: {text}", file=sys.stderr)
        return status

    try:
        return int(args.func(args))
    except _FetchFailed as exc:
        return fail(1, exc)
    except (TraceError, ValueError) as exc:
        return fail(2, exc)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        return fail(2, f"{exc.filename}: {exc.strerror}" if exc.filename else exc)
    except OSError as exc:
        return fail(1, exc)
    except KeyboardInterrupt:
        return 130

