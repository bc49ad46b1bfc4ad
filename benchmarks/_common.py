"""What the benchmarks share: checking their references, running servers, reading CPU time.

Every benchmark prints its figures as a ratio against a reference measured in
the same run (``openssl speed``, ``openssl s_server``, nginx, curl) and most of
them measure the C record extension.  A run without the reference or the
extension would print numbers nobody can compare, so it stops before
measuring anything, with one line naming what is missing and exit status 1::

    bench_record: openssl not found on PATH; install openssl

:func:`require_tools` and :func:`require_c_extension` do that check;
:func:`fail` is the one way out.  The rest runs server processes (own process
group, a port chosen by the server itself or a free one, killed at the end)
and reads a process tree's CPU time from Linux ``/proc`` -- how the
benchmarks measure *server* cost independently of the load generator.

**Repeats.**  One run of a benchmark on a shared machine is one draw from a
noisy distribution: the same ratio can read 1.44 in one run and 1.60 in the
next.  So every ratio a benchmark reports is measured ``--repeats`` times
(default and README minimum :data:`MIN_REPEATS` = 5), candidate and
reference *interleaved* -- A B A B ... -- so that a burst of background load
hits both sides of a pair rather than all of one side.  :func:`rounds` runs
the interleaving, :func:`interleaved` pairs one candidate with its reference,
and :class:`Repeated` summarises a figure's repeats as median, min, max and
n, in one JSON shape every benchmark writes::

    {"median": 1.47, "min": 1.38, "max": 1.60, "n": 5, "repeats": [1.44, ...]}

A ratio's repeats are the per-pair ratios (repeat *i* of the candidate over
repeat *i* of the reference), not the ratio of two medians; a target is met
only when the *median* meets it.  Printed, a figure reads
``1.47 (1.38–1.60, n=5)``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 30.0

MIN_REPEATS = 5
"""Repeats below which a figure may not go into the README (``--repeats`` may be smaller for tests)."""

__all__ = [
    "REPO",
    "MIN_REPEATS",
    "Repeated",
    "Interleaved",
    "rounds",
    "interleaved",
    "add_repeats_option",
    "write_json",
    "fail",
    "require_tools",
    "require_c_extension",
    "repo_env",
    "free_port",
    "wait_for_port",
    "kill_group",
    "tree_cpu_seconds",
    "start_and_read_port",
    "tls12_server",
    "workers_that_ran",
]


@dataclass(frozen=True)
class Repeated:
    """One figure measured ``n`` times: the repeats in run order, and their median, min and max.

    >>> r = Repeated.of([3.0, 1.0, 2.0])
    >>> (r.median, r.min, r.max, r.n)
    (2.0, 1.0, 3.0, 3)
    >>> r.text(".1f")
    '2.0 (1.0–3.0, n=3)'

    With an even ``n`` the median is the mean of the two middle repeats.
    Built only through :meth:`of`, which refuses an empty list or a NaN
    (:class:`ValueError`): a figure of no repeats has no median.
    """

    repeats: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Repeated:
        """The summary of ``values`` (at least one, none NaN; ``inf`` is kept, e.g. a zero rate's ratio)."""
        vals = tuple(float(v) for v in values)
        if not vals:
            raise ValueError("a repeated figure needs at least one repeat")
        if any(math.isnan(v) for v in vals):
            raise ValueError(f"a repeat is NaN: {vals}")
        return cls(vals)

    @property
    def n(self) -> int:
        return len(self.repeats)

    @property
    def median(self) -> float:
        return float(statistics.median(self.repeats))

    @property
    def min(self) -> float:
        return min(self.repeats)

    @property
    def max(self) -> float:
        return max(self.repeats)

    def map(self, fn: Callable[[float], float]) -> Repeated:
        """The same repeats through ``fn`` (a unit change: s -> ms, rate -> time)."""
        return Repeated.of(fn(v) for v in self.repeats)

    def over(self, other: Repeated) -> Repeated:
        """Per-repeat ratio ``self[i] / other[i]`` (the pairs of an interleaved run); ``inf`` for a zero."""
        if other.n != self.n:
            raise ValueError(f"cannot pair {self.n} repeats with {other.n}")
        return Repeated.of(a / b if b else math.inf for a, b in zip(self.repeats, other.repeats, strict=True))

    def text(self, spec: str = ".2f") -> str:
        """``median (min–max, n=N)``, each formatted with ``spec``."""
        return f"{self.median:{spec}} ({self.min:{spec}}–{self.max:{spec}}, n={self.n})"

    def to_json(self) -> dict[str, Any]:
        """The one JSON shape of a repeated figure: ``{"median", "min", "max", "n", "repeats"}``."""
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n,
                "repeats": list(self.repeats)}  # fmt: skip


