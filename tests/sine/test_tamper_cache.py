"""A malicious cache: every mode fails closed at the right block or range (issue 25).

A :class:`~tests.sine.cache_procs.TamperCache` sits between the client and a real nginx
``proxy_cache`` (which holds the genuine responses) and alters what it forwards:

=============  ====================================================================================
``flip``       one bit of document byte ``X`` (in group / block / record 49, 1-based)
``truncate``   the body cut just before byte ``X``
``other``      block 49 replaced by block 49 of another signed document of the same site
``expired``    every resource of the document answered by an old signed version (past its ``E``)
``mixed``      an old, still valid signed version's metadata (tree tag, outboard, proofs; the
               separate tag; the chain tag; the MICE signed head) with today's data, which
               differs from the old in group 49 only
=============  ====================================================================================

Each is fetched whole and as three ranges (covering ``X``, before it, after it).  Blame:
the tree names group ``g + 1`` of the bad group when streaming and the first group of the
range for a slice (its siblings cannot localise further); a chain names the first block
whose chained hash fails -- block 49 for data tampering, but block 1 for a stale chain tag
over new data (``h_1`` depends on every block), and the separate tag (whose links are all
signed) localises to block 49 again.  Only verified bytes are ever released: the prefix
before the bad block, the part of it inside a range, or nothing for a tree slice.

Also here: a bit flipped in nginx's cache file on disk (the cache itself is the attacker),
the command line's exit status and output file through the tampering cache, and caches that
transcode the signed codings (gzip on top verifies, stripping them fails closed).
"""

from __future__ import annotations

import asyncio
import gzip
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import h11
import pytest

from sine.aio.client import FetchResult, HttpError, SineClient
from sine.algorithms import SigAlg, SigningKey
from sine.errors import (
    BlockMismatch,
    HttpSignatureError,
    MiceIntegrityError,
    SineError,
    TagExpired,
    TruncatedDocument,
)
from sine.mice import mice_decode, pull_digest
from sine.origin import Origin
from sine.site import sign_site
from sine.tree import GroupMismatch, TreeFormatError, TreeHash, TreeTrailingData, TreeTruncated
from sine.tree_http import ByteRange, parse_content_range
from tests.sine.cache_procs import BackgroundOrigin, Exchange, Nginx, TamperCache

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

T = TypeVar("T")
G = 1024  # tree group = SINE block = MICE record
SIZE = 100_000
BAD = 48  # 0-based group of the tampering; blamed as block 49
X = BAD * G + 123
DOC = random.Random(1).randbytes(SIZE)
OTHER = random.Random(2).randbytes(SIZE)
OLD = DOC[:BAD * G] + random.Random(3).randbytes(G) + DOC[(BAD + 1) * G:]
PATH, OTHER_PATH = "/doc.bin", "/other.bin"
MODES = [("sine", "sha256-1024"), ("separate", "sha256-1024"), ("mice", "sha256-1024"),
         ("tree", "sha256-1024"), ("tree", "blake3-1024")]
COVER = ByteRange(47 * G + 500, 50 * G + 10)
BEFORE = ByteRange(1000, 20_000)
AFTER = ByteRange(90_000, 95_000)
TREES = ((TreeHash.SHA256, G), (TreeHash.BLAKE3, G))


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(fn(), 60)
    return asyncio.run(bounded())


@dataclass
class Sites:
    key: SigningKey
    root: Path
    expired: Origin  # the old signed version, past E
    mixed: Origin  # an old signed version still valid, content differs in group BAD


def _signed_root(base: Path, name: str, doc: bytes, key: SigningKey, now: float,
                 lifetime: int) -> Path:
    root = base / name
    root.mkdir()
    (root / PATH.lstrip("/")).write_bytes(doc)
    (root / OTHER_PATH.lstrip("/")).write_bytes(OTHER)
    sign_site(root, key, now, lifetime=lifetime, trees=TREES, mice_record_size=G)
    return root


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Sites:
    base = tmp_path_factory.mktemp("tamper")
    key = SigningKey.generate(SigAlg.ED25519)
    now = time.time()
    root = _signed_root(base, "current", DOC, key, now, 86400)
    expired_at = now - 3 * 86400
    expired = _signed_root(base, "expired", OLD, key, expired_at, 86400)
    mixed_at = now - 3600
    mixed = _signed_root(base, "mixed", OLD, key, mixed_at, 86400)
    return Sites(key, root, Origin(expired, lambda: expired_at + 60),
                 Origin(mixed, lambda: mixed_at + 60))


