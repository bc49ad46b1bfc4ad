"""A closed-loop HTTP/HTTPS load generator in the manner of ``http_load`` (the paper's tool).

Each client is a thread that, until the time is up, opens a **new connection per request**
(``http_load`` does not keep connections alive), sends ``GET`` and reads the whole response, then
immediately starts the next one. Per fetch it records, like ``http_load``:

* **connect time**: TCP connect plus, for ``https://``, the TLS handshake (Python ``ssl``,
  i.e. OpenSSL, an unmodified client) -- the paper's definition; the TCP part alone is kept
  too (``tcp_s``), since the paper's sub-millisecond HTTPS connect times look like TCP only;
* **request time**: from the established connection to the last byte of the response.

:func:`keepalive_loop` is the other setting: each client keeps one connection alive and sends
its requests on it one after another (a handshake only when a connection is first opened).

Requests per second is the number of complete, correct fetches (status 200, body length equal to
``Content-Length``) divided by the wall time. A *mix* (Figure 4's e-commerce workload: 92 % HTTP,
8 % HTTPS) draws each request's URL at random with the given weights, one seeded
``random.Random`` per client thread.

Command line (prints one JSON object)::

    python -m webalps_sim.load https://127.0.0.1:8443/2k.bin --seconds 2 --cafile ca.pem
    python -m webalps_sim.load http://127.0.0.1:8080/2k.bin=0.92 https://127.0.0.1:8443/2k.bin=0.08 \\
        --clients 24 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from testbed import cli

from ..errors import WebAlpsError

__all__ = ["Fetch", "FetchError", "LoadResult", "client_context", "closed_loop", "fetch_once",
           "keepalive_loop"]

#: The suite the WebALPS delegate supports (RSA key exchange, CBC, MAC-then-encrypt).
DEFAULT_CIPHERS = "AES128-SHA"


class FetchError(WebAlpsError):
    """A fetch that did not produce a complete 200 response."""


@dataclass(frozen=True, slots=True)
class Fetch:
    """One request on its own connection."""

    url: str
    start: float
    connect_s: float
    request_s: float
    nbytes: int
    tcp_s: float = 0.0


@dataclass
class LoadResult:
    """What one closed-loop run measured."""

    seconds: float
    clients: int
    fetches: list[Fetch] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.fetches)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def mean_ms(self, attr: str, scheme: str | None = None) -> float:
        values = [getattr(f, attr) for f in self.fetches
                  if scheme is None or f.url.startswith(scheme + ":")]
        return statistics.fmean(values) * 1e3 if values else float("nan")

    def summary(self) -> dict[str, float | int]:
        """Requests/s, mean connect and request time (ms), counts: the ``http_load`` summary."""
        return {
            "seconds": round(self.seconds, 3), "clients": self.clients,
            "requests": self.requests, "errors": len(self.errors), "rps": self.rps,
            "connect_ms": self.mean_ms("connect_s"), "request_ms": self.mean_ms("request_s"),
            "tcp_ms": self.mean_ms("tcp_s"),
            "https_requests": sum(1 for f in self.fetches if f.url.startswith("https:")),
        }


def client_context(cafile: str | None = None, ciphers: str = DEFAULT_CIPHERS) -> ssl.SSLContext:
    """A TLS 1.2 client context: verifies against ``cafile`` if given, else does not verify
    (a load generator measuring speed, not a browser); one session per connection (no reuse)."""
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl.SSLContext(
        ssl.PROTOCOL_TLS_CLIENT)
    if not cafile:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    return ctx


def _read_response(sock: socket.socket | ssl.SSLSocket) -> int:
    """Read one ``Connection: close`` response; returns the body length, checks the status."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise FetchError("connection closed before the response head")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or parts[1] != b"200":
        raise FetchError(f"status line {lines[0][:80]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    received = len(body)
    while length is None or received < length:
        try:
            chunk = sock.recv(65536)
        except ssl.SSLEOFError:
            chunk = b""
        if not chunk:
            if length is None:
                return received
            raise FetchError(f"body truncated at {received} of {length} bytes")
        received += len(chunk)
    if received != length:
        raise FetchError(f"body of {received} bytes, Content-Length {length}")
    return received


def fetch_once(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 30.0) -> Fetch:
    """GET ``url`` on a fresh connection; :class:`FetchError` or ``OSError`` if it fails."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    start = time.perf_counter()
    sock: socket.socket | ssl.SSLSocket = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tcp = time.perf_counter()
        if parts.scheme == "https":
            sock = (ctx or client_context()).wrap_socket(sock, server_hostname=host)
        connected = time.perf_counter()
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
                     "User-Agent: webalps-load\r\n\r\n".encode())
        nbytes = _read_response(sock)
        done = time.perf_counter()
    finally:
        sock.close()
    return Fetch(url, start, connected - start, done - connected, nbytes, tcp - start)


def _parse_mix(urls: str | Sequence[str | tuple[str, float]]) -> list[tuple[str, float]]:
    items = [urls] if isinstance(urls, str) else list(urls)
    mix = []
    for item in items:
        if isinstance(item, tuple):
            mix.append((item[0], float(item[1])))
        else:
            url, sep, weight = item.rpartition("=")
            mix.append((url, float(weight)) if sep and url.count("://") == 1
                       and weight.replace(".", "", 1).isdigit() else (item, 1.0))
    if not mix or any(w <= 0 for _, w in mix):
        raise ValueError("give at least one URL, every weight positive")
    return mix


def closed_loop(urls: str | Sequence[str | tuple[str, float]], *, seconds: float = 2.0,
                clients: int = 1, seed: int = 0, cafile: str | None = None,
                ciphers: str = DEFAULT_CIPHERS, timeout: float = 30.0) -> LoadResult:
    """Run ``clients`` closed-loop clients for ``seconds`` against ``urls`` (a URL or a weighted
    mix ``[(url, weight), ...]`` / ``"url=weight"``); requests still running at the deadline are
    finished and counted only if they *started* before it."""
    if seconds <= 0 or clients < 1:
        raise ValueError("seconds must be positive and clients at least 1")
    mix = _parse_mix(urls)
    targets, weights = [u for u, _ in mix], [w for _, w in mix]
    ctx = client_context(cafile, ciphers)
    result = LoadResult(seconds=seconds, clients=clients)
    lock = threading.Lock()
    begin = time.perf_counter()
    deadline = begin + seconds

    def client(number: int) -> None:
        rng = random.Random(seed * 1000 + number)
        while time.perf_counter() < deadline:
            url = rng.choices(targets, weights)[0]
            try:
                fetch = fetch_once(url, ctx, timeout)
            except (OSError, FetchError) as exc:
                with lock:
                    result.errors.append(f"{url}: {type(exc).__name__}: {exc}")
                time.sleep(0.01)
                continue
            with lock:
                result.fetches.append(fetch)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = max(time.perf_counter() - begin, seconds)
    return result


def _keepalive_client(url: str, ctx: ssl.SSLContext, deadline: float, timeout: float,
                      result: LoadResult, lock: threading.Lock) -> None:
    """One keep-alive client: one connection (re-opened after an error) carrying ``GET`` after
    ``GET`` until ``deadline``; each fetch's ``connect_s`` is the handshake it waited for (0 on
    a reused connection)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    request = f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: webalps-load\r\n\r\n"
    sock: socket.socket | ssl.SSLSocket | None = None
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        try:
            if sock is None:
                sock = socket.create_connection((host, port), timeout=timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if parts.scheme == "https":
                    sock = ctx.wrap_socket(sock, server_hostname=host)
            connected = time.perf_counter()
            sock.sendall(request.encode())
            nbytes = _read_response(sock)
        except (OSError, FetchError) as exc:
            with lock:
                result.errors.append(f"{url}: {type(exc).__name__}: {exc}")
            if sock is not None:
                sock.close()
            sock = None
            time.sleep(0.01)
            continue
        done = time.perf_counter()
        with lock:
            result.fetches.append(Fetch(url, start, connected - start, done - connected, nbytes))
    if sock is not None:
        sock.close()


def keepalive_loop(url: str, *, seconds: float = 2.0, clients: int = 1, cafile: str | None = None,
                   ciphers: str = DEFAULT_CIPHERS, timeout: float = 30.0) -> LoadResult:
    """Like :func:`closed_loop`, but each of the ``clients`` keeps **one** connection alive and
    sends its requests on it one after another (HTTP/1.1 keep-alive, no pipelining): the
    record-layer cost of a request without a handshake per request."""
    if seconds <= 0 or clients < 1:
        raise ValueError("seconds must be positive and clients at least 1")
    ctx = client_context(cafile, ciphers)
    result = LoadResult(seconds=seconds, clients=clients)
    lock = threading.Lock()
    begin = time.perf_counter()
    threads = [threading.Thread(target=_keepalive_client, daemon=True,
                                args=(url, ctx, begin + seconds, timeout, result, lock))
               for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = max(time.perf_counter() - begin, seconds)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=cli.program_name("webalps_sim.load"),
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+", help="URL or URL=weight (a weighted mix)")
    parser.add_argument("--seconds", type=cli.positive_float, default=2.0,
                        help="how long the clients run (default 2)")
    parser.add_argument("--clients", type=cli.positive_int, default=1,
                        help="concurrent closed-loop clients (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="of the URL choices (default 0)")
    parser.add_argument("--cafile", help="verify the server chain against this CA (PEM)")
    parser.add_argument("--ciphers", default=DEFAULT_CIPHERS,
                        help="OpenSSL cipher list (default %(default)s)")

    def body(args: argparse.Namespace) -> int:
        # the command line is checked before the first request: one line naming the option
        try:
            mix = _parse_mix(args.urls)
        except ValueError as exc:
            raise cli.UsageError(str(exc)) from None
        for url, _ in mix:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise cli.UsageError(f"url {url!r}: expected http:// or https://HOST[:PORT]/PATH")
            try:
                parts.port  # noqa: B018 -- raises ValueError for a port out of range
            except ValueError as exc:
                raise cli.UsageError(f"url {url!r}: bad port ({exc})") from None
        if args.cafile:
            kind = cli.pem_kind(cli.read_file_arg("--cafile", args.cafile))
            if kind != "a certificate":
                raise cli.UsageError(f"--cafile {args.cafile}: expected a PEM certificate, "
                                     f"got {kind}")
        try:
            client_context(args.cafile, args.ciphers)
        except ssl.SSLError as exc:
            reason = exc.args[-1] if exc.args else exc  # set_ciphers: ('No cipher ...',)
            raise cli.UsageError(f"--ciphers {args.ciphers!r} / --cafile: {reason}") from None
        result = closed_loop(mix, seconds=args.seconds, clients=args.clients, seed=args.seed,
                             cafile=args.cafile, ciphers=args.ciphers)
        print(json.dumps({**result.summary(), "first_errors": result.errors[:3]}))
        if not result.requests:
            first = result.errors[0] if result.errors else "no error recorded"
            raise cli.CLIError(f"no request completed in {args.seconds:g} s; first error: {first}")
        return 0

    return cli.run_main(parser, body, argv)

