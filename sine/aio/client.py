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
``"http"``      and ``"https"``: unprotected baselines (the experiments' reference lines)
==============  ================================================================================

Instrumentation in :attr:`SineClient.counters` (what Table II counts): public-key operations
(signature verifications plus TLS handshakes), round trips to the origin over TLS, requests and
bytes received.  Only verified bytes are returned in :attr:`FetchResult.data`; on a failure the
result holds the verified prefix and the typed error.
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

from testbed.cli import connect_error

from ..algorithms import VerifyingKey
from ..cache_status import cache_verdict
from ..errors import DigestMismatch, RemoteProtocolError, SineError
from ..site import STORE_DIR, canonical_path
from ..verifier import (
    BlockVerified,
    ForwardAuthenticatorVerified,
    StreamVerifier,
    TagVerified,
)

__all__ = ["HttpConnection", "HttpError", "ConnectFailed", "FetchResult", "Counters", "SineClient", "MODES", "fetch_and_report"]

MODES = ("sine", "separate", "sineb", "sinex", "http", "https")


class HttpError(SineError):
    """Transport-level failure or an unexpected HTTP status."""


class ConnectFailed(HttpError):
    """The TCP connection or the TLS handshake to ``host:port`` failed (refused, unreachable,
    certificate not trusted).  Unlike a verification failure this ends the session:
    :meth:`SineClient.get` raises it instead of returning a failed :class:`FetchResult`."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(str(connect_error(f"{host}:{port}", cause)))
        self.host, self.port = host, port


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

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200


class HttpConnection:
    """One persistent HTTP/1.1 connection (h11), reopened when the peer closes it."""

    def __init__(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                 on_connect: Callable[[], None] | None = None) -> None:
        self.host, self.port, self.ssl_context = host, port, ssl_context
        self.on_connect = on_connect
        self.bytes_received = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._conn: h11.Connection | None = None

    async def _open(self) -> None:
        try:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context else None)
        except OSError as exc:
            raise ConnectFailed(self.host, self.port, exc) from exc
        self._conn = h11.Connection(h11.CLIENT)
        if self.on_connect:
            self.on_connect()

    async def connect(self) -> None:
        """Open the connection now unless it is open and idle (ready for a request).

        The TCP connect -- and, with an ``ssl_context``, the TLS handshake -- then happens here
        rather than inside the next :meth:`request`, which reuses the open connection.  Raises
        :class:`ConnectFailed` when the peer cannot be reached.
        """
        if self._conn is None or self._conn.our_state is not h11.IDLE:
            await self.close()
            await self._open()

    async def request(
        self, target: str, headers: list[tuple[str, str]], method: str = "GET"
    ) -> tuple[h11.Response, AsyncIterator[bytes]]:
        """Send a request; return the response head and an iterator over its body chunks.

        The body must be consumed (or :meth:`close` called) before the next request.
        """
        await self.connect()
        assert self._conn is not None and self._writer is not None
        conn = self._conn
        self._writer.write(conn.send(h11.Request(method=method, target=target, headers=headers)))
        self._writer.write(conn.send(h11.EndOfMessage()))
        await self._writer.drain()
        head = await self._next()
        if not isinstance(head, h11.Response):
            raise HttpError(f"unexpected {type(head).__name__}")
        return head, self._body()

    async def _next(self) -> h11.Event:
        assert self._conn is not None and self._reader is not None
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpError(f"HTTP protocol error: {exc}") from None
            if event is h11.NEED_DATA:
                data = await self._reader.read(65536)
                self.bytes_received += len(data)
                self._conn.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            return event  # type: ignore[return-value]  # not NEED_DATA; PAUSED only after the response (see report)

    async def _body(self) -> AsyncIterator[bytes]:
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert self._conn is not None
                if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
                    self._conn.start_next_cycle()
                return
            else:
                raise HttpError(f"connection ended inside the body ({type(event).__name__})")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass
        self._reader = self._writer = None
        self._conn = None


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
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if mode in ("sine", "separate", "sinex") and public_key is None:
            raise ValueError(f"mode {mode!r} needs the origin's public key")
        if mode in ("sineb", "https") and (tls_origin is None or tls_ca is None):
            raise ValueError(f"mode {mode!r} needs tls_origin and tls_ca")
        self.origin = origin.rstrip("/")
        self.mode, self.public_key, self.collect = mode, public_key, collect
        self.clock, self.on_block = clock, on_block
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

    async def get(self, path: str) -> FetchResult:
        """Fetch and verify ``path``; never raises for remote misbehaviour (see ``error``).

        Raises :class:`ConnectFailed` when the origin or the proxy cannot be reached at all.
        """
        try:
            result = await self._fetch(path)
            if isinstance(result.error, DigestMismatch) and self.mode == "sinex":
                # The site was re-signed since the linking page was read: verify afresh.
                self.trusted.pop(canonical_path(path), None)
                result = await self._fetch(path)
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

    async def _fetch(self, path: str) -> FetchResult:
        canon = canonical_path(path)
        if self.mode in ("http", "https"):
            resp, body = await self._get(path, tls=self.mode == "https")
            data = await self._read_all(body)
            return FetchResult(path, resp.status_code, data, None, self.mode,
                               _headers(resp).get("x-cache", ""), _headers(resp))
        separate = None
        trusted = None
        if self.mode == "separate":
            resp, body = await self._get(f"/{STORE_DIR}/at{quote(canon)}")
            separate = await self._read_all(body)
            if resp.status_code != 200:
                raise HttpError(f"tag fetch failed with {resp.status_code}")
        elif self.mode == "sineb":
            trusted = await self._at_sign(canon)
        elif self.mode == "sinex":
            trusted = self.trusted.get(canon)
        now = self.clock()
        extra = [] if self.mode == "separate" else [("Accept-Encoding", "sine")]
        resp, body = await self._get(path, extra)
        headers = _headers(resp)
        if resp.status_code != 200:
            await self._read_all(body)
            return FetchResult(path, resp.status_code, b"", HttpError(
                f"HTTP {resp.status_code}"), "", headers.get("x-cache", ""), headers)
        if self.mode != "separate" and headers.get("content-encoding") != "sine":
            await self._http.close()
            return FetchResult(path, resp.status_code, b"", HttpError(
                "response is not Content-Encoding: sine"), "", headers.get("x-cache", ""),
                headers)
        out = bytearray()
        method = ""
        try:
            verifier = StreamVerifier(
                canon, now, public_key=None if trusted else self.public_key,
                trusted_digest=trusted, separate=separate)
            async for chunk in body:
                if not chunk:
                    continue  # b"" would mean end of stream
                for event in verifier.receive_data(chunk):
                    method = self._handle(canon, event, out) or method
            for event in verifier.receive_data(b""):  # end of stream
                method = self._handle(canon, event, out) or method
        except RemoteProtocolError as exc:
            for early in exc.events:
                self._handle(canon, early, out)
            await self._http.close()
            return FetchResult(path, resp.status_code, bytes(out), exc, method,
                               headers.get("x-cache", ""), headers)
        return FetchResult(path, resp.status_code, bytes(out), None, method,
                           headers.get("x-cache", ""), headers)

    def _handle(self, path: str, event: object, out: bytearray) -> str | None:
        if isinstance(event, BlockVerified):
            out += event.data
            if self.on_block:
                self.on_block(path, event.index, event.data)
        elif isinstance(event, TagVerified):
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
) -> int:
    """Fetch ``urls`` in one session, print a line per document (with the cache verdict of
    :func:`sine.cache_status.cache_verdict`) and the session's counters; 0 iff all verified."""
    failures = 0
    client = SineClient(
        origin, mode=mode, public_key=public_key, proxy=proxy,
        tls_origin=tls_origin,
        tls_ca=tls_ca, collect=collect)
    try:
        data = b""
        for url in urls:
            parts = urlsplit(url)
            r = await client.get((parts.path or "/") + (f"?{parts.query}" if parts.query
                                                        else ""))
            data = r.data
            state = "verified" if r.ok else f"FAILED ({r.error})"
            print(f"{url}: {state}; {len(r.data)} verified bytes; trust={r.method or '-'};"
                  f" cache={cache_verdict(r.headers)}", flush=True)
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
