"""The SINE origin server: asyncio + h11, serving a signed document root.

Routes (both listeners unless noted):

``GET /path`` with ``Accept-Encoding: sine``
    the interleaved stream (``Content-Encoding: sine``, ``Vary: Accept-Encoding``);
``GET /path`` otherwise
    the plain document, with ``Link: </.sine/at/path>; rel="sine-at"``;
``GET /.sine/at/path``
    the separate tag (``application/sine-at``);
``GET /.sine/public.pem``
    the public key (clients should pin it out of band);
``GET /.sine/sign/path`` -- TLS listener only (SINEB)
    ``AT_sign`` of one document, hex, ``Cache-Control: no-store``;
``GET /.sine/collect?path=/a&path=/b`` -- TLS listener only (SINEB ``AT_collect``)
    lines ``<hex AT_sign> <path>`` for the listed paths (all documents if none listed).

Everything a cache may keep carries ``Cache-Control: public, max-age=<E - now>`` and an
``ETag`` derived from ``AT_sign``, so standard HTTP caches (Squid) store and revalidate it and
never serve it past the tag's expiry.  The server never serves ``.sine/tags`` and answers 503 for
a document modified after it was signed.  ``python -m sine.server --help`` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import itertools
import mimetypes
import ssl
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import h11

from testbed import cli

from .format import SeparateTag, push_separate_tag
from .site import STORE_DIR, canonical_path, load_signed, signed_from_separate, tag_file
from .tag import encode_stream, stream_length

__all__ = ["OriginServer", "ServerStats", "make_self_signed", "build_parser", "main"]


@dataclass
class ServerStats:
    """Counters the experiments read (requests by listener and route, bytes sent)."""

    http_requests: int = 0
    tls_requests: int = 0
    tls_connections: int = 0
    bytes_sent: int = 0
    routes: dict[str, int] = field(default_factory=dict)


class OriginServer:
    """Serve ``docroot`` (signed by :mod:`sine.sign`) over HTTP and, optionally, HTTPS."""

    def __init__(self, docroot: Path | str, clock: Callable[[], float] = time.time) -> None:
        self.docroot = Path(docroot).resolve()
        self.clock = clock
        self.stats = ServerStats()
        self._servers: list[asyncio.base_events.Server] = []
        self._cache: dict[str, tuple[float, SeparateTag]] = {}
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None,
        tls_port: int = 0,
    ) -> tuple[int, int | None]:
        """Listen; return ``(http_port, tls_port or None)``."""
        http = await asyncio.start_server(
            lambda r, w: self._connection(r, w, False), host, port)
        self._servers.append(http)
        http_port = http.sockets[0].getsockname()[1]
        bound_tls = None
        if tls is not None:
            srv = await asyncio.start_server(
                lambda r, w: self._connection(r, w, True), host, tls_port, ssl=tls)
            self._servers.append(srv)
            bound_tls = srv.sockets[0].getsockname()[1]
        return http_port, bound_tls

    async def close(self) -> None:
        for srv in self._servers:
            srv.close()
        for writer in list(self._writers):
            writer.close()
        for _ in range(100):  # bounded: let connection tasks observe the close
            if not self._writers:
                break
            await asyncio.sleep(0.01)
        for srv in self._servers:
            await srv.wait_closed()
        self._servers.clear()

    # -- connection loop ---------------------------------------------------------------------

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, is_tls: bool
    ) -> None:
        conn = h11.Connection(h11.SERVER)
        if is_tls:
            self.stats.tls_connections += 1
        request: h11.Request | None = None
        self._writers.add(writer)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    await self._respond(conn, writer, request, is_tls)
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        break
                    conn.start_next_cycle()
                    request = None
                elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    break
        except (h11.ProtocolError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass

    async def _respond(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, is_tls: bool
    ) -> None:
        for data in self.respond(conn, req, is_tls):
            writer.write(data)
            await writer.drain()

    def respond(self, conn: h11.Connection, req: h11.Request, is_tls: bool) -> Iterator[bytes]:
        """The bytes of the response to ``req`` on ``conn`` (sans-IO: no socket involved).

        The listener writes them to its socket; a simulation (:mod:`sine.simulate`) puts the
        very same bytes on a simulated TCP connection.  ``stats`` counts them as sent.
        """
        if is_tls:
            self.stats.tls_requests += 1
        else:
            self.stats.http_requests += 1
        status, headers, body = self._route(req, is_tls)
        head = req.method == b"HEAD"
        length = sum(len(c) for c in body) if isinstance(body, list) else body[1]
        etag = dict(headers).get(b"ETag")
        if status == 200 and etag is not None and _matches(req, etag):
            status, length, head = 304, 0, True
            headers = [h for h in headers if h[0] not in (b"Content-Type",)]
        headers = [(b"Server", b"sine-origin"), (b"Date", _http_date(self.clock())),
                   *([] if status == 304 else [(b"Content-Length", str(length).encode())]),
                   *headers]
        chunks = [] if head else body if isinstance(body, list) else body[0]
        events = itertools.chain(
            [h11.Response(status_code=status, headers=headers,
                          reason=HTTPStatus(status).phrase.encode())],
            (h11.Data(data=chunk) for chunk in chunks), [h11.EndOfMessage()])
        for event in events:  # lazily: a large stream is never held in memory at once
            data = conn.send(event)
            if data:
                self.stats.bytes_sent += len(data)
                yield data

    # -- routing (pure apart from reading files) --------------------------------------------

    def _route(self, req: h11.Request, is_tls: bool):  # type: ignore[no-untyped-def]
        if req.method not in (b"GET", b"HEAD"):
            return 405, [(b"Allow", b"GET, HEAD")], [b""]
        target = req.target.decode("ascii", "replace")
        parts = urlsplit(target)
        path = unquote(parts.path) or "/"
        if ".." in path.split("/"):
            return 400, [], [b"bad path\n"]
        route = "document"
        try:
            if path == f"/{STORE_DIR}/public.pem":
                route = "public-key"
                pem = Path(self.docroot, STORE_DIR, "public.pem").read_bytes()
                return 200, [(b"Content-Type", b"application/x-pem-file")], [pem]
            if path.startswith(f"/{STORE_DIR}/at/"):
                route = "at"
                doc = canonical_path(path[len(STORE_DIR) + 4:])
                at = self._tag(doc)
                if at is None:
                    return 404, [], [b"no such tag\n"]
                return 200, self._cache_headers(at, b"application/sine-at", b"at"), [
                    push_separate_tag(at)]
            if path.startswith(f"/{STORE_DIR}/sign/") and is_tls:
                route = "sign"
                at = self._tag(canonical_path(path[len(STORE_DIR) + 6:]))
                if at is None:
                    return 404, [], [b"no such tag\n"]
                return 200, _no_store(), [at.tag.info.at_sign().hex().encode() + b"\n"]
            if path == f"/{STORE_DIR}/collect" and is_tls:
                route = "collect"
                wanted = parse_qs(parts.query).get("path") or self._all_paths()
                lines = []
                for p in wanted:
                    at = self._tag(canonical_path(p))
                    if at is not None:
                        lines.append(f"{at.tag.info.at_sign().hex()} {at.tag.info.path}\n")
                return 200, _no_store(), ["".join(lines).encode()]
            if path.startswith(f"/{STORE_DIR}/"):
                route = "forbidden"
                return 404, [], [b"not found\n"]
            return self._document(req, canonical_path(path))
        finally:
            self.stats.routes[route] = self.stats.routes.get(route, 0) + 1

    def _document(self, req: h11.Request, path: str):  # type: ignore[no-untyped-def]
        file = Path(self.docroot, path.lstrip("/"))
        if not file.is_file():
            return 404, [], [b"not found\n"]
        at = self._tag(path)
        data = file.read_bytes()
        if at is None or len(data) != at.tag.info.content_length or (
            file.stat().st_mtime > tag_file(self.docroot, path).stat().st_mtime
        ):
            return 503, _no_store(), [b"document changed since it was signed; run sine.sign\n"]
        ctype = (mimetypes.guess_type(path)[0] or "application/octet-stream").encode()
        accept = b",".join(v for k, v in req.headers if k == b"accept-encoding")
        wants_sine = b"sine" in [t.split(b";")[0].strip() for t in accept.split(b",")]
        at_link = f"</{STORE_DIR}/at{path}>; rel=\"sine-at\"".encode()
        if wants_sine:
            signed = signed_from_separate(at)
            headers = self._cache_headers(at, ctype, b"sine")
            headers += [(b"Content-Encoding", b"sine"), (b"Vary", b"Accept-Encoding")]
            return 200, headers, (encode_stream(data, signed), stream_length(signed))
        headers = self._cache_headers(at, ctype, b"plain")
        headers += [(b"Vary", b"Accept-Encoding"), (b"Link", at_link)]
        return 200, headers, [data]

    def _cache_headers(self, at: SeparateTag, ctype: bytes, variant: bytes
                       ) -> list[tuple[bytes, bytes]]:
        info = at.tag.info
        max_age = max(0, int(info.expires - self.clock()))
        etag = b'"' + info.at_sign()[:12].hex().encode() + b"-" + variant + b'"'
        return [
            (b"Content-Type", ctype),
            (b"Cache-Control", f"public, max-age={max_age}".encode()),
            (b"ETag", etag),
            (b"Last-Modified", _http_date(info.timestamp)),
        ]

    def _tag(self, path: str) -> SeparateTag | None:
        file = tag_file(self.docroot, path)
        try:
            mtime = file.stat().st_mtime
        except OSError:
            return None
        cached = self._cache.get(path)
        if cached and cached[0] == mtime:
            return cached[1]
        at = load_signed(self.docroot, path)
        if at is not None:
            self._cache[path] = (mtime, at)
        return at

    def _all_paths(self) -> Iterable[str]:
        base = Path(self.docroot, STORE_DIR, "tags")
        return sorted("/" + p.relative_to(base).as_posix()[:-3] for p in base.rglob("*.at"))


def _http_date(when: float) -> bytes:
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%a, %d %b %Y %H:%M:%S GMT").encode()


def _matches(req: h11.Request, etag: bytes) -> bool:
    """``If-None-Match`` lists ``etag`` (or ``*``): answer 304 Not Modified."""
    for name, value in req.headers:
        if name == b"if-none-match":
            tags = [t.strip() for t in value.split(b",")]
            if etag in tags or b"*" in tags or b"W/" + etag in tags:
                return True
    return False


def _no_store() -> list[tuple[bytes, bytes]]:
    return [(b"Content-Type", b"text/plain"), (b"Cache-Control", b"no-store")]


def make_self_signed(host: str = "127.0.0.1", days: int = 30) -> tuple[bytes, bytes]:
    """A self-signed P-256 certificate for ``host`` (IP or DNS SAN): ``(cert_pem, key_pem)``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_tls_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m sine.server`` argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m sine.server",
        description="Serve a document root signed by 'python -m sine.sign' (SINE, SINEB, SINEX).",
    )
    p.add_argument("docroot", type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=cli.port, default=8080, help="HTTP port (default 8080)")
    p.add_argument("--tls-port", type=cli.port, default=8443,
                   help="HTTPS port for SINEB AT_sign (default 8443)")
    p.add_argument("--tls-cert", type=Path, help="PEM certificate (generated if omitted)")
    p.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    p.add_argument("--no-tls", action="store_true", help="HTTP only")
    p.add_argument("--duration", type=cli.non_negative_float, default=0,
                   help="stop after this many seconds (default 0: run until Ctrl-C)")
    return p