@dataclass(frozen=True)
class Interleaved:
    """A candidate and its reference measured in interleaved pairs, and the per-pair ratio."""

    candidate: Repeated
    reference: Repeated
    ratio: Repeated

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_json(), "reference": self.reference.to_json(),
                "ratio": self.ratio.to_json()}  # fmt: skip


def rounds(steps: Mapping[str, Callable[[], T]], repeats: int = MIN_REPEATS) -> dict[str, list[T]]:
    """Run every step once per round, in the mapping's order, ``repeats`` rounds: A B A B ...

    Returns each step's results in run order.  Interleaving is the point: a
    slow minute on a shared machine lands on one *round* (both sides of a
    ratio) instead of on every repeat of one side.

    >>> log = []
    >>> rounds({"a": lambda: log.append("a") or 1, "b": lambda: log.append("b") or 2}, 2)
    {'a': [1, 1], 'b': [2, 2]}
    >>> log
    ['a', 'b', 'a', 'b']
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if not steps:
        raise ValueError("rounds of no steps")
    out: dict[str, list[T]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            out[name].append(step())
    return out


def interleaved(candidate: Callable[[], float], reference: Callable[[], float],
                repeats: int = MIN_REPEATS) -> Interleaved:
    """Measure ``candidate`` and ``reference`` in ``repeats`` pairs (candidate first) and their ratio.

    Each callable returns one figure (a rate, a time); the ratio's repeat *i*
    is candidate *i* / reference *i*.  ``repeats`` < 1 is a :class:`ValueError`.
    """
    got = rounds({"candidate": candidate, "reference": reference}, repeats)
    cand, ref = Repeated.of(got["candidate"]), Repeated.of(got["reference"])
    return Interleaved(cand, ref, cand.over(ref))


def add_repeats_option(parser: argparse.ArgumentParser, default: int = MIN_REPEATS) -> None:
    """``--repeats N``: interleaved repeats per figure (the README needs >= :data:`MIN_REPEATS`)."""

    def positive(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
        return n

    parser.add_argument(
        "--repeats", type=positive, default=default, metavar="N",
        help=f"interleaved repeats of candidate and reference per figure (default {default}; the README "
             f"reads only JSON with >= {MIN_REPEATS}, which it shows as median and min-max)",
    )  # fmt: skip


def write_json(path: Path, data: Mapping[str, Any], *, repeats: int, wall_s: float) -> None:
    """Write a benchmark's JSON with its top-level ``"repeats"`` and ``"wall_s"`` (whole run, measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**data, "repeats": repeats, "wall_s": wall_s}, indent=2) + "\n")


def workers_that_ran(bench: str, table: Any, expected: int) -> int:
    """How many distinct Dask workers ran points of a sweep's ``table``; :func:`fail` unless ``expected``.

    :func:`testbed.sweep.sweep` reads each point's worker inside the task
    (``table.attrs["run"]["sweep"]["ran_on"]``), so a speedup "on 2 workers" is only reported
    when two workers really computed points -- not when the sweep silently ran in one process.
    """
    ran = table.attrs.get("run", {}).get("sweep", {}).get("ran_on", [])
    if len(ran) != expected:
        fail(bench, f"expected points on {expected} Dask worker(s), but they ran on {ran or 'none'}")
    return len(ran)


