"""The SINE origin as an application: h11 requests in, response bytes out (no sockets).

:class:`Origin` answers requests for a document root signed by :mod:`sine.site` (``python -m
sine.sign``).  It reads the documents and their tags from disk but owns no socket and no clock
(``clock`` is passed in): the asyncio listener :class:`sine.aio.server.OriginServer` writes
:meth:`Origin.respond`'s bytes to its sockets, and the driver model (:mod:`sine.model_driver`)
puts the very same bytes on simulated TCP.

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
a document modified after it was signed.
"""

from __future__ import annotations

import datetime
import itertools
import mimetypes
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import h11

from .format import SeparateTag, push_separate_tag
from .site import STORE_DIR, canonical_path, load_signed, signed_from_separate, tag_file
from .tag import encode_stream, stream_length

#: status, headers and body: whole chunks, or a stream and its length
_Response = tuple[int, list[tuple[bytes, bytes]], list[bytes] | tuple[Iterator[bytes], int]]

__all__ = ["Origin", "OriginStats"]


@dataclass
class OriginStats:
    """What an origin answered, as the experiments read it: requests by listener and by route
    (``document``, ``at``, ``sign``, ``collect``, ``public-key``, ``forbidden``), bytes sent."""

    http_requests: int = 0
    tls_requests: int = 0
    tls_connections: int = 0
    bytes_sent: int = 0
    routes: dict[str, int] = field(default_factory=dict)


class Origin:
    """Answer h11 requests for ``docroot`` (signed by :mod:`sine.sign`); ``clock()`` is the
    time in Unix seconds (``Date``, ``max-age``)."""

    def __init__(self, docroot: Path | str, clock: Callable[[], float]) -> None:
        self.docroot = Path(docroot).resolve()
        self.clock = clock
        self.stats = OriginStats()
        self._cache: dict[str, tuple[float, SeparateTag]] = {}

    def respond(self, conn: h11.Connection, req: h11.Request, is_tls: bool) -> Iterator[bytes]:
        """The bytes of the response to ``req`` on ``conn`` (sans-IO: no socket involved).

        The listener writes them to its socket; a simulation (:mod:`sine.model_driver`) puts the
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

    def _route(self, req: h11.Request, is_tls: bool) -> _Response:
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

    def _document(self, req: h11.Request, path: str) -> _Response:
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
