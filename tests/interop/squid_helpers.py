"""Start a private, unmodified Squid on loopback for interop tests.

:class:`SquidProcess` runs :func:`testbed.linux.linkruns.start_squid` -- the project's one Squid
configuration and starter, the same the link testbed's :class:`testbed.linux.linkruns.SquidRun` uses
in its middle namespace -- on this host: listening on a free loopback port, serving loopback
clients only, memory cache, pid file and logs in a temporary directory. It waits until Squid
accepts connections and stops it on exit. When the tests run as root (CI) Squid drops
privileges to the ``proxy`` user, which is handed the directory for its logs.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from testbed.linux.linkruns import squid_binary, start_squid, stop_squid

__all__ = ["SquidProcess", "free_port", "squid_binary"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SquidProcess:
    """``with SquidProcess(tmp) as squid:`` -- a running Squid on ``squid.port``.

    Failing to start raises :class:`testbed.linux.linkruns.ProgramFailed` (a ``RuntimeError``) with
    the end of Squid's logs; no Squid installed raises it naming the package to install."""

    def __init__(self, workdir: Path | None = None, startup_timeout: float = 20.0) -> None:
        # Squid drops privileges when started as root, so its directory must be reachable by
        # that user: pytest's per-user tmp tree (mode 0700) is not; a fresh dir in /tmp is.
        self._own_dir = workdir is None
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sine-squid-"))
        self.port = free_port()
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    def start(self) -> None:
        try:
            self.proc = start_squid(self.dir, "127.0.0.1", self.port, "127.0.0.1/32",
                                    startup_timeout=self.startup_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            stop_squid(self.proc)
            self.proc = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def access_entries(self, min_lines: int = 0, timeout: float = 5.0) -> list[dict[str, str]]:
        """Parsed access-log lines (native format), waiting up to ``timeout`` for ``min_lines``."""
        deadline = time.monotonic() + timeout
        while True:
            lines = []
            if self.access_log.exists():
                lines = [ln.split() for ln in self.access_log.read_text().splitlines() if ln]
            if len(lines) >= min_lines or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return [
            {"code": f[3].split("/")[0], "status": f[3].split("/")[-1], "bytes": f[4],
             "method": f[5], "url": f[6], "hierarchy": f[8]}
            for f in lines if len(f) >= 9 and not f[3].startswith("NONE")
        ]

    def __enter__(self) -> SquidProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
