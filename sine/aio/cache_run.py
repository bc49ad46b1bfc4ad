"""An unmodified nginx ``proxy_cache`` in the middle node of a link testbed, as a warm cache.

The measured Figures 4-6 use Squid (:class:`testbed.linux.linkruns.SquidRun`), whose project
configuration keeps objects of at most 16 MB in memory.  The chain-vs-tree ranges need objects
of 64 MiB to 1 GB kept whole and served as ``206`` for any range, so they use nginx as a
caching reverse proxy (the same unmodified program and the same ``proxy_cache`` the loopback
tests use, ``tests/sine/cache_procs.py``) with its cache on disk::

    client ──► nginx on the middle's client-side address:PORT ──► origin:ORIGIN_PORT

What nginx does here, all default behaviour: a miss is fetched whole from the origin (no
``Range`` upstream) and kept, variants by ``Vary: Accept-Encoding`` (plain, ``sine``,
``mi-sha256-03``) side by side; a hit is served from the cache file, a ``Range`` of it as a
``206``.  ``X-Cache-Status`` on every response says which (``HIT``, ``MISS``); the access log
has one line per request: ``uri status cache-status bytes-sent range`` (:meth:`NginxRun.log`),
bytes sent being what nginx wrote to the client's connection, head included.

``with NginxRun(tb, origin_port=8080) as cache:`` starts it and waits until its worker runs;
leaving the block stops it and removes its directory (the testbed's teardown would kill it
anyway).  A missing nginx raises :class:`testbed.linux.linkruns.ProgramFailed` saying what to
install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from testbed.linux.linkruns import ProgramFailed
from testbed.linux.linktestbed import ADDRESSES, LinkTestbed

__all__ = ["NginxRun", "nginx_binary"]

_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log notice;
events {{ worker_connections 256; }}
http {{
    log_format ranges "$request_uri $status $upstream_cache_status $bytes_sent $http_range";
    access_log {prefix}/access.log ranges;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    proxy_cache_path {prefix}/cache levels=1:2 keys_zone=ranges:8m inactive=7d use_temp_path=off;
    sendfile on;
    server {{
        listen {listen}:{port};
        location / {{
            proxy_pass http://{origin}:{origin_port};
            proxy_http_version 1.1;
            proxy_cache ranges;
            proxy_read_timeout 900s;
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    """Path of the nginx executable; :class:`ProgramFailed` naming the package when absent."""
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                     else None)
    if path is None:
        raise ProgramFailed("nginx is not installed: the measured ranges need a real cache "
                            "(Debian package 'nginx-light')")
    return path


class NginxRun:
    """nginx caching ``origin_port`` of the origin node, listening on the middle's client-side
    address :attr:`port` (see the module docstring); logs and cache in a fresh directory."""

    def __init__(self, tb: LinkTestbed, origin_port: int, port: int = 8080,
                 startup_timeout: float = 30.0) -> None:
        self.tb, self.origin_port, self.port = tb, origin_port, port
        self.startup_timeout = startup_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="wstb-nginx-"))
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        """``http://<middle>:<port>``: the origin URL a client in the client node uses."""
        return f"http://{ADDRESSES['middle']}:{self.port}"

    def _config(self) -> Path:
        user = ""
        if os.geteuid() == 0:  # workers keep root's identity: the cache directory is root's
            user = "user root root;\n"
        conf = self.dir / "nginx.conf"
        conf.write_text(_CONF.format(user=user, prefix=self.dir, listen=ADDRESSES["middle"],
                                     port=self.port, origin=ADDRESSES["origin"],
                                     origin_port=self.origin_port))
        return conf

    def start(self) -> NginxRun:
        """Start nginx in the middle node; return once its worker process has started."""
        conf, log = self._config(), self.dir / "error.log"
        with open(self.dir / "stdout.log", "w") as out:
            self.proc = self.tb.popen("middle", [nginx_binary(), "-p", str(self.dir), "-c",
                                                 str(conf), "-e", str(log)],
                                      stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if log.exists() and "start worker process" in log.read_text(errors="replace"):
                return self
            time.sleep(0.05)
        text = " | ".join(p.read_text(errors="replace").strip()[-600:]
                          for p in (self.dir / "stdout.log", log) if p.exists())
        self.stop()
        raise ProgramFailed(f"nginx did not start in the middle node: {text or 'no output'}")

    def log(self) -> list[list[str]]:
        """Access-log lines so far: ``[uri, status, cache status, bytes sent, range]``."""
        path = self.dir / "access.log"
        if not path.exists():
            return []
        return [ln.split(" ", 4) for ln in path.read_text().splitlines()]

    def stop(self) -> None:
        """Stop nginx (SIGTERM, then SIGKILL) and remove its directory and cache."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> NginxRun:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
