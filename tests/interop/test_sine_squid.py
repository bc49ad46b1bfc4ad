"""SINE, SINEB and SINEX through a real, unmodified Squid started on loopback.

Claims checked here (issue 5, "Must show"):

* the second request of every object is a Squid cache HIT (Squid's own access log) and the
  client verifies it; the origin is not contacted again;
* a SINEX browsing session over a small linked site costs one signature verification and no
  origin round trip; SINEB costs one TLS handshake and one origin round trip per document
  (or one for the batch with AT_collect);
* a tampering proxy (flipped byte in block k, dropped tail, reordered blocks, replayed expired
  tag, swapped tags of two documents) makes verification fail at the right block and nothing
  unverified is released.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sine.aio.client import SineClient
from sine.aio.server import OriginServer, make_self_signed
from sine.algorithms import SigAlg, SigningKey, VerifyingKey
from sine.errors import (
    BlockMismatch,
    RemoteProtocolError,
    TagExpired,
    TruncatedDocument,
    WrongResource,
)
from sine.format import push_tag
from sine.site import load_signed, sign_site, signed_from_separate
from sine.tag import encode_stream, sign_document
from tests.interop.sine_tamper import TamperProxy
from tests.interop.squid_helpers import SquidProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

BS = 1024
DOC = bytes((i * 13 + i // 97) % 256 for i in range(10 * BS - 300))  # 10 blocks
OTHER = bytes((i * 29 + 5) % 256 for i in range(len(DOC)))
SITE = {
    "index.html": b'<html><a href="a.html">A</a> <a href="b.html">B</a> <a href="c/">C</a>'
    b' <img src="doc.bin"></html>\n',
    "a.html": b'<html><a href="/">home</a> <a href="b.html">B</a></html>\n',
    "b.html": b'<html><a href="index.html">home</a> <a href="a.html">A</a></html>\n',
    "c/index.html": b'<html><a href="../">home</a></html>\n',
    "doc.bin": DOC,
    "other.bin": OTHER,
}


@pytest.fixture(scope="module")
def squid() -> Iterator[SquidProcess]:
    with SquidProcess() as proc:
        yield proc


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SigningKey]:
    root = tmp_path_factory.mktemp("docroot")
    for rel, data in SITE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)  # the paper's default scheme
    sign_site(root, key, time.time())
    return root, key


def run(coro_fn: Callable[[], object]) -> object:
    return asyncio.run(asyncio.wait_for(coro_fn(), 60))  # type: ignore[arg-type]


def codes_for(squid: SquidProcess, url: str, count: int) -> list[str]:
    entries = [e for e in squid.access_entries() if e["url"] == url]
    deadline = time.monotonic() + 5
    while len(entries) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        entries = [e for e in squid.access_entries() if e["url"] == url]
    return [e["code"] for e in entries]


@pytest.mark.parametrize("mode", ["sine", "separate"])
def test_second_request_is_a_squid_hit_and_verifies(
    squid: SquidProcess, site: tuple[Path, SigningKey], mode: str
) -> None:
    root, key = site
    paths = ["/index.html", "/doc.bin", "/a.html"]

    async def go() -> tuple[int, list[list[bool]], int, int]:
        origin = OriginServer(root)
        port, _ = await origin.start()
        oks = []
        try:
            for _session in range(2):
                pk = VerifyingKey.from_pem(key.verifying_key().to_pem())
                async with SineClient(f"http://127.0.0.1:{port}", mode=mode, public_key=pk,
                                      proxy=squid.url) as client:
                    results = [await client.get(p) for p in paths]
                    oks.append([r.ok and r.data == SITE[p.lstrip("/")]
                                for r, p in zip(results, paths, strict=True)])
                    if _session == 0:
                        first = origin.stats.http_requests
            return port, oks, first, origin.stats.http_requests
        finally:
            await origin.close()

    port, oks, after_first, after_second = run(go)  # type: ignore[misc]
    assert oks == [[True] * 3, [True] * 3]
    assert after_second == after_first, "second session must not reach the origin"
    per_doc = 2 if mode == "separate" else 1
    assert after_first == per_doc * len(paths)
    urls = [f"http://127.0.0.1:{port}{p}" for p in paths]
    if mode == "separate":
        urls += [f"http://127.0.0.1:{port}/.sine/at{p}" for p in paths]
    for url in urls:
        codes = codes_for(squid, url, 2)
        assert codes[0] == "TCP_MISS", (url, codes)
        assert codes[1] in ("TCP_HIT", "TCP_MEM_HIT"), (url, codes)


def test_sinex_session_costs_one_signature_and_no_origin_trip(
    squid: SquidProcess, site: tuple[Path, SigningKey]
) -> None:
    root, key = site
    browse = ["/index.html", "/a.html", "/b.html", "/c/", "/doc.bin", "/a.html", "/index.html"]

    async def go() -> list[tuple[int, int, int, list[str]]]:
        origin = OriginServer(root)
        port, _ = await origin.start()
        out = []
        try:
            for _session in range(2):
                before = origin.stats.http_requests
                pk = VerifyingKey.from_pem(key.verifying_key().to_pem())
                async with SineClient(f"http://127.0.0.1:{port}", mode="sinex", public_key=pk,
                                      proxy=squid.url) as client:
                    results = [await client.get(p) for p in browse]
                    assert all(r.ok for r in results), [str(r.error) for r in results]
                    c = client.counters
                    out.append((c.public_key_operations, c.origin_round_trips,
                                origin.stats.http_requests - before,
                                [r.x_cache.split()[0] for r in results]))
            return out
        finally:
            await origin.close()

    (pk1, rt1, origin1, _), (pk2, rt2, origin2, xcache2) = run(go)  # type: ignore[misc]
    assert (pk1, rt1) == (1, 0)
    assert origin1 == len(set(browse))  # cold cache: each distinct document once
    assert (pk2, rt2, origin2) == (1, 0, 0)  # warm cache: Squid answers everything
    assert set(xcache2) == {"HIT"}


@pytest.mark.parametrize("collect", [False, True])
def test_sineb_signs_over_tls_and_serves_from_cache(
    squid: SquidProcess, site: tuple[Path, SigningKey], tmp_path: Path, collect: bool
) -> None:
    root, _key = site
    cert, tls_key = make_self_signed("127.0.0.1")
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(tls_key)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    paths = ["/index.html", "/doc.bin", "/b.html"]

    async def go() -> list[tuple[int, int, int, list[str]]]:
        origin = OriginServer(root)
        port, tls_port = await origin.start(tls=ctx)
        out = []
        try:
            for _session in range(2):
                before = origin.stats.http_requests
                async with SineClient(
                    f"http://127.0.0.1:{port}", mode="sineb", proxy=squid.url,
                    tls_origin=f"https://127.0.0.1:{tls_port}", tls_ca=cert, collect=collect,
                ) as client:
                    results = [await client.get(p) for p in paths]
                    assert all(r.ok and r.method == "digest" for r in results)
                    c = client.counters
                    out.append((c.public_key_operations, c.origin_round_trips,
                                origin.stats.http_requests - before,
                                [r.x_cache.split()[0] for r in results]))
            return out
        finally:
            await origin.close()

    (_, _, cold, _), (pk_ops, trips, warm, xcache) = run(go)  # type: ignore[misc]
    assert cold == len(paths)
    assert pk_ops == 1 and trips == (1 if collect else len(paths))
    assert warm == 0 and set(xcache) == {"HIT"}


# -- tampering -------------------------------------------------------------------------------


def _stream(root: Path, path: str) -> tuple[bytes, int]:
    """The origin's encoded body for ``path`` and the length of its tag."""
    at = load_signed(root, path)
    assert at is not None
    data = (root / path.lstrip("/")).read_bytes()
    signed = signed_from_separate(at)
    return b"".join(encode_stream(data, signed)), len(push_tag(at.tag))


