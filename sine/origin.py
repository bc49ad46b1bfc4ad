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

Tree mode and MICE (``TREE.md`` §9, issue 25):

``GET /path`` with ``Accept-Encoding: mi-sha256-03`` (and not ``sine``)
    the MICE variant: ``Content-Encoding: mi-sha256-03``, ``Digest: mi-sha256-03=<top proof>``
    and the RFC 9421 signed head stored by :func:`sine.site.sign_site` (``Signature-Input``,
    ``Signature``, ``Content-Digest``, ``Unencoded-Digest``), ``Vary: Accept-Encoding``;
``GET /path`` with ``Range: bytes=a-b`` (also ``a-`` and ``-n``)
    ``206`` with ``Content-Range`` for one range of the plain document; ``416`` with
    ``Content-Range: bytes */L`` when it selects nothing or is malformed; several ranges, or
    an ``If-Range`` that is not the current strong ``ETag``, get the whole document (``200``).
    The plain document also carries ``Accept-Ranges: bytes``;
``GET /.sine/tree/<id>/tag/path``, ``.../outboard/path``, ``.../proof/<g0>-<k>/path``, ``.../stream/path``
    the tree tag (announcing its outboard: ``Link: <.../outboard/path>; rel="sine-tree"``), the
    outboard (ranges as above), the proof of groups ``g0 .. g0+k-1`` (read from the outboard
    file, ``O(log N)`` hashes) and the combined stream; the URL convention is
    :func:`sine.tree_http.tree_url`'s.  The plain document's headers announce no tree: the
    convention finds them, and every byte added there would be paid by every plain fetch.

Everything a cache may keep carries ``Cache-Control: public, max-age=<E - now>`` and an
``ETag`` derived from ``AT_sign``, so standard HTTP caches (Squid) store and revalidate it and
never serve it past the tag's expiry.  The server never serves ``.sine/tags`` (nor the stored
trees and MICE heads except through the routes above) and answers 503 for a document modified
after it was signed.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import h11

from tls12.buffer import Buffer

from .errors import SineError
from .format import SeparateTag, push_separate_tag
from .mice import CONTENT_CODING, mice_encode
from .site import (
    STORE_DIR,
    canonical_path,
    load_mice_head,
    load_signed,
    media_type,
    signed_from_separate,
    tag_file,
    tree_files,
)
from .tag import encode_stream, stream_length
from .tree import (
    Outboard,
    TreeHash,
    encode_interleaved,
    proof_from_outboard,
    pull_outboard,
    push_range_proof,
)
from .tree_http import (
    TREE_MEDIA_TYPES,
    TREE_ROOT,
    InvalidRange,
    RangeNotSatisfiable,
    TreeRoute,
    content_range,
    parse_range,
    parse_tree_route,
    tree_id,
    tree_url,
)

#: status, headers and body: whole chunks, or a stream and its length
_Response = tuple[int, list[tuple[bytes, bytes]], list[bytes] | tuple[Iterator[bytes], int]]

__all__ = ["Origin", "OriginStats"]


class _Refused(SineError):
    """Raised inside routing to answer with ``response`` instead (not found, changed)."""

    def __init__(self, response: _Response) -> None:
        super().__init__(response[0])
        self.response = response


