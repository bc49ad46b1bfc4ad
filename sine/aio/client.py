"""Verifying client: asyncio + h11, through an optional HTTP proxy (Squid).

:class:`SineClient` is one browsing *session* with one site.  ``mode`` selects the protocol:

==============  ================================================================================
``"sine"``      ``Accept-Encoding: sine``; one signature verification per document.
``"separate"``  the separate tag ``/.sine/at/<path>`` first, then the plain document.
``"sineb"``     ``AT_sign`` over TLS straight from the origin (one handshake per session, one
                round trip per document -- or one in all with ``collect=True``), the stream
                from the cache; no signature verification.
``"sinex"``     like ``"sine"``, but digests found in verified Forward Authenticators are kept,
                so linked pages need no signature verification and no origin round trip.
``"tree"``      tree mode (``TREE.md``): the signed tree tag, the outboard and the unchanged
                document, released group by group; with a byte range, the tag, a proof of
                ``O(log N)`` hashes and only the covering groups (``tree="blake3-4096"`` picks
                the hash and group size).
``"mice"``      ``Accept-Encoding: mi-sha256-03`` under an RFC 9421 signature (``Signature``
                over ``Content-Digest``, ``Digest`` and the path); records released as their
                proofs match.
``"http"``      and ``"https"``: unprotected baselines (the experiments' reference lines)
==============  ================================================================================

:meth:`SineClient.get` takes a ``byte_range`` (:class:`sine.tree_http.ByteRange`, e.g.
``parse_range("bytes=1000-1999")``): tree mode verifies the range alone; the chain modes
(``sine``, ``separate``, ``sineb``, ``sinex``, ``mice``) fetch and verify the prefix up to it
and stop -- a chain has no other way.  ``accept_gzip=True`` invites a transcoding cache to gzip
whole responses; the client undoes it (bounded) before it verifies.  The tree and MICE modes
live in :mod:`sine.aio.tree_fetch`.

Instrumentation in :attr:`SineClient.counters` (what Table II counts): public-key operations
(signature verifications plus TLS handshakes), round trips to the origin over TLS, requests and
bytes received.  Only verified bytes are returned in :attr:`FetchResult.data` (from
:attr:`FetchResult.offset` for a range); on a failure the result holds the verified prefix (for a
tree range: nothing) and the typed error.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import h11

from ..algorithms import VerifyingKey
from ..cache_status import cache_verdict
from ..errors import (
    BlockMismatch,
    DigestMismatch,
    RemoteProtocolError,
    SineError,
    TagFormatError,
)
from ..mice import RECORD_SIZES
from ..site import STORE_DIR, canonical_path
from ..tree_http import MAX_POSITION, BodyDecoder, ByteRange, CodingError, parse_tree_id
from ..verifier import (
    BlockVerified,
    ForwardAuthenticatorVerified,
    StreamVerifier,
    TagVerified,
)
from .http import ConnectFailed, HttpConnection, HttpError, RangeUnsatisfiable
from .tree_fetch import ModeFetcher, Outcome, Window, outer_gzip

__all__ = ["HttpConnection", "HttpError", "ConnectFailed", "RangeUnsatisfiable", "FetchResult",
           "Counters", "SineClient", "MODES", "fetch_and_report"]

MODES = ("sine", "separate", "sineb", "sinex", "http", "https", "tree", "mice")
#: modes that verify by the origin's signature (need ``public_key``)
KEY_MODES = ("sine", "separate", "sinex", "tree", "mice")
DEFAULT_TREE = "sha256-1024"


@dataclass
class Counters:
    signature_verifications: int = 0
    tls_handshakes: int = 0
    origin_round_trips: int = 0
    requests: int = 0
    bytes_received: int = 0

    @property
    def public_key_operations(self) -> int:
        return self.signature_verifications + self.tls_handshakes


@dataclass
class FetchResult:
    path: str
    status: int
    data: bytes
    error: SineError | None = None
    method: str = ""
    x_cache: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    offset: int = 0  # where ``data`` starts in the document (a range)
    length: int | None = None  # the signed document length, when the mode learnt it

    @property
    def ok(self) -> bool:
        return self.error is None and self.status in (200, 206)


def _headers(resp: h11.Response) -> dict[str, str]:
    return {k.decode().lower(): v.decode("latin-1") for k, v in resp.headers}


class SineClient:
    """A verifying browsing session with one origin (see the module docstring)."""

    def __init__(
        self,
        origin: str,
        *,
        mode: str = "sine",
        public_key: VerifyingKey | None = None,
        proxy: str | None = None,
        tls_origin: str | None = None,
        tls_ca: bytes | None = None,
        collect: bool = False,
        clock: Callable[[], float] = time.time,
        on_block: Callable[[str, int, bytes], None] | None = None,
        tree: str = DEFAULT_TREE,
        accept_gzip: bool = False,
        mice_record_sizes: range = RECORD_SIZES,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        parse_tree_id(tree)
        if mode in KEY_MODES and public_key is None:
            raise ValueError(f"mode {mode!r} needs the origin's public key")
        if mode in ("sineb", "https") and (tls_origin is None or tls_ca is None):
            raise ValueError(f"mode {mode!r} needs tls_origin and tls_ca")
        self.origin = origin.rstrip("/")
        self.mode, self.public_key, self.collect = mode, public_key, collect
        self.clock, self.on_block = clock, on_block
        self.tree, self.accept_gzip, self.mice_record_sizes = tree, accept_gzip, mice_record_sizes
        self.counters = Counters()
        self.trusted: dict[str, bytes] = {}
        self._sign_cache: dict[str, bytes] = {}
        o = urlsplit(self.origin)
        if proxy:
            p = urlsplit(proxy)
            self._http = HttpConnection(p.hostname or "127.0.0.1", p.port or 3128)
            self._absolute = True
        else:
            self._http = HttpConnection(o.hostname or "127.0.0.1", o.port or 80)
            self._absolute = False
        self._host = o.netloc
        self._tls: HttpConnection | None = None
        if tls_origin:
            t = urlsplit(tls_origin)
            ctx = ssl.create_default_context(cadata=tls_ca.decode() if tls_ca else None)
            self._tls = HttpConnection(t.hostname or "127.0.0.1", t.port or 443, ctx,
                                       on_connect=self._count_handshake)
            self._tls_host = t.netloc
        self._modes: ModeFetcher | None = None
        if public_key is not None:  # tree and MICE call on_block(path, byte offset, bytes)
            self._modes = ModeFetcher(self._get, self._http.close, public_key=public_key,
                                      accept_gzip=accept_gzip, on_data=on_block)

    def _count_handshake(self) -> None:
        self.counters.tls_handshakes += 1

    async def open_tls(self) -> None:
        """Open the session's TLS connection to the origin now: TCP connect and TLS handshake
        (counted in :attr:`Counters.tls_handshakes`), no request.

        A SINEB session pays one handshake and then one round trip per document (``AT_sign``)
        over the open connection.  Without this call the handshake happens inside the first
        :meth:`get`.  Calling it first separates the two costs: an experiment that times one
        fetch *of an established session* -- what :func:`sine.model_latency.fetch_latency` models for
        ``sineb`` -- opens the connection outside its timed window.  On a connection that is
        already open and idle it does nothing (no second handshake).

        Raises ``ValueError`` for a session without ``tls_origin`` and :class:`ConnectFailed`
        when the origin's TLS port cannot be reached or its certificate is not trusted.
        """
        if self._tls is None:
            raise ValueError("this session has no TLS origin (pass tls_origin and tls_ca)")
        await self._tls.connect()

    async def close(self) -> None:
        await self._http.close()
        if self._tls is not None:
            await self._tls.close()

    async def __aenter__(self) -> SineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests ----------------------------------------------------------------------------

    async def _get(self, path: str, extra: Sequence[tuple[str, str]] = (), tls: bool = False
                   ) -> tuple[h11.Response, AsyncIterator[bytes]]:
        self.counters.requests += 1
        if tls:
            assert self._tls is not None
            self.counters.origin_round_trips += 1
            return await self._tls.request(path, [("Host", self._tls_host), *extra])
        target = self.origin + path if self._absolute else path
        return await self._http.request(target, [("Host", self._host), *extra])

    async def _read_all(self, body: AsyncIterator[bytes]) -> bytes:
        return b"".join([chunk async for chunk in body])

    async def _at_sign(self, path: str) -> bytes:
        if path in self._sign_cache:
            return self._sign_cache[path]
        if self.collect:
            resp, body = await self._get(f"/{STORE_DIR}/collect", tls=True)
            text = (await self._read_all(body)).decode()
            for line in text.splitlines():
                digest, _, p = line.partition(" ")
                self._sign_cache[p] = bytes.fromhex(digest)
        else:
            resp, body = await self._get(f"/{STORE_DIR}/sign{quote(path)}", tls=True)
            text = (await self._read_all(body)).decode().strip()
            if resp.status_code == 200:
                self._sign_cache[path] = bytes.fromhex(text)
        if path not in self._sign_cache:
            raise HttpError(f"origin has no AT_sign for {path}")
        return self._sign_cache[path]

    async def get(self, path: str, byte_range: ByteRange | None = None) -> FetchResult:
        """Fetch and verify ``path`` (or its ``byte_range``); never raises for remote
        misbehaviour (see ``error``).

        Raises :class:`ConnectFailed` when the origin or the proxy cannot be reached at all.
        """
        try:
            if self.mode in ("tree", "mice"):
                return await self._fetch_mode(path, byte_range)
            result = await self._fetch(path, byte_range)
            if isinstance(result.error, DigestMismatch) and self.mode == "sinex":
                # The site was re-signed since the linking page was read: verify afresh.
                self.trusted.pop(canonical_path(path), None)
                result = await self._fetch(path, byte_range)
            return result
        except ConnectFailed:
            raise
        except SineError as exc:
            await self._http.close()
            return FetchResult(path, 0, b"", exc)
        finally:
            self.counters.bytes_received = self._http.bytes_received + (
                self._tls.bytes_received if self._tls else 0)
            self.counters.signature_verifications = (
                self.public_key.verifications if self.public_key else 0)

    async def _fetch_mode(self, path: str, byte_range: ByteRange | None) -> FetchResult:
        """Tree mode or MICE (:mod:`sine.aio.tree_fetch`)."""
        assert self._modes is not None
        canon, now = canonical_path(path), self.clock()
        if self.mode == "tree":
            got = await self._modes.tree(canon, self.tree, now, byte_range)
        else:
            got = await self._modes.mice(canon, now, byte_range, self.mice_record_sizes)
        return self._result(path, got)

    @staticmethod
    def _result(path: str, got: Outcome) -> FetchResult:
        return FetchResult(path, got.status, bytes(got.data), got.error, got.method,
                           got.headers.get("x-cache", ""), got.headers, got.offset, got.length)

    async def _fetch(self, path: str, byte_range: ByteRange | None = None) -> FetchResult:
        canon = canonical_path(path)
        if self.mode in ("http", "https"):
            resp, body = await self._get(path, tls=self.mode == "https")
            data = await self._read_all(body)
            return FetchResult(path, resp.status_code, data, None, self.mode,
                               _headers(resp).get("x-cache", ""), _headers(resp))
        separate, trusted = await self._chain_anchor(canon)
        now = self.clock()
        extra = self._gzip() if self.mode == "separate" else [
            ("Accept-Encoding", "sine, gzip" if self.accept_gzip else "sine")]
        resp, body = await self._get(path, extra)
        headers = _headers(resp)
        out = Outcome(status=resp.status_code, headers=headers)
        if resp.status_code != 200:
            await self._read_all(body)
            out.error = HttpError(f"HTTP {resp.status_code}")
            return self._result(path, out)
        coding, rest = outer_gzip(headers)
        if rest != ([] if self.mode == "separate" else ["sine"]):
            await self._http.close()
            out.error = HttpError("response is not Content-Encoding: sine" if self.mode != "separate"
                                  else f"unexpected Content-Encoding {rest}")
            return self._result(path, out)
        window = Window(byte_range)
        try:
            verifier = StreamVerifier(
                canon, now, public_key=None if trusted else self.public_key,
                trusted_digest=trusted, separate=separate)
            stopped = await self._verify_chain(canon, body, BodyDecoder(coding, MAX_POSITION),
                                               verifier, out, window)
        except RemoteProtocolError as exc:
            for early in exc.events:
                self._handle(canon, early, out, window)
            # a range verified before the bad block (in the same chunk) stands: the chain
            # reached past it only because the bytes arrived together
            out.error = None if window.complete else exc
            stopped = True
        except SineError as exc:
            out.error, stopped = exc, True
        if stopped:
            await self._http.close()
        out.data, out.offset = window.kept, window.first
        return self._result(path, out)

    def _gzip(self) -> list[tuple[str, str]]:
        return [("Accept-Encoding", "gzip")] if self.accept_gzip else []

    async def _chain_anchor(self, canon: str) -> tuple[bytes | None, bytes | None]:
        """``(separate tag, trusted digest)`` of a chain mode: the separate tag fetched for
        ``separate``, ``AT_sign`` over TLS for ``sineb``, a Forward Authenticator's digest
        for ``sinex`` (else the stream's own signed tag is the anchor)."""
        if self.mode == "separate":
            resp, body = await self._get(f"/{STORE_DIR}/at{quote(canon)}", self._gzip())
            coding, rest = outer_gzip(_headers(resp))
            try:
                separate = await self._decoded(body, coding, 1 << 32)
            except CodingError as exc:
                raise TagFormatError(f"separate tag: {exc}", 0) from None
            if resp.status_code != 200 or rest:
                raise HttpError(f"tag fetch failed with {resp.status_code} {rest or ''}")
            return separate, None
        if self.mode == "sineb":
            return None, await self._at_sign(canon)
        return None, self.trusted.get(canon) if self.mode == "sinex" else None

    async def _verify_chain(self, canon: str, body: AsyncIterator[bytes], unzip: BodyDecoder,
                            verifier: StreamVerifier, out: Outcome, window: Window) -> bool:
        """Feed the (inflated) body to the chain verifier, releasing through ``window``;
        return whether it stopped early (the range was complete)."""
        try:
            async for chunk in body:
                for piece in unzip.feed(chunk):
                    for event in verifier.receive_data(piece):
                        out.method = self._handle(canon, event, out, window) or out.method
                if window.complete:
                    return True  # the range is verified: the rest of the chain is not needed
            unzip.finish()
        except CodingError as exc:
            raise BlockMismatch(f"body does not decode: {exc}",
                                verifier.blocks_verified + 1) from None
        for event in verifier.receive_data(b""):  # end of stream
            out.method = self._handle(canon, event, out, window) or out.method
        return False

    async def _decoded(self, body: AsyncIterator[bytes], coding: str | None, limit: int
                       ) -> bytes:
        decoder = BodyDecoder(coding, limit)
        out = bytearray()
        async for chunk in body:
            for piece in decoder.feed(chunk):
                out += piece
        decoder.finish()
        return bytes(out)

    def _handle(self, path: str, event: object, out: Outcome, window: Window) -> str | None:
        if isinstance(event, BlockVerified):
            offset = out.released
            out.released += len(event.data)
            part = window.offer(offset, event.data)
            if self.on_block and (part or window.spec is None):
                self.on_block(path, event.index, event.data)
        elif isinstance(event, TagVerified):
            out.length = event.info.content_length
            window.resolve(event.info.content_length)
            if self.mode == "sinex" and event.method == "signature":
                self.trusted[path] = event.at_sign
            return event.method
        elif isinstance(event, ForwardAuthenticatorVerified) and self.mode == "sinex":
            for p, digest in event.forward_authenticator.entries:
                self.trusted[p] = digest
        return None


async def _fetch_and_report(
    origin: str,
    urls: list[str],
    *,
    mode: str,
    public_key: VerifyingKey | None,
    proxy: str | None,
    tls_origin: str | None,
    tls_ca: bytes | None,
    collect: bool,
    output: Path | None,
    byte_range: ByteRange | None = None,
    tree: str = DEFAULT_TREE,
    accept_gzip: bool = False,
) -> int:
    """Fetch ``urls`` in one session, print a line per document (with the cache verdict of
    :func:`sine.cache_status.cache_verdict`) and the session's counters; 0 iff all verified."""
    failures = 0
    client = SineClient(
        origin, mode=mode, public_key=public_key, proxy=proxy,
        tls_origin=tls_origin,
        tls_ca=tls_ca, collect=collect, tree=tree, accept_gzip=accept_gzip)
    try:
        data = b""
        for url in urls:
            parts = urlsplit(url)
            r = await client.get((parts.path or "/") + (f"?{parts.query}" if parts.query
                                                        else ""), byte_range)
            data = r.data
            state = "verified" if r.ok else f"FAILED ({r.error})"
            where = ""
            if byte_range is not None:
                of = "?" if r.length is None else r.length  # a chain stopped early: unknown
                where = (f" (bytes {r.offset}-{r.offset + len(r.data) - 1} of {of})"
                         if r.data else "")
            print(f"{url}: {state}; {len(r.data)} verified bytes{where}; "
                  f"trust={r.method or '-'}; cache={cache_verdict(r.headers)}", flush=True)
            failures += not r.ok
    finally:
        await client.close()
    c = client.counters
    print(f"session: {c.public_key_operations} public-key operations "
          f"({c.signature_verifications} signatures, {c.tls_handshakes} TLS handshakes), "
          f"{c.origin_round_trips} origin round trips, {c.requests} requests, "
          f"{c.bytes_received} bytes received")
    if output is not None:
        output.write_bytes(data)
    return 1 if failures else 0


def fetch_and_report(origin: str, urls: list[str], **options: Any) -> int:
    """Fetch ``urls`` of ``origin`` in one session, print one line per document and the session's
    counters; exit status 0 iff every document verified (what ``python -m sine.fetch`` runs)."""
    return asyncio.run(_fetch_and_report(origin, urls, **options))