def _record(tag_len: int, k: int) -> int:
    return tag_len + (k - 1) * (BS + 32)


def _flip(k: int) -> Callable[[bytes, int, Path, SigningKey], bytes]:
    def f(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
        out = bytearray(body)
        out[_record(tag_len, k) + 100] ^= 0x20
        return bytes(out)
    return f


def _drop_tail(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
    return body[: _record(tag_len, 7)]


def _reorder(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
    a, b = _record(tag_len, 4), _record(tag_len, 5)
    size = b - a
    return body[:a] + body[b : b + size] + body[a:b] + body[b + size :]


def _replay_expired(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
    old = sign_document(DOC, "/doc.bin", key, time.time() - 3 * 86400, lifetime=3600)
    return b"".join(encode_stream(DOC, old))


def _other_tag(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
    other, other_tag_len = _stream(root, "/other.bin")
    return other[:other_tag_len] + body[tag_len:]


def _other_blocks(body: bytes, tag_len: int, root: Path, key: SigningKey) -> bytes:
    other, other_tag_len = _stream(root, "/other.bin")
    return body[:tag_len] + other[other_tag_len:]


TAMPERING = [
    ("flip-block-1", _flip(1), BlockMismatch, 1),
    ("flip-block-6", _flip(6), BlockMismatch, 6),
    ("flip-last-block", _flip(10), BlockMismatch, 10),
    ("drop-tail", _drop_tail, TruncatedDocument, 7),
    ("reorder-4-5", _reorder, BlockMismatch, 4),
    ("replay-expired-tag", _replay_expired, TagExpired, 0),
    ("swap-tag-of-other-document", _other_tag, WrongResource, 0),
    ("swap-blocks-of-other-document", _other_blocks, BlockMismatch, 1),
]


@pytest.mark.parametrize("warm", [False, True], ids=["miss", "hit"])
@pytest.mark.parametrize(("name", "tamper", "error", "block"), TAMPERING,
                         ids=[t[0] for t in TAMPERING])
def test_tampering_proxy_is_caught_at_the_right_block(
    squid: SquidProcess, site: tuple[Path, SigningKey], name: str,
    tamper: Callable[[bytes, int, Path, SigningKey], bytes], error: type[RemoteProtocolError],
    block: int, warm: bool,
) -> None:
    root, key = site

    def rewrite(path: str, body: bytes) -> bytes | None:
        if path != "/doc.bin":
            return None
        tag_len = 4 + int.from_bytes(body[:4], "big") + 2
        tag_len += int.from_bytes(body[tag_len - 2 : tag_len], "big")
        return tamper(body, tag_len, root, key)

    async def go() -> tuple[object, list[str]]:
        origin = OriginServer(root)
        port, _ = await origin.start()
        proxy = TamperProxy(squid.url, rewrite)
        proxy_port = await proxy.start()
        try:
            pk = key.verifying_key()
            if warm:  # fill Squid's cache first, with an honest client
                async with SineClient(f"http://127.0.0.1:{port}", public_key=pk,
                                      proxy=squid.url) as honest:
                    assert (await honest.get("/doc.bin")).ok
            async with SineClient(f"http://127.0.0.1:{port}", public_key=pk,
                                  proxy=f"http://127.0.0.1:{proxy_port}") as client:
                result = await client.get("/doc.bin")
            return result, proxy.rewritten
        finally:
            await proxy.close()
            await origin.close()

    result, rewritten = run(go)  # type: ignore[misc]
    assert rewritten == ["/doc.bin"]
    assert isinstance(result.error, error), (name, result.error)
    assert result.error.block == block
    released = max(block - 1, 0) * BS
    assert result.data == DOC[:released], "exactly the blocks before the bad one are released"
    if warm:  # the tampered bytes came from Squid's cache, not from the origin
        assert result.x_cache.startswith("HIT"), result.x_cache


def test_tampered_plain_document_fails_in_separate_mode(
    squid: SquidProcess, site: tuple[Path, SigningKey]
) -> None:
    root, key = site

    def rewrite(path: str, body: bytes) -> bytes | None:
        if path != "/doc.bin":
            return None
        out = bytearray(body)
        out[3 * BS + 5] ^= 1
        return bytes(out)

    async def go() -> object:
        origin = OriginServer(root)
        port, _ = await origin.start()
        proxy = TamperProxy(squid.url, rewrite)
        proxy_port = await proxy.start()
        try:
            async with SineClient(f"http://127.0.0.1:{port}", mode="separate",
                                  public_key=key.verifying_key(),
                                  proxy=f"http://127.0.0.1:{proxy_port}") as client:
                return await client.get("/doc.bin")
        finally:
            await proxy.close()
            await origin.close()

    result = run(go)
    assert isinstance(result.error, BlockMismatch) and result.error.block == 4  # type: ignore[attr-defined]
    assert result.data == DOC[: 3 * BS]  # type: ignore[attr-defined]
