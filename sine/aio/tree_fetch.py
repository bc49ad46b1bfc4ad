"""The client side of tree mode and MICE, and byte windows over any verified stream.

:class:`ModeFetcher` is the part of :class:`sine.aio.client.SineClient` that speaks tree mode
(``TREE.md``) and MICE (``mi-sha256-03`` under an RFC 9421 signed head) over one HTTP
connection; the session hands it a ``get(target, headers)`` coroutine and a ``reset()`` that
drops the connection.  Each fetch returns an :class:`Outcome` whose ``data`` holds only bytes a
verifier released -- on an error, exactly those released before it.

Tree mode, whole document (three requests, each an ordinary cacheable ``GET``)::

    GET /.sine/tree/<id>/tag/<path>        verify the signed head (block 0)
    GET /.sine/tree/<id>/outboard/<path>   bounded by the verified head: 16 + 64 (N - 1) bytes
                                           (the URL the tag's Link rel="sine-tree" names)
    GET /<path>                            the unchanged document, released group by group

Tree mode, ``Range: bytes=a-b`` -- only the covering groups and ``O(log N)`` hashes travel::

    GET /.sine/tree/<id>/tag/<path>
    GET /.sine/tree/<id>/proof/<g0>-<k>/<path>
    GET /<path>  with  Range: bytes=<g0·G>-<min((g1+1)·G, L) - 1>

The slice is released whole once the root it implies matches the signed root, and cut to
``a..b``.  A ``200`` instead of the ``206`` (a cache that ignores ``Range``) is accepted: only
the covering bytes are kept and the connection is dropped once they are in.

MICE (``Accept-Encoding: mi-sha256-03``): the signed head (``Signature``, covering
``Content-Encoding``, ``Digest`` and the request path) is checked first, then each record is
released as its proof matches (:class:`sine.mice.MiceDecoder`).

A chain (SINE, MICE) cannot verify a range alone: :class:`Window` releases the part of a
verified *prefix* that falls in the range, and the fetch stops once it is complete -- the
prefix is what a chain costs, and the tests count it on the wire.

Caches that gzip: every response may arrive with ``gzip`` added as the last content coding
(when the session sends ``Accept-Encoding: gzip``).  It is undone first, with a bound taken from
what is expected (:class:`sine.tree_http.BodyDecoder`), and the decoded bytes are verified as if
the cache had not touched them; any other unexpected coding fails closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import h11

from tls12.buffer import Buffer

from ..algorithms import VerifyingKey
from ..errors import MiceIntegrityError, RemoteProtocolError, SineError
from ..httpsig import key_id_for, open_mice_response
from ..mice import CONTENT_CODING, ContentVerified, RecordVerified
from ..tree import (
    HASH_SIZE,
    HEADER_SIZE,
    TreeFormatError,
    TreeTag,
    covering_groups,
    pull_tree_tag,
)
from ..tree_http import (
    MAX_POSITION,
    BodyDecoder,
    ByteRange,
    CodingError,
    RangeNotSatisfiable,
    content_codings,
    link_targets,
    parse_content_range,
    tree_url,
)
from ..tree_verifier import SliceVerifier, TreeEvent, TreeVerifier, VerifiedData
from .http import HttpError, RangeUnsatisfiable

__all__ = ["Get", "Outcome", "Window", "ModeFetcher", "outer_gzip", "MAX_TAG_BYTES", "MAX_PROOF_BYTES"]

#: a TreeTag: u32 + head (at most 73 + 1024 path bytes) + u16 + signature (at most 1024)
MAX_TAG_BYTES = 4 + 75 + 1024 + 2 + 1024
#: a proof: header, first group, count, sibling count (u8) and at most 255 hashes
MAX_PROOF_BYTES = HEADER_SIZE + 17 + 255 * HASH_SIZE
#: what is read of an error response's body before the connection is dropped instead
_ERROR_BODY = 64 * 1024

Get = Callable[[str, Sequence[tuple[str, str]]],
               Awaitable[tuple[h11.Response, AsyncIterator[bytes]]]]


@dataclass
class Outcome:
    """What one fetch verified: ``data`` are document bytes from ``offset`` (released bytes
    only), ``error`` the typed reason it stopped early, ``headers`` those of the document's
    response, ``length`` the signed document length when known."""

    status: int = 0
    data: bytearray = field(default_factory=bytearray)
    offset: int = 0
    error: SineError | None = None
    headers: dict[str, str] = field(default_factory=dict)
    length: int | None = None
    method: str = ""
    released: int = 0  # document bytes a chain verifier released so far (prefix length)


class Window:
    """The part of a verified stream that falls into ``Range: bytes=first-last``.

    Fed the verified prefix in order (``offer(offset, data)``) it keeps what lies inside the
    range; :attr:`complete` turns true once the last byte of the range is in.  Without a range
    (``spec=None``) it keeps everything and is never complete before the end.
    """

    def __init__(self, spec: ByteRange | None) -> None:
        self.spec = spec
        self.first, self.last = 0, -1
        self.resolved = spec is None
        self.kept = bytearray()
        self._tail: int | None = None  # a suffix range before the length is known

    def resolve(self, length: int) -> None:
        """Fix the range against the signed length (:class:`RangeUnsatisfiable` if empty)."""
        if self._tail is not None:  # the suffix was kept as it streamed by
            self._tail = None
            self.first, self.last = length - len(self.kept), length - 1
            if not self.kept:
                raise RangeUnsatisfiable("a suffix range of an empty document")
        elif self.spec is None:
            self.first, self.last = 0, length - 1
        else:
            try:
                self.first, self.last = self.spec.resolve(length)
            except RangeNotSatisfiable as exc:
                raise RangeUnsatisfiable(f"range {self.spec.header()}: {exc}") from None
        self.resolved = True

    def resolve_unknown(self) -> None:
        """Fix the range before the length is known (a chain that signs none, as MICE):
        ``a-b`` and ``a-`` stand as they are; for a suffix ``-n`` the last ``n`` bytes seen
        are kept (a chain reads to the end anyway).  :meth:`resolve` at the end places it
        and checks it against the length."""
        if self.spec is None:
            self.first, self.last = 0, MAX_POSITION
        elif self.spec.first is None:
            assert self.spec.last is not None
            self._tail = self.spec.last
            self.first, self.last = 0, MAX_POSITION
        else:
            self.first = self.spec.first
            self.last = MAX_POSITION if self.spec.last is None else self.spec.last
        self.resolved = True

    def offer(self, offset: int, data: bytes) -> bytes:
        """Keep the part of ``data`` (document bytes at ``offset``) inside the range; return it."""
        if self.spec is None:
            self.kept += data
            return data
        if self._tail is not None:
            self.kept += data
            del self.kept[: max(0, len(self.kept) - self._tail)]
            return b""  # placed only at the end: nothing is handed on before
        lo, hi = max(offset, self.first), min(offset + len(data), self.last + 1)
        part = data[lo - offset : hi - offset] if lo < hi else b""
        self.kept += part
        return part

    def abandon(self) -> None:
        """The stream failed: keep nothing that cannot be placed (a suffix whose offset was
        never learnt)."""
        if self._tail is not None:
            self.kept.clear()

    @property
    def complete(self) -> bool:
        return (self.spec is not None and self.resolved
                and len(self.kept) == self.last - self.first + 1)


def _fields(resp: h11.Response) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.headers]


def _headers(resp: h11.Response) -> dict[str, str]:
    return {k.lower(): v for k, v in _fields(resp)}


def outer_gzip(headers: dict[str, str]) -> tuple[str | None, list[str]]:
    """``("gzip" or None, the codings under it)`` of a response."""
    codings = content_codings(headers.get("content-encoding"))
    if codings and codings[-1] in ("gzip", "x-gzip"):
        return codings[-1], codings[:-1]
    return None, codings


class ModeFetcher:
    """Tree-mode and MICE fetches over the session's connection (see the module docstring).

    ``accept_gzip`` adds ``Accept-Encoding: gzip`` to requests for whole resources, inviting a
    transcoding cache to compress them (range requests never invite it: a range of a
    compressed representation is of no use).
    """

    def __init__(self, get: Get, reset: Callable[[], Awaitable[None]], *,
                 public_key: VerifyingKey, accept_gzip: bool = False,
                 on_data: Callable[[str, int, bytes], None] | None = None) -> None:
        self.get, self.reset = get, reset
        self.public_key, self.accept_gzip, self.on_data = public_key, accept_gzip, on_data
        self.links: list[str] = []

    def _accept(self, *codings: str) -> list[tuple[str, str]]:
        names = [*codings, *(["gzip"] if self.accept_gzip else [])]
        return [("Accept-Encoding", ", ".join(names))] if names else []

    async def _drain(self, body: AsyncIterator[bytes]) -> None:
        """Read an unwanted body if it is small, else drop the connection."""
        seen = 0
        async for chunk in body:
            seen += len(chunk)
            if seen > _ERROR_BODY:
                await self.reset()
                return

    async def _resource(self, target: str, limit: int, block: int) -> bytes:
        """A whole small resource (tree tag, outboard, proof), gzip undone, at most ``limit``
        bytes; a status other than 200 is an :class:`HttpError`, bad bytes a
        :class:`~sine.tree.TreeFormatError` for ``block``.  ``self.links`` keeps the
        response's ``Link`` field lines."""
        resp, body = await self.get(target, self._accept())
        self.links = [v.decode("latin-1") for k, v in resp.headers if k == b"link"]
        if resp.status_code != 200:
            await self._drain(body)
            raise HttpError(f"{target}: HTTP {resp.status_code}")
        gzip, rest = outer_gzip(_headers(resp))
        if rest:
            raise TreeFormatError(f"{target}: unexpected Content-Encoding {rest}", block)
        out = bytearray()
        try:
            decoder = BodyDecoder(gzip, limit)
            async for chunk in body:
                for piece in decoder.feed(chunk):
                    out += piece
            decoder.finish()
        except CodingError as exc:
            raise TreeFormatError(f"{target}: {exc}", block) from None
        return bytes(out)

    # -- tree mode -------------------------------------------------------------------------------

    def _release(self, out: Outcome, window: Window, path: str, events: list[TreeEvent]
                 ) -> None:
        for event in events:
            if isinstance(event, VerifiedData):
                part = window.offer(event.offset, event.data)
                if part and self.on_data:
                    self.on_data(path, event.offset, part)

    async def tree(self, path: str, tree: str, now: float, spec: ByteRange | None) -> Outcome:
        """Fetch ``path`` in tree mode (whole, or the range ``spec``); never raises for
        remote misbehaviour: the error is in the outcome, with the bytes released before it."""
        out = Outcome()
        window = Window(spec)
        try:
            tag = await self._resource(tree_url(tree, "tag", path), MAX_TAG_BYTES, 0)
            if spec is None:
                await self._tree_whole(out, window, path, tree, now, tag)
            else:
                await self._tree_slice(out, window, path, tree, now, tag)
        except RemoteProtocolError as exc:
            self._release(out, window, path, [e for e in exc.events
                                              if isinstance(e, TreeEvent)])
            out.error = exc
        except SineError as exc:
            out.error = exc
        if out.error is not None:
            await self.reset()
        out.data, out.offset = window.kept, window.first
        return out

    async def _tree_whole(self, out: Outcome, window: Window, path: str, tree: str,
                          now: float, tag: bytes) -> None:
        v = TreeVerifier(path, now, public_key=self.public_key, tag=tag, outboard_later=True)
        out.method, out.length = "signature", v.head.content_length
        window.resolve(v.head.content_length)
        outboard = await self._resource(self._outboard_url(path, tree), v.outboard_size, 1)
        self._release(out, window, path, v.supply_outboard(outboard))
        resp, body = await self.get(path, self._accept())
        out.status, out.headers = resp.status_code, _headers(resp)
        if resp.status_code != 200:
            await self._drain(body)
            raise HttpError(f"{path}: HTTP {resp.status_code}")
        gzip, rest = outer_gzip(out.headers)
        if rest:
            raise TreeFormatError(f"unexpected Content-Encoding {rest}", 1)
        # no bound of its own: the verifier ends the body at the signed length (the first
        # byte beyond is TreeTrailingData) and gzip comes out in bounded pieces
        decoder = BodyDecoder(gzip, MAX_POSITION)
        try:
            async for chunk in body:
                for piece in decoder.feed(chunk):
                    self._release(out, window, path, v.receive_data(piece))
            decoder.finish()
        except CodingError as exc:
            group = v.released_bytes // v.head.group_size
            raise TreeFormatError(f"document body: {exc}", group + 1) from None
        self._release(out, window, path, v.receive_data(b""))

    def _outboard_url(self, path: str, tree: str) -> str:
        """Where the outboard is: the tag response's ``Link; rel="sine-tree"`` when it names
        a path on this origin, else the URL convention.  A cache that points elsewhere gains
        nothing: the outboard must match the signed root, wherever it came from."""
        try:
            targets = link_targets(self.links, "sine-tree")
        except ValueError:
            targets = []
        for target in targets:
            if target.startswith("/") and not target.startswith("//"):
                return target
        return tree_url(tree, "outboard", path)

    async def _tree_slice(self, out: Outcome, window: Window, path: str, tree: str,
                          now: float, tag_bytes: bytes) -> None:
        tag: TreeTag = pull_tree_tag(Buffer(tag_bytes))  # read before it is verified: only
        head = tag.head                                 # to name the groups to fetch
        window.resolve(head.content_length)
        first, last = window.first, window.last
        g0, g1 = covering_groups(first, last, head.content_length, head.group_size)
        proof = await self._resource(tree_url(tree, "proof", path, (g0, g1 - g0 + 1)),
                                     MAX_PROOF_BYTES, g0 + 1)
        v = SliceVerifier(path, now, public_key=self.public_key, tag=tag, proof=proof,
                          first=first, last=last)
        out.method, out.length = "signature", head.content_length
        start, end = v.span
        resp, body = await self.get(path, [("Range", f"bytes={start}-{end - 1}")])
        out.status, out.headers = resp.status_code, _headers(resp)
        gzip, rest = outer_gzip(out.headers)
        if resp.status_code == 206:
            try:
                cr_first, cr_last, cr_length = parse_content_range(
                    out.headers.get("content-range", ""))
            except ValueError as exc:
                raise TreeFormatError(f"206 response: {exc}", g0 + 1) from None
            if gzip or rest or cr_first > start or cr_last < end - 1 or cr_length not in (
                    None, head.content_length):
                raise TreeFormatError("206 response does not carry the covering groups",
                                      g0 + 1)
            base = cr_first
        elif resp.status_code == 200 and not rest:
            base = 0
        else:
            await self._drain(body)
            raise HttpError(f"{path}: HTTP {resp.status_code} for a range request")
        decoder = BodyDecoder(gzip, head.content_length if resp.status_code == 200
                              else cr_last - cr_first + 1)
        pos, kept = base, 0
        try:
            async for chunk in body:
                for piece in decoder.feed(chunk):
                    lo, hi = max(pos, start), min(pos + len(piece), end)
                    if lo < hi:
                        self._release(out, window, path,
                                      v.receive_data(piece[lo - pos : hi - pos]))
                        kept += hi - lo
                    pos += len(piece)
                if kept == end - start and resp.status_code == 200:
                    # the covering groups are in: the rest of a whole document is not needed,
                    # and a connection left inside a body cannot be reused
                    await self.reset()
                    break
        except CodingError as exc:
            raise TreeFormatError(f"range body: {exc}", g0 + 1) from None
        self._release(out, window, path, v.receive_data(b""))

    # -- MICE --------------------------------------------------------------------------------------

    async def mice(self, path: str, now: float, spec: ByteRange | None,
                   record_sizes: range) -> Outcome:
        """Fetch ``path`` as ``mi-sha256-03`` under its RFC 9421 signed head; with ``spec``,
        stop once the range is verified (the prefix before it is fetched and verified too).
        MICE signs no length: a suffix range (``-n``) is placed once the body has ended."""
        out = Outcome()
        window = Window(spec)
        stopped = False
        try:
            window.resolve_unknown()
            resp, body = await self.get(path, self._accept(CONTENT_CODING))
            out.status, out.headers = resp.status_code, _headers(resp)
            if resp.status_code != 200:
                await self._drain(body)
                raise HttpError(f"{path}: HTTP {resp.status_code}")
            gzip, rest = outer_gzip(out.headers)
            if rest != [CONTENT_CODING]:
                raise HttpError(f"response is not Content-Encoding: {CONTENT_CODING}")
            # verify the head as signed: a gzip layer a cache added is not part of it
            fields = [(n, CONTENT_CODING if n.lower() == "content-encoding" else v)
                      for n, v in _fields(resp)]
            _, decoder = open_mice_response(
                200, fields, self.public_key, key_id=key_id_for(self.public_key), now=now,
                record_sizes=record_sizes, max_age=None, path=path)
            out.method = "signature"
            unzip = BodyDecoder(gzip, MAX_POSITION)
            try:
                async for chunk in body:
                    for piece in unzip.feed(chunk):
                        self._mice_events(out, window, path, decoder.receive_data(piece))
                    if window.complete:
                        stopped = True
                        break
                if not stopped:
                    unzip.finish()
            except CodingError as exc:
                raise MiceIntegrityError(f"MICE body: {exc}", decoder.next_record) from None
            if not stopped:
                self._mice_events(out, window, path, decoder.receive_data(b""))
                window.resolve(out.length or 0)  # the range must lie in the content
        except RemoteProtocolError as exc:
            self._mice_events(out, window, path, exc.events)
            # a range verified before the bad record (in the same chunk) stands
            out.error = None if window.complete else exc
            stopped = True
        except SineError as exc:
            out.error = exc
        if out.error is not None:
            window.abandon()
        if out.error is not None or stopped:
            await self.reset()
        out.data, out.offset = window.kept, window.first
        return out

    def _mice_events(self, out: Outcome, window: Window, path: str,
                     events: Sequence[object]) -> None:
        """Release verified records through the window."""
        for event in events:
            if isinstance(event, RecordVerified):
                part = window.offer(out.released, event.data)
                if part and self.on_data:
                    self.on_data(path, out.released, part)
                out.released += len(event.data)
            elif isinstance(event, ContentVerified):
                out.length = event.length
