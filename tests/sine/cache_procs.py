"""Real caches and a tampering cache for the tree-mode tests (issue 25, "Through real caches").

* :class:`BackgroundOrigin` -- :class:`sine.aio.server.OriginServer` on its own event loop in a
  thread, so one origin (and its :attr:`~sine.origin.Origin.stats`: requests and bytes it
  sent) serves every test of a module while each test runs its own ``asyncio.run``.
* :class:`Nginx` -- an unmodified nginx as a caching reverse proxy (``proxy_cache``), in
  three configurations: plain, with the ``slice`` module (ranges fetched and cached as
  16 KiB slices) and gzip-transcoding (``gzip on; gzip_proxied any; gzip_types *``).  It adds
  ``X-Cache-Status`` and logs ``$upstream_cache_status`` per request.
* Squid comes from :class:`tests.interop.squid_helpers.SquidProcess` (the project's one Squid
  configuration: memory cache, forward proxy).
* :class:`TamperCache` -- a small asyncio HTTP proxy that forwards to a real cache and lets a
  test rewrite each response (status, headers, body) -- what a malicious cache can send.

A missing nginx or Squid fails the test (never a skip).
"""

from __future__ import annotations

import asyncio
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import h11
import pytest

from sine.aio.client import HttpConnection
from sine.aio.server import OriginServer

__all__ = ["free_port", "BackgroundOrigin", "Nginx", "NGINX_VARIANTS", "Exchange",
           "TamperCache"]

STARTUP_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BackgroundOrigin:
    """``OriginServer(docroot)`` listening on :attr:`port`, served by a loop in a thread."""

    def __init__(self, docroot: Path) -> None:
        self.server = OriginServer(docroot)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        ports = asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        self.port = ports[0]
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> int:
        return self.server.stats.http_requests

    @property
    def bytes_sent(self) -> int:
        return self.server.stats.bytes_sent

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


_NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format cache "$request_uri $status $upstream_cache_status $body_bytes_sent";
    access_log {prefix}/access.log cache;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    proxy_cache_path {prefix}/cache levels=1 keys_zone=sine:4m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{origin_port};
            proxy_http_version 1.1;
            proxy_cache sine;
            add_header X-Cache-Status $upstream_cache_status always;
{extra}
        }}
    }}
}}
"""

#: the ``location`` lines of each configuration
NGINX_VARIANTS = {
    "plain": "",
    # ranges: each 16 KiB slice is its own upstream range request and its own cache entry
    "slice": """\
            slice 16k;
            proxy_cache_key $uri$is_args$args$slice_range;
            proxy_set_header Range $slice_range;
            proxy_cache_valid 200 206 1h;""",
    # a transcoding cache: whatever the client accepts gzip for is compressed on the way out
    "gzip": """\
            gzip on;
            gzip_proxied any;
            gzip_types *;
            gzip_min_length 0;""",
}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


class Nginx:
    """An unmodified nginx caching ``origin_port`` on :attr:`url` (``variant`` from
    :data:`NGINX_VARIANTS`); its cache files are under ``prefix/cache``."""

    def __init__(self, prefix: Path, origin_port: int, variant: str = "plain") -> None:
        exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists()
                                        else None)
        if exe is None:
            pytest.fail("nginx is required for this interop test but is not installed "
                        "(apt-get install nginx-light)")
        self.prefix, self.variant = prefix, variant
        prefix.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        user = ""
        if os.geteuid() == 0:  # the worker would switch to a user that cannot read prefix
            user = (f"user {pwd.getpwuid(os.geteuid()).pw_name} "
                    f"{grp.getgrgid(os.getegid()).gr_name};\n")
        conf = prefix / "nginx.conf"
        conf.write_text(_NGINX_CONF.format(user=user, prefix=prefix, port=self.port,
                                           origin_port=origin_port,
                                           extra=NGINX_VARIANTS[variant]))
        log = prefix / "stdout.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen([exe, "-p", str(prefix), "-c", str(conf), "-e",
                                          str(prefix / "error.log")],
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"nginx exited with {self.proc.returncode}: {self._logs()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"nginx did not listen within {STARTUP_TIMEOUT} s: "
                                f"{self._logs()}")
                time.sleep(0.05)

    def _logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in
                         (self.prefix / "stdout.log", self.prefix / "error.log") if p.exists())

    def log(self) -> list[list[str]]:
        """Access-log lines: ``[uri, status, cache status, body bytes]``."""
        path = self.prefix / "access.log"
        return [ln.split() for ln in path.read_text().splitlines()] if path.exists() else []

    def cache_files(self) -> list[Path]:
        return sorted(p for p in (self.prefix / "cache").rglob("*") if p.is_file())

    def stop(self) -> None:
        _stop(self.proc)


@dataclass
class Exchange:
    """One response passing through :class:`TamperCache`; a rewrite may change any field."""

    target: str
    request_headers: dict[str, str]
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    tampered: bool = False

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower().encode():
                return v.decode("latin-1")
        return None


_HOP = {b"content-length", b"transfer-encoding", b"connection", b"keep-alive"}


@dataclass
class TamperCache:
    """An HTTP/1.1 proxy in front of ``upstream`` (a real cache) that hands every response to
    ``rewrite(exchange)``; ``Content-Length`` is recomputed, so the client sees well-formed
    HTTP carrying altered bytes.  Runs on the test's own event loop."""

    upstream: str
    rewrite: Callable[[Exchange], None]
    seen: list[Exchange] = field(default_factory=list)
    _server: asyncio.base_events.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):
                w.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                          ) -> None:
        conn = h11.Connection(h11.SERVER)
        u = urlsplit(self.upstream)
        upstream = HttpConnection(u.hostname or "127.0.0.1", u.port or 80)
        self._writers.add(writer)
        request: h11.Request | None = None
        try:
            for _ in range(10_000):
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    await self._forward(conn, writer, upstream, request)
                    conn.start_next_cycle()
                    request = None
                else:
                    break
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            await upstream.close()
            writer.close()

    async def _forward(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                       upstream: HttpConnection, req: h11.Request) -> None:
        headers = [(k.decode(), v.decode("latin-1")) for k, v in req.headers
                   if k not in (b"connection",)]
        resp, body = await upstream.request(req.target.decode(), headers)
        ex = Exchange(req.target.decode(), {k.lower(): v for k, v in headers},
                      resp.status_code, [(k, v) for k, v in resp.headers if k.lower() not in _HOP],
                      b"".join([chunk async for chunk in body]))
        self.rewrite(ex)
        self.seen.append(ex)
        out = [*ex.headers, (b"Content-Length", str(len(ex.body)).encode())]
        writer.write(conn.send(h11.Response(status_code=ex.status, headers=out)))
        writer.write(conn.send(h11.Data(data=ex.body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