def _load_tls(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context for ``cert`` and ``key``, each checked with a message naming it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cli.load_pem_arg("--tls-cert", cert, "certificate", x509.load_pem_x509_certificates)
    cli.load_pem_arg("--tls-key", key, "private key",
                     lambda pem: serialization.load_pem_private_key(pem, password=None))
    try:
        return server_tls_context(cert, key)
    except ssl.SSLError as exc:
        raise cli.UsageError(f"--tls-key {key} does not match --tls-cert {cert} "
                             f"({exc.reason or exc})") from None


def _run(args: argparse.Namespace) -> int:
    docroot: Path = args.docroot
    if not docroot.is_dir():
        raise cli.UsageError(f"{docroot} is not a directory")
    if not Path(docroot, STORE_DIR, "public.pem").is_file():
        raise cli.UsageError(f"{docroot} is not signed: run "
                             f"'python -m sine.sign {docroot} --key KEY' first")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise cli.UsageError("--tls-cert and --tls-key go together")
    ctx = None
    if not args.no_tls:
        cert, key = args.tls_cert, args.tls_key
        if cert is None:
            cert_pem, key_pem = make_self_signed(args.host)
            store = Path(docroot, STORE_DIR)
            cert, key = store / "tls-cert.pem", store / "tls-key.pem"
            cert.write_bytes(cert_pem)
            key.write_bytes(key_pem)
            key.chmod(0o600)
            print(f"generated TLS certificate {cert} (pin it with sine.fetch --tls-ca)")
        ctx = _load_tls(cert, key)

    async def run() -> None:
        server = OriginServer(docroot)
        ports = await server.start(args.host, args.port, tls=ctx, tls_port=args.tls_port)
        print(f"serving {docroot} on http://{args.host}:{ports[0]}"
              + (f" and https://{args.host}:{ports[1]}" if ports[1] else ""), flush=True)
        try:
            if args.duration:
                await asyncio.sleep(args.duration)
            else:
                await asyncio.Event().wait()
        finally:
            await server.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:  # Ctrl-C is how the server is meant to stop
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and exit status 2 (1 when the port is in
    use), never a traceback."""
    return cli.run_main(build_parser(), _run, argv)


if __name__ == "__main__":
    sys.exit(main())