@pytest.fixture(scope="module")
def nginx(sites: Sites, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[BackgroundOrigin, Nginx]]:
    origin = BackgroundOrigin(sites.root)
    ng = Nginx(tmp_path_factory.mktemp("nginx-tamper") / "prefix", origin.port)
    yield origin, ng
    ng.stop()
    origin.stop()


# --- where document bytes sit in each kind of response -------------------------------------------


def _tag_length(body: bytes) -> int:
    info = int.from_bytes(body[:4], "big")
    return 4 + info + 2 + int.from_bytes(body[4 + info : 6 + info], "big")


def _offset(ex: Exchange, doc_offset: int) -> int | None:
    """Where document byte ``doc_offset`` is in this response's body (``None``: not in it)."""
    coding = ex.header("content-encoding")
    if coding == "sine":  # Tag | B_1 || h_2 | B_2 || h_3 | ...
        return _tag_length(ex.body) + doc_offset + 32 * (doc_offset // G)
    if coding == "mi-sha256-03":  # rs | r_1 | proof | r_2 | ...
        return 8 + doc_offset + 32 * (doc_offset // G)
    if ex.status == 206:
        first, last, _ = parse_content_range(ex.header("content-range") or "")
        return doc_offset - first if first <= doc_offset <= last else None
    return doc_offset


def _answer(origin: Origin, ex: Exchange) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What ``origin`` (sans-IO) answers to the request of ``ex``."""
    server, client = h11.Connection(h11.SERVER), h11.Connection(h11.CLIENT)
    headers = [("Host", "origin"), *((k, v) for k, v in ex.request_headers.items()
                                     if k not in ("host", "connection"))]
    req = h11.Request(method="GET", target=ex.target, headers=headers)
    server.receive_data(client.send(req) + client.send(h11.EndOfMessage()))
    request = server.next_event()
    assert isinstance(request, h11.Request)
    server.next_event()
    client.receive_data(b"".join(origin.respond(server, request, False)))
    resp = client.next_event()
    assert isinstance(resp, h11.Response)
    body = bytearray()
    while True:
        event = client.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        else:
            break
    drop = (b"content-length", b"date", b"server")
    return resp.status_code, [(k, v) for k, v in resp.headers if k not in drop], bytes(body)


def _is_document(ex: Exchange) -> bool:
    return ex.path == PATH


def _is_metadata(ex: Exchange) -> bool:
    return ex.path in (f"/.sine/at{PATH}",) or (ex.path.startswith("/.sine/tree/")
                                               and ex.path.endswith(PATH))


def tamperer(kind: str, sites: Sites) -> Callable[[Exchange], None]:
    def rewrite(ex: Exchange) -> None:
        if kind == "expired" and (_is_document(ex) or _is_metadata(ex)):
            ex.status, ex.headers, ex.body = _answer(sites.expired, ex)
        elif kind == "mixed" and _is_metadata(ex):
            ex.status, ex.headers, ex.body = _answer(sites.mixed, ex)
        elif kind == "mixed" and _is_document(ex):
            coding = ex.header("content-encoding")
            if coding in ("sine", "mi-sha256-03"):
                _, old_headers, old_body = _answer(sites.mixed, ex)
                if coding == "sine":  # the old chain tag in front of today's records
                    ex.body = old_body[:_tag_length(old_body)] + ex.body[_tag_length(ex.body):]
                else:  # the old signed head over today's body
                    ex.headers = old_headers
        elif kind in ("flip", "truncate", "other") and _is_document(ex):
            at = _offset(ex, X)
            start = _offset(ex, BAD * G)
            body = bytearray(ex.body)
            if kind == "flip" and at is not None:
                body[at] ^= 0x01
            elif kind == "truncate" and at is not None:
                del body[at:]
            elif kind == "other" and start is not None:
                body[start : start + G] = OTHER[BAD * G : (BAD + 1) * G]
            ex.body = bytes(body)
        else:
            return
        ex.tampered = True
    return rewrite


# --- the expected outcome -----------------------------------------------------------------------


def expected(mode: str, kind: str, spec: ByteRange | None
             ) -> tuple[type[Exception] | None, int, bytes]:
    """``(error class or None, blamed block, released bytes)`` for one fetch."""
    first, last = (0, SIZE - 1) if spec is None else spec.resolve(SIZE)
    whole = spec is None
    covers = first <= X <= last if kind != "mixed" else first < (BAD + 1) * G and last >= BAD * G
    prefix = DOC[first : min(BAD * G, last + 1)] if first < BAD * G else b""
    if kind == "expired":
        return (HttpSignatureError if mode == "mice" else TagExpired), 0, b""
    if mode == "tree":
        if not covers:
            return None, 0, DOC[first : last + 1]
        if whole:
            return (TreeTruncated if kind == "truncate" else GroupMismatch), BAD + 1, prefix
        g0 = first // G
        return (TreeTruncated, BAD + 1, b"") if kind == "truncate" else (GroupMismatch,
                                                                         g0 + 1, b"")
    # the chains read from the start: fine before the bad block, failed from it on
    if kind == "mixed" and mode in ("sine", "mice"):
        return (BlockMismatch if mode == "sine" else MiceIntegrityError), 1, b""
    if last < BAD * G:
        return None, 0, DOC[first : last + 1]
    if mode == "mice":
        return MiceIntegrityError, BAD + 1, prefix
    return (TruncatedDocument if kind == "truncate" else BlockMismatch), BAD + 1, prefix


def _check(r: FetchResult, mode: str, kind: str, spec: ByteRange | None) -> None:
    error, block, released = expected(mode, kind, spec)
    where = (mode, kind, spec)
    if error is None:
        assert r.ok and r.data == released, (where, r.error)
        return
    assert isinstance(r.error, error), (where, r.error)
    assert r.error.block == block, (where, r.error)  # type: ignore[attr-defined]
    assert r.data == released, (where, len(r.data), len(released))
    assert not r.ok


@pytest.mark.parametrize("kind", ["flip", "truncate", "other", "expired", "mixed"])
@pytest.mark.parametrize("mode,tree", MODES)
def test_tampering_cache_fails_closed_at_the_right_block(
        sites: Sites, nginx: tuple[BackgroundOrigin, Nginx], mode: str, tree: str,
        kind: str) -> None:
    _, ng = nginx

    async def go() -> None:
        proxy = TamperCache(ng.url, tamperer(kind, sites))
        async with proxy as url:
            for spec in (None, COVER, BEFORE, AFTER):
                async with SineClient(url, mode=mode, tree=tree,
                                      public_key=sites.key.verifying_key()) as c:
                    _check(await c.get(PATH, spec), mode, kind, spec)
        assert any(ex.tampered for ex in proxy.seen), "the tampering never happened"

    run(go)


def test_untampered_through_the_same_proxy_verifies(sites: Sites,
                                                    nginx: tuple[BackgroundOrigin, Nginx]
                                                    ) -> None:
    """The negative control: the same proxy, rewriting nothing, changes no outcome."""
    _, ng = nginx

    async def go() -> None:
        async with TamperCache(ng.url, lambda ex: None) as url:
            for mode, tree in MODES:
                async with SineClient(url, mode=mode, tree=tree,
                                      public_key=sites.key.verifying_key()) as c:
                    for spec in (None, COVER, BEFORE, AFTER):
                        r = await c.get(PATH, spec)
                        a, b = (0, SIZE - 1) if spec is None else spec.resolve(SIZE)
                        assert r.ok and r.data == DOC[a:b + 1], (mode, spec, r.error)

    run(go)


# --- the cache itself tampered: a bit flipped in nginx's cache file on disk -------------------------


def test_bit_flipped_in_nginx_cache_file(sites: Sites, tmp_path_factory: pytest.TempPathFactory
                                         ) -> None:
    origin = BackgroundOrigin(sites.root)
    ng = Nginx(tmp_path_factory.mktemp("nginx-disk") / "prefix", origin.port)
    try:
        async def fetch(mode: str, spec: ByteRange | None = None) -> FetchResult:
            async with SineClient(ng.url, mode=mode, public_key=sites.key.verifying_key()) as c:
                return await c.get(PATH, spec)

        async def go() -> None:
            assert (await fetch("tree")).ok  # the plain document is now in nginx's cache
            deadline = time.monotonic() + 10  # nginx renames its temp file after the reply
            while not (files := [f for f in ng.cache_files() if f.read_bytes().endswith(DOC)]):
                assert time.monotonic() < deadline, "nginx did not store the document"
                await asyncio.sleep(0.05)
            for f in files:
                raw = bytearray(f.read_bytes())
                raw[len(raw) - SIZE + X] ^= 0x40
                f.write_bytes(bytes(raw))
            seen = origin.server.stats.routes["document"]
            for mode in ("tree", "separate"):
                r = await fetch(mode)
                assert r.headers.get("x-cache-status") == "HIT"
                _check(r, mode, "flip", None)
            _check(await fetch("tree", COVER), "tree", "flip", COVER)
            _check(await fetch("tree", AFTER), "tree", "flip", AFTER)
            # the tampered copy was served from the cache: the origin never sent the document
            assert origin.server.stats.routes["document"] == seen

        run(go)
    finally:
        ng.stop()
        origin.stop()


# --- the command line through the tampering cache -----------------------------------------------


def test_fetch_cli_exits_1_and_writes_only_the_verified_prefix(
        sites: Sites, nginx: tuple[BackgroundOrigin, Nginx], tmp_path: Path) -> None:
    _, ng = nginx
    out = tmp_path / "out.bin"
    pem = str(sites.root / ".sine" / "public.pem")

    async def go() -> list[subprocess.CompletedProcess[str]]:
        async with TamperCache(ng.url, tamperer("flip", sites)) as url:
            results = []
            for args in (["--mode", "tree", "--tree", "blake3-1024"],
                         ["--mode", "tree", "--range", f"{COVER.first}-{COVER.last}"],
                         ["--mode", "mice"]):
                out.unlink(missing_ok=True)
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "sine.fetch", f"{url}{PATH}", "--key", pem,
                    "--output", str(out), *args,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
                results.append(subprocess.CompletedProcess(
                    args, proc.returncode or 0, stdout.decode(), stderr.decode()))
                assert out.read_bytes() == (b"" if "--range" in args else DOC[:BAD * G])
            return results

    for proc in run(go):
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "FAILED (block" in proc.stdout and "Traceback" not in proc.stderr


# --- caches that transcode the signed codings -------------------------------------------------


def _gzip_everything(ex: Exchange) -> None:
    """A non-compliant transcoder: gzip every body, whatever the client accepted."""
    if ex.status not in (200,):
        return
    coding = ex.header("content-encoding")
    ex.headers = [(k, v) for k, v in ex.headers if k.lower() != b"content-encoding"]
    ex.headers.append((b"Content-Encoding", (f"{coding}, gzip" if coding else "gzip").encode()))
    ex.body = gzip.compress(ex.body)
    ex.tampered = True


def _strip_codings(ex: Exchange) -> None:
    """A cache that decodes the signed coding and serves identity bytes."""
    coding = ex.header("content-encoding")
    if coding not in ("sine", "mi-sha256-03"):
        return
    if coding == "mi-sha256-03":
        ex.body = mice_decode(ex.body, pull_digest(ex.header("digest") or ""))
    else:
        ex.body = DOC
    ex.headers = [(k, v) for k, v in ex.headers if k.lower() != b"content-encoding"]
    ex.tampered = True


def _corrupt_gzip(ex: Exchange) -> None:
    """gzip whose deflate data is damaged: it may inflate to wrong bytes (caught by the
    verification) or fail to inflate (caught by the decoder)."""
    _gzip_everything(ex)
    if ex.tampered and len(ex.body) > 200:
        ex.body = ex.body[:100] + bytes([ex.body[100] ^ 0xFF]) + ex.body[101:]


def _bad_gzip_header(ex: Exchange) -> None:
    """A body labelled gzip that is not gzip at all."""
    _gzip_everything(ex)
    if ex.tampered:
        ex.body = b"\x00" + ex.body[1:]


@pytest.mark.parametrize("mode,tree", MODES)
def test_transcoding_caches(sites: Sites, nginx: tuple[BackgroundOrigin, Nginx], mode: str,
                            tree: str) -> None:
    """gzip added on top of any coding is undone and the bytes verify; a signed coding
    stripped by the cache, or a corrupt gzip layer, fails closed with nothing released."""
    _, ng = nginx

    async def fetch(rewrite: Callable[[Exchange], None]) -> FetchResult:
        async with TamperCache(ng.url, rewrite) as url:
            async with SineClient(url, mode=mode, tree=tree,
                                  public_key=sites.key.verifying_key()) as c:
                return await c.get(PATH)

    async def go() -> None:
        r = await fetch(_gzip_everything)
        assert r.ok and r.data == DOC, r.error
        r = await fetch(_corrupt_gzip)
        assert not r.ok and r.data == b"" and isinstance(r.error, SineError), r.error
        r = await fetch(_bad_gzip_header)
        assert not r.ok and r.data == b"" and isinstance(r.error, SineError), r.error
        assert "gzip" in str(r.error), r.error  # blamed on the coding, not on a later symptom
        r = await fetch(_strip_codings)
        if mode in ("sine", "mice"):
            assert isinstance(r.error, HttpError) and r.data == b"", r.error
        else:  # tree and separate use the identity document anyway
            assert r.ok and r.data == DOC

    run(go)


def _tree_case(name: str) -> Callable[[Exchange], None]:
    """Tampering aimed at tree mode's own resources and headers."""
    def rewrite(ex: Exchange) -> None:
        tree_res = ex.path.startswith("/.sine/tree/")
        if name == "wrong-range" and _is_document(ex) and ex.status == 206:
            # an honest 206 of *another* range: bytes 0.. of the same length
            first, last, length = parse_content_range(ex.header("content-range") or "")
            ex.body = DOC[: last - first + 1]
            ex.headers = [(k, v) for k, v in ex.headers if k.lower() != b"content-range"]
            ex.headers.append((b"Content-Range", f"bytes 0-{last - first}/{length}".encode()))
        elif name == "huge-outboard" and "/outboard/" in ex.path:
            ex.body += bytes(20_000_000)
        elif name.startswith("link") and "/tag/" in ex.path:
            target = {"link-elsewhere": "//elsewhere.example/outboard",
                      "link-other": "/.sine/tree/sha256-1024/outboard/other.bin"}[name]
            ex.headers = [(k, v) for k, v in ex.headers if k.lower() != b"link"]
            ex.headers.append((b"Link", f'<{target}>; rel="sine-tree"'.encode()))
        elif name == "unknown-coding" and tree_res and "/tag/" in ex.path:
            ex.headers.append((b"Content-Encoding", b"br"))
        elif name == "huge-document" and _is_document(ex) and ex.status == 200:
            ex.body += bytes(20_000_000)
        elif name == "ignore-range" and _is_document(ex) and ex.status == 206:
            # a cache that ignores Range: the whole document, padded, as a 200
            ex.status, ex.body = 200, DOC + bytes(20_000_000)
            ex.headers = [(k, v) for k, v in ex.headers if k.lower() != b"content-range"]
        else:
            return
        ex.tampered = True
    return rewrite


@pytest.mark.parametrize("case", ["wrong-range", "huge-outboard", "link-elsewhere",
                                  "link-other", "unknown-coding", "huge-document",
                                  "ignore-range"])
def test_tree_resources_tampered(sites: Sites, nginx: tuple[BackgroundOrigin, Nginx],
                                 case: str) -> None:
    """Tree mode's own plumbing under attack: a 206 for another range, an outboard or a
    document padded with 20 MB (read only up to the signed bound), a ``Link`` pointing off
    the origin (ignored) or at another document's outboard (fails at block 1), a tag in a
    coding the client never asked for, and a cache that answers a range with a padded 200
    (verified from the covering bytes; the rest is not read)."""
    _, ng = nginx

    async def go() -> None:
        async with TamperCache(ng.url, _tree_case(case)) as url:
            async with SineClient(url, mode="tree", public_key=sites.key.verifying_key()) as c:
                spec = COVER if case in ("wrong-range", "ignore-range") else None
                r = await c.get(PATH, spec)
                received = c.counters.bytes_received
        if case == "link-elsewhere":
            assert r.ok and r.data == DOC, r.error  # the convention was used instead
            return
        if case == "ignore-range":  # still verified, from the covering bytes of the 200 only
            assert r.ok and r.status == 200 and r.data == DOC[COVER.first:COVER.last + 1]
            assert received < 2_000_000, received  # type: ignore[misc]
            return
        assert not r.ok and isinstance(r.error, SineError), r.error
        want = {"wrong-range": (TreeFormatError, COVER.first // G + 1),  # type: ignore[operator]
                "huge-outboard": (TreeFormatError, 1), "link-other": (GroupMismatch, 1),
                "unknown-coding": (TreeFormatError, 0),
                "huge-document": (TreeTrailingData, SIZE // G + 2)}[case]
        assert isinstance(r.error, want[0]) and r.error.block == want[1], r.error
        assert r.data == (DOC if case == "huge-document" else b"")
        assert received < 2_000_000, received  # never the 20 MB

    run(go)


def test_old_site_copies_are_independent(sites: Sites) -> None:
    """The fixtures' three versions really differ where the tests say (group 49 only)."""
    assert DOC[:BAD * G] == OLD[:BAD * G] and DOC[(BAD + 1) * G:] == OLD[(BAD + 1) * G:]
    assert DOC[BAD * G:(BAD + 1) * G] != OLD[BAD * G:(BAD + 1) * G]
    assert shutil.which("nginx") or Path("/usr/sbin/nginx").exists()
