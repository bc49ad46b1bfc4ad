"""Every mode through real, unmodified caches: Squid and nginx ``proxy_cache`` (plain, with the
``slice`` module, and gzip-transcoding), whole documents and random ranges, cold and warm
(issue 25, "Through real caches").

Modes: the SINE chain (``sine``: interleaved stream, ``separate``: tag beside the plain
document), the MICE chain (``mi-sha256-03`` under an RFC 9421 signature) and tree mode over
SHA-256 and BLAKE3.  Each mode has its own document, so its first fetch through a cache is
really cold.  Warm means: the response says HIT (Squid's ``X-Cache``, nginx's
``X-Cache-Status``) and the origin saw no request at all.

What the gzip-transcoding nginx does to each mode (the client sends ``Accept-Encoding: gzip``
with its whole-resource requests):

* ``sine`` and ``mice``: nothing -- nginx does not compress a response that already has a
  ``Content-Encoding``; the signed coding arrives as sent and verifies.
* ``separate`` and ``tree``: the plain document, the tag, the outboard and the proofs arrive
  gzipped; the client inflates them (bounded by what the signed head allows) and verifies the
  inflated bytes -- the signature is over the identity bytes, so gzip is harmless.
* ranges are asked without ``gzip`` (a range of a compressed body is useless) and arrive as
  identity ``206`` responses.

The bytes a range costs are counted on the client's socket through warm caches: tree mode
pays the range, whole groups and ``O(log n)`` hashes; a chain pays the prefix.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from sine.aio.client import HttpConnection, SineClient
from sine.algorithms import SigAlg, SigningKey
from sine.cache_status import Outcome, cache_verdict
from sine.site import sign_site
from sine.tree import TreeHash
from sine.tree_http import ByteRange, parse_content_range
from tests.interop.squid_helpers import SquidProcess
from tests.sine.cache_procs import BackgroundOrigin, Nginx

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

T = TypeVar("T")
SIZE = 120_000
BIG = 2 * 1024 * 1024
MODES = [("sine", "sha256-1024"), ("separate", "sha256-1024"), ("mice", "sha256-1024"),
         ("tree", "sha256-1024"), ("tree", "blake3-1024")]
CACHES = ["squid", "nginx", "nginx-slice", "nginx-gzip"]
_WORDS = [bytes(random.Random(i).choices(range(97, 123), k=random.Random(-i).randint(2, 9)))
          for i in range(400)]


def _text(seed: str, size: int) -> bytes:
    """Compressible pseudo-text (so a gzip-transcoding cache really changes the bytes)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.choice(_WORDS) + b" "
    return bytes(out[:size])


def _doc_path(mode: str, tree: str) -> str:
    return f"/{mode}-{tree}.txt"


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(fn(), 60)
    return asyncio.run(bounded())


@dataclass
class Site:
    root: Path
    key: SigningKey
    docs: dict[str, bytes]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("tree-caches")
    docs = {_doc_path(m, t): _text(m + t, SIZE) for m, t in MODES}
    docs["/big.bin"] = random.Random(7).randbytes(BIG)
    for path, data in docs.items():
        (root / path.lstrip("/")).write_bytes(data)
    key = SigningKey.generate(SigAlg.ED25519)
    sign_site(root, key, time.time(), mice_record_size=1024,
              trees=((TreeHash.SHA256, 1024), (TreeHash.BLAKE3, 1024)))
    return Site(root, key, docs)


@pytest.fixture(scope="module")
def origin(site: Site) -> Iterator[BackgroundOrigin]:
    o = BackgroundOrigin(site.root)
    yield o
    o.stop()


@dataclass
class Cache:
    """How a client reaches the origin through one cache."""

    name: str
    origin_url: str  # what the client names as the origin
    proxy: str | None  # a forward proxy (Squid) or None (nginx is a reverse proxy)
    nginx: Nginx | None = None


@pytest.fixture(scope="module")
def squid() -> Iterator[SquidProcess]:
    with SquidProcess() as proc:
        yield proc


def _nginx(tmp_path_factory: pytest.TempPathFactory, origin: BackgroundOrigin, variant: str
           ) -> Iterator[Nginx]:
    ng = Nginx(tmp_path_factory.mktemp(f"nginx-{variant}") / "prefix", origin.port, variant)
    yield ng
    ng.stop()


@pytest.fixture(scope="module")
def nginx_plain(tmp_path_factory: pytest.TempPathFactory, origin: BackgroundOrigin
                ) -> Iterator[Nginx]:
    yield from _nginx(tmp_path_factory, origin, "plain")


@pytest.fixture(scope="module")
def nginx_slice(tmp_path_factory: pytest.TempPathFactory, origin: BackgroundOrigin
                ) -> Iterator[Nginx]:
    yield from _nginx(tmp_path_factory, origin, "slice")


@pytest.fixture(scope="module")
def nginx_gzip(tmp_path_factory: pytest.TempPathFactory, origin: BackgroundOrigin
               ) -> Iterator[Nginx]:
    yield from _nginx(tmp_path_factory, origin, "gzip")


def _cache(request: pytest.FixtureRequest, name: str, origin: BackgroundOrigin) -> Cache:
    if name == "squid":
        squid: SquidProcess = request.getfixturevalue("squid")
        return Cache(name, origin.url, squid.url)
    ng: Nginx = request.getfixturevalue(
        {"nginx": "nginx_plain", "nginx-slice": "nginx_slice", "nginx-gzip": "nginx_gzip"}[name])
    return Cache(name, ng.url, None, ng)