@dataclass
class OriginStats:
    """What an origin answered, as the experiments read it: requests by listener and by route
    (``document``, ``at``, ``sign``, ``collect``, ``public-key``, ``forbidden``, and for tree
    mode ``tree-tag``, ``tree-outboard``, ``tree-proof``, ``tree-stream``), bytes sent."""

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
        self._outboards: dict[Path, tuple[float, Outboard]] = {}

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
        if status in (200, 206) and etag is not None and _matches(req, etag):
            status, length, head = 304, 0, True
            headers = [h for h in headers if h[0] not in (b"Content-Type", b"Content-Range")]
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
            if path.startswith(TREE_ROOT + "/"):
                try:
                    tree = parse_tree_route(path)
                except ValueError:
                    route = "forbidden"
                    return 404, [], [b"not found\n"]
                route = f"tree-{tree.kind}"
                return self._tree(req, tree)
            if path.startswith(f"/{STORE_DIR}/"):
                route = "forbidden"
                return 404, [], [b"not found\n"]
            return self._document(req, canonical_path(path))
        except _Refused as refused:
            return refused.response
        finally:
            self.stats.routes[route] = self.stats.routes.get(route, 0) + 1

    def _signed(self, path: str) -> tuple[bytes, SeparateTag]:
        """The document at ``path`` and its tag; :class:`_Refused` with the error response
        (404, or 503 when the document changed after it was signed)."""
        file = Path(self.docroot, path.lstrip("/"))
        if not file.is_file():
            raise _Refused((404, [], [b"not found\n"]))
        at = self._tag(path)
        data = file.read_bytes()
        if at is None or len(data) != at.tag.info.content_length or (
            file.stat().st_mtime > tag_file(self.docroot, path).stat().st_mtime
        ):
            raise _Refused((503, _no_store(),
                            [b"document changed since it was signed; run sine.sign\n"]))
        return data, at

    def _document(self, req: h11.Request, path: str) -> _Response:
        data, at = self._signed(path)
        ctype = media_type(path).encode()
        accept = b",".join(v for k, v in req.headers if k == b"accept-encoding")
        codings = [t.split(b";")[0].strip().lower() for t in accept.split(b",")]
        at_link = f"</{STORE_DIR}/at{path}>; rel=\"sine-at\"".encode()
        if b"sine" in codings:
            stream = signed_from_separate(at)
            headers = self._cache_headers(at, ctype, b"sine")
            headers += [(b"Content-Encoding", b"sine"), (b"Vary", b"Accept-Encoding")]
            return 200, headers, (encode_stream(data, stream), stream_length(stream))
        mice = load_mice_head(self.docroot, path) if CONTENT_CODING.encode() in codings else None
        if mice is not None:
            headers = self._cache_headers(at, ctype, b"mice")[1:]  # the signed type is stored
            headers += [(n.encode(), v.encode()) for n, v in mice.fields]
            headers += [(b"Vary", b"Accept-Encoding")]
            return 200, headers, [mice_encode(data, mice.record_size).body]
        headers = self._cache_headers(at, ctype, b"plain")
        headers += [(b"Vary", b"Accept-Encoding"), (b"Link", at_link)]
        return _ranged(req, headers, data)

    def _tree(self, req: h11.Request, route: TreeRoute) -> _Response:
        """A tree resource of ``route.path`` (tag, outboard, proof or combined stream)."""
        path = canonical_path(route.path)
        data, at = self._signed(path)
        ident = tree_id(route.tree_hash, route.group_size)
        tag_path, ob_path = tree_files(self.docroot, ident, path)
        if not (tag_path.is_file() and ob_path.is_file()):
            return 404, [], [b"no such tree\n"]
        ctype = TREE_MEDIA_TYPES[route.kind].encode()
        variant = f"tree-{route.kind}-{ident}"
        if route.kind == "proof":
            variant += f"-{route.first_group}-{route.groups}"
        headers = self._cache_headers(at, ctype, variant.encode())
        if route.kind == "tag":
            link = f"<{tree_url(ident, 'outboard', path)}>; rel=\"sine-tree\"".encode()
            return 200, [*headers, (b"Link", link)], [tag_path.read_bytes()]
        if route.kind == "outboard":
            return _ranged(req, headers, ob_path.read_bytes())
        if route.kind == "stream":
            outboard = self._outboard(ob_path)
            length = len(data) + 64 * len(outboard.parents)
            return 200, headers, (encode_interleaved(data, outboard), length)
        with ob_path.open("rb") as f:
            def read(offset: int, size: int) -> bytes:
                f.seek(offset)
                return f.read(size)
            try:
                proof = proof_from_outboard(read, TreeHash(route.tree_hash), route.group_size,
                                            len(data), route.first_group, route.groups)
            except ValueError:
                return 404, [], [b"no such group range\n"]
        return 200, headers, [push_range_proof(proof)]

    def _outboard(self, file: Path) -> Outboard:
        mtime = file.stat().st_mtime
        cached = self._outboards.get(file)
        if cached is None or cached[0] != mtime:
            cached = mtime, pull_outboard(Buffer(file.read_bytes()))
            self._outboards[file] = cached
        return cached[1]

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



def _ranged(req: h11.Request, headers: list[tuple[bytes, bytes]], data: bytes) -> _Response:
    """``data`` as the answer to ``req``: 200, or 206 / 416 for a ``Range`` (see the module
    docstring).  ``headers`` already hold the cache headers and the strong ``ETag``."""
    headers = [*headers, (b"Accept-Ranges", b"bytes")]
    values = [v for k, v in req.headers if k == b"range"]
    if len(values) != 1:  # none, or several lines (not one range): the whole representation
        return 200, headers, [data]
    if_range = [v for k, v in req.headers if k == b"if-range"]
    if if_range and (len(if_range) != 1 or if_range[0].strip() != dict(headers).get(b"ETag")):
        return 200, headers, [data]  # a date, a weak or an old validator: send it all
    try:
        spec = parse_range(values[0].decode("latin-1"))
        if spec is None:
            return 200, headers, [data]
        first, last = spec.resolve(len(data))
    except (InvalidRange, RangeNotSatisfiable):
        return 416, [(b"Content-Range", f"bytes */{len(data)}".encode()),
                     (b"Content-Type", b"text/plain")], [b"range not satisfiable\n"]
    headers.append((b"Content-Range", content_range(first, last, len(data)).encode()))
    return 206, headers, [data[first : last + 1]]


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