def timed(fn):  # type: ignore[no-untyped-def]
    """``(fn(), wall seconds it took)``."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def fail(bench: str, message: str) -> NoReturn:
    """Stop the benchmark: print ``bench: message`` on stderr and exit with status 1."""
    raise SystemExit(f"{bench}: {message}")


def require_tools(bench: str, tools: dict[str, str]) -> dict[str, str]:
    """Paths of the executables ``{name: Debian package}`` on ``PATH``; :func:`fail` naming every missing one."""
    found = {name: shutil.which(name) for name in tools}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        names = ", ".join(missing)
        packages = " ".join(dict.fromkeys(tools[name] for name in missing))
        fail(bench, f"{names} not found on PATH; install {packages} (apt-get install {packages})")
    return {name: str(path) for name, path in found.items()}


def require_c_extension(bench: str) -> None:
    """:func:`fail` unless :mod:`tls12` seals records with its C extension (``tls12._recordcrypto``).

    Servers started by a benchmark inherit the environment, so this also
    covers them: with ``TLS12_PURE_PYTHON=1`` they would run the Python twin.
    """
    from tls12 import recordcrypto

    if recordcrypto.CRecordCipher is None:
        fail(bench, "the C extension tls12._recordcrypto is not built; run make build")
    if recordcrypto.BACKEND != "c":
        fail(bench, "TLS12_PURE_PYTHON is set, so tls12 would not use its C extension; unset it")


def repo_env() -> dict[str, str]:
    """The environment with the repository on ``PYTHONPATH`` (for ``python -m`` of its packages)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (for servers that cannot pick one themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until something accepts TCP connections on ``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout} s")


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), SIGKILL if it lingers."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        kids += [int(k) for k in task.read_text().split()]
    return kids


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and its descendants (Linux ``/proc``), or None."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    todo = [pid]
    try:
        while todo:
            p = todo.pop()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
            todo += _children(p)
    except (OSError, IndexError, ValueError):
        return None
    return total / ticks


@contextmanager
def start_and_read_port(
    cmd: Sequence[str], pattern: str, *, env: dict[str, str] | None = None, cwd: Path | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> Iterator[tuple[int, int]]:
    """Start ``cmd`` in its own session and read its port from the first output line matching ``pattern``.

    ``pattern`` is a regular expression whose group 1 is the port (``python -m
    testbed.https_server --port 0`` prints ``listening on https://HOST:PORT``,
    ``openssl s_server -accept 127.0.0.1:0`` prints ``ACCEPT 127.0.0.1:PORT``).
    Yields ``(port, pid)``; the process group is killed on exit.  A thread
    keeps reading the output (stdout and stderr) so that the server never
    blocks on a full pipe; the last lines appear in the error if it fails to start.
    """
    proc = subprocess.Popen(
        list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=env, cwd=cwd, start_new_session=True,
    )
    lines: deque[str] = deque(maxlen=20)
    found: list[int] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("latin-1").rstrip()
            lines.append(line)
            if not found and (m := re.search(pattern, line)):
                found.append(int(m.group(1)))
                ready.set()
        ready.set()  # EOF: the process is gone

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        if not ready.wait(timeout):
            raise TimeoutError(f"{cmd[0]} printed no port within {timeout} s: {list(lines)[-5:]}")
        if not found:
            raise RuntimeError(f"{' '.join(cmd[:3])} exited ({proc.wait()}) before listening: {list(lines)[-5:]}")
        yield found[0], proc.pid
    finally:
        kill_group(proc)
        thread.join(5)


def tls12_server(root: Path, cert: Path, key: Path, ciphers: str, *extra: str) -> list[str]:
    """The command line of ``python -m testbed.https_server`` on a port of its choosing, quiet."""
    return [
        sys.executable, "-m", "testbed.https_server", "--root", str(root), "--port", "0",
        "--cert", str(cert), "--key", str(key), "--ciphers", ciphers, "--quiet", *extra,
    ]  # fmt: skip