def _ranges(seed: str, length: int) -> list[ByteRange]:
    rng = random.Random(seed)
    out = []
    for _ in range(3):
        a = rng.randrange(length)
        out.append(ByteRange(a, min(length - 1, a + rng.randrange(1, 12_000))))
    return [*out, ByteRange(length - rng.randrange(1, 5000), None),
            ByteRange(None, rng.randrange(1, 3000))]


def _hit(headers: dict[str, str]) -> bool:
    return cache_verdict(headers).outcome is Outcome.HIT


@pytest.mark.parametrize("cache_name", CACHES)
@pytest.mark.parametrize("mode,tree", MODES)
def test_mode_through_cache_cold_and_warm(request: pytest.FixtureRequest, site: Site,
                                          origin: BackgroundOrigin, cache_name: str,
                                          mode: str, tree: str) -> None:
    cache = _cache(request, cache_name, origin)
    path = _doc_path(mode, tree)
    doc = site.docs[path]
    ranges = _ranges(cache_name + path, len(doc))
    gzip = cache_name == "nginx-gzip"

    def client() -> SineClient:
        return SineClient(cache.origin_url, mode=mode, tree=tree, proxy=cache.proxy,
                          public_key=site.key.verifying_key(), accept_gzip=gzip)

    async def go() -> None:
        async with client() as c:
            # cold: ranges first (nothing of this document is cached yet), then the whole
            first_range = True
            for spec in ranges:
                before = origin.bytes_sent
                r = await c.get(path, spec)
                a, b = spec.resolve(len(doc))
                assert r.ok and (r.offset, r.data) == (a, doc[a:b + 1]), (spec, r.error)
                if first_range and mode == "tree":
                    first_range = False
                    sent = origin.bytes_sent - before
                    if cache_name == "nginx-slice":  # only the 16 KiB slices it needs
                        assert sent < 16 * 1024 * (2 + (b - a) // 16384) + 8000, sent
                    elif cache_name == "nginx":  # proxy_cache fetches the whole object
                        assert sent > len(doc), sent
            r = await c.get(path)
            assert r.ok and r.data == doc, r.error
            if gzip:
                coding = r.headers.get("content-encoding")
                want = {"sine": "sine", "mice": "mi-sha256-03"}.get(mode, "gzip")
                assert coding == want, (mode, coding)
        # warm: a new session; the cache answers everything, the origin sees nothing
        async with client() as c:
            seen = origin.requests
            r = await c.get(path)
            assert r.ok and r.data == doc, r.error
            assert _hit(r.headers), r.headers
            for spec in ranges:
                r = await c.get(path, spec)
                a, b = spec.resolve(len(doc))
                assert r.ok and (r.offset, r.data) == (a, doc[a:b + 1]), (spec, r.error)
                assert _hit(r.headers), (spec, r.headers)
                if mode == "tree":
                    assert r.status == 206
                    assert parse_content_range(r.headers["content-range"])[2] == len(doc)
            assert origin.requests == seen, "a warm cache must not contact the origin"

    run(go)
    if cache.nginx is not None:  # nginx's own log agrees: the warm phase was all HITs
        lines = [ln for ln in cache.nginx.log() if ln[0].endswith(path.lstrip("/"))]
        assert lines and lines[-1][2] == "HIT", lines[-3:]


@pytest.mark.parametrize("cache_name", ["squid", "nginx"])
def test_range_bytes_on_the_wire_through_a_warm_cache(request: pytest.FixtureRequest,
                                                      site: Site, origin: BackgroundOrigin,
                                                      cache_name: str) -> None:
    """A 128 KiB range at 90 % of a 2 MiB document through a warm cache, counted on the
    client's socket: tree mode (SHA-256 and BLAKE3) costs at most 1.1 x the unverified range
    fetch; the chains (SINE, MICE) read the 1.8 MiB prefix."""
    cache = _cache(request, cache_name, origin)
    doc = site.docs["/big.bin"]
    first = int(0.9 * len(doc))
    spec = ByteRange(first, first + 128 * 1024 - 1)
    want = doc[spec.first:spec.last + 1]  # type: ignore[misc]

    async def go() -> dict[str, int]:
        spent: dict[str, int] = {}
        for mode, tree in MODES:
            async with SineClient(cache.origin_url, mode=mode, tree=tree, proxy=cache.proxy,
                                  public_key=site.key.verifying_key()) as c:
                assert (await c.get("/big.bin")).ok  # warm the cache (every resource)
                await c.get("/big.bin", spec)
            async with SineClient(cache.origin_url, mode=mode, tree=tree, proxy=cache.proxy,
                                  public_key=site.key.verifying_key()) as c:
                seen = origin.requests
                r = await c.get("/big.bin", spec)
                assert r.ok and r.data == want and _hit(r.headers), (mode, r.error)
                assert origin.requests == seen
                spent[f"{mode}/{tree}"] = c.counters.bytes_received
        host = cache.proxy or cache.origin_url
        conn = HttpConnection("127.0.0.1", int(host.rsplit(":", 1)[1]))
        target = (cache.origin_url if cache.proxy else "") + "/big.bin"
        resp, body = await conn.request(target, [("Host", cache.origin_url[7:]),
                                                 ("Range", spec.header())])
        assert resp.status_code == 206 and b"".join([c async for c in body]) == want
        spent["unverified"] = conn.bytes_received
        await conn.close()
        return spent

    spent = run(go)
    plain = spent["unverified"]
    for tree in ("sha256-1024", "blake3-1024"):
        assert spent[f"tree/{tree}"] <= 1.1 * plain, (tree, spent)
    for chain in ("sine/sha256-1024", "separate/sha256-1024", "mice/sha256-1024"):
        assert spent[chain] >= spec.first, (chain, spent)  # type: ignore[operator]
        assert spent[chain] >= 10 * spent["tree/sha256-1024"], (chain, spent)
