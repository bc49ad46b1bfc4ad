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
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 30.0

__all__ = [
    "REPO",
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
]


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
    tls12.https_server --port 0`` prints ``listening on https://HOST:PORT``,
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
    """The command line of ``python -m tls12.https_server`` on a port of its choosing, quiet."""
    return [
        sys.executable, "-m", "tls12.https_server", "--root", str(root), "--port", "0",
        "--cert", str(cert), "--key", str(key), "--ciphers", ciphers, "--quiet", *extra,
    ]  # fmt: skip
