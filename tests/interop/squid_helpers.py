"""Start a private, unmodified Squid on loopback for interop tests.

:class:`SquidProcess` writes a minimal ``squid.conf`` into a temporary directory (memory cache
only, own pid file, access and cache logs, a free loopback port), runs ``squid -N -f conf`` in
the foreground as a subprocess, waits until it accepts connections and stops it on exit.  When
the tests run as root (CI) Squid drops privileges to ``cache_effective_user``; the directory is
handed to that user so it can write its logs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["SQUID", "SquidProcess", "free_port", "squid_binary"]

SQUID = os.environ.get("SQUID", "/usr/sbin/squid")


def squid_binary() -> str:
    """Path of the squid executable; raises a clear error when it is not installed."""
    path = SQUID if os.path.exists(SQUID) else shutil.which("squid")
    if not path:
        raise RuntimeError(
            "squid is not installed: these interop tests need a real Squid "
            "(Debian package 'squid'; .ci/run installs it)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_CONF = """\
http_port 127.0.0.1:{port}
pid_filename {dir}/squid.pid
access_log stdio:{dir}/access.log squid
cache_log {dir}/cache.log
cache_store_log none
coredump_dir {dir}
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
buffered_logs off
cache_mem 64 MB
maximum_object_size_in_memory 16 MB
maximum_object_size 16 MB
acl localnet src 127.0.0.1/32
http_access allow localnet
http_access deny all
dns_nameservers 127.0.0.1
refresh_pattern . 0 20% 4320
via on
forwarded_for delete
{user}
"""


class SquidProcess:
    """``with SquidProcess(tmp) as squid:`` -- a running Squid on ``squid.port``."""

    def __init__(self, workdir: Path | None = None, startup_timeout: float = 20.0) -> None:
        # Squid drops privileges when started as root, so its directory must be reachable by
        # that user: pytest's per-user tmp tree (mode 0700) is not; a fresh dir in /tmp is.
        self._own_dir = workdir is None
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sine-squid-"))
        self.port = free_port()
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    def _config(self) -> str:
        user = ""
        if os.geteuid() == 0:
            user = "cache_effective_user proxy"
            pw = pwd.getpwnam("proxy")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        return _CONF.format(port=self.port, dir=self.dir, user=user)

    def start(self) -> None:
        binary = squid_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o777)
        conf = self.dir / "squid.conf"
        conf.write_text(self._config())
        with open(self.dir / "stderr.log", "wb") as stderr:
            self.proc = subprocess.Popen(
                [binary, "-N", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, logs = self.proc.returncode, self._logs()
                self.stop()
                raise RuntimeError(f"squid exited with {code}: {logs}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        logs = self._logs()
        self.stop()
        raise RuntimeError(f"squid did not listen on {self.port}: {logs}")

    def _logs(self) -> str:
        out = []
        for name in ("stderr.log", "cache.log"):
            p = self.dir / name
            if p.exists():
                out.append(p.read_text(errors="replace")[-2000:])
        return "\n".join(out)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
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
