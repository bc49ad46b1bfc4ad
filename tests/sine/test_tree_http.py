"""Tree mode and MICE over HTTP without a cache: the origin's routes, the client's modes, the
header parsers (fuzzed), and the bytes a range costs on the wire (issue 25).

The origin is the real :class:`sine.aio.server.OriginServer` on loopback; the client is
:class:`sine.aio.client.SineClient`.  Caches come in ``test_tree_caches.py``, tampering in
``test_tamper_cache.py``.
"""

from __future__ import annotations

import asyncio
import base64
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from sine.aio.client import HttpConnection, SineClient
from sine.aio.http import RangeUnsatisfiable
from sine.aio.server import OriginServer
from sine.algorithms import SigningKey
from sine.errors import HttpSignatureError, LocalProtocolError, SineError, TagExpired
from sine.httpsig import PATH_COMPONENT, key_id_for, open_mice_response, verify_response
from sine.mice import mice_decode, pull_digest
from sine.site import load_mice_head, sign_site, tree_files
from sine.tree import (
    GroupMismatch,
    TreeFormatError,
    TreeHash,
    build_outboard,
    encode_interleaved,
    make_proof,
    pull_outboard,
    push_outboard,
    push_range_proof,
    sign_tree,
)
from sine.tree_http import (
    ByteRange,
    link_targets,
    parse_content_range,
    tree_id,
    tree_url,
)
from sine.tree_verifier import TreeVerifier, VerifiedData

pytestmark = [pytest.mark.timeout(120)]

T = TypeVar("T")
DOC = random.Random(25).randbytes(150_000)
MODES = [("sine", "sha256-1024"), ("separate", "sha256-1024"), ("mice", "sha256-1024"),
         ("tree", "sha256-1024"), ("tree", "blake3-1024"), ("tree", "blake3-4096")]
TREES = ((TreeHash.SHA256, 1024), (TreeHash.BLAKE3, 1024), (TreeHash.BLAKE3, 4096))


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(fn(), 60)
    return asyncio.run(bounded())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, SigningKey]]:
    from sine.algorithms import SigAlg

    root = tmp_path_factory.mktemp("tree-http")
    (root / "doc.bin").write_bytes(DOC)
    (root / "one.bin").write_bytes(b"x")
    (root / "empty.bin").write_bytes(b"")
    (root / "page.html").write_bytes(b"<html>" + b"tree " * 900 + b"</html>\n")
    key = SigningKey.generate(SigAlg.ED25519)
    sign_site(root, key, time.time(), trees=TREES, mice_record_size=1024)
    yield root, key


async def _body(body: object) -> bytes:
    return b"".join([chunk async for chunk in body])  # type: ignore[attr-defined]


async def _get(conn: HttpConnection, target: str, *headers: tuple[str, str]
               ) -> tuple[int, dict[str, str], bytes]:
    resp, body = await conn.request(target, [("Host", "origin"), *headers])
    return resp.status_code, {k.decode().lower(): v.decode("latin-1")
                              for k, v in resp.headers}, await _body(body)


# --- the verifier's outboard-later seam ----------------------------------------------------------


def test_outboard_supplied_after_the_head(ed_key: SigningKey) -> None:
    now = 1_700_000_000.0
    signed = sign_tree(DOC, "/doc.bin", ed_key, now, group_size=4096)
    v = TreeVerifier("/doc.bin", now, public_key=ed_key.verifying_key(), tag=signed.tag,
                     outboard_later=True)
    assert v.outboard_size == len(push_outboard(signed.outboard))
    events = v.supply_outboard(push_outboard(signed.outboard))
    events += v.receive_data(DOC) + v.receive_data(b"")
    assert b"".join(e.data for e in events if isinstance(e, VerifiedData)) == DOC
    early = TreeVerifier("/doc.bin", now, public_key=ed_key.verifying_key(), tag=signed.tag,
                         outboard_later=True)
    with pytest.raises(LocalProtocolError):
        early.receive_data(DOC[:10])
    with pytest.raises(LocalProtocolError):  # once only
        v.supply_outboard(push_outboard(signed.outboard))
    other = sign_tree(DOC[::-1], "/doc.bin", ed_key, now, group_size=1024).outboard
    wrong = TreeVerifier("/doc.bin", now, public_key=ed_key.verifying_key(), tag=signed.tag,
                         outboard_later=True)
    with pytest.raises(TreeFormatError) as exc:
        wrong.supply_outboard(push_outboard(other))
    assert exc.value.block == 1
    with pytest.raises(LocalProtocolError):
        wrong.receive_data(DOC)
    small = TreeVerifier("/e", now, public_key=ed_key.verifying_key(),
                         tag=sign_tree(b"", "/e", ed_key, now).tag, outboard_later=True)
    assert any(type(e).__name__ == "TreeVerified"
               for e in small.supply_outboard(push_outboard(build_outboard(b"", 1024,
                                                                           TreeHash.SHA256)[0])))


# --- signing: trees and MICE heads beside the chain tags ---------------------------------------


def test_sign_site_writes_trees_and_mice_only_when_needed(tmp_path: Path, ed_key: SigningKey
                                                         ) -> None:
    now = 1_700_000_000.0
    (tmp_path / "a.bin").write_bytes(DOC[:5000])
    (tmp_path / "b.bin").write_bytes(DOC[5000:9000])
    sign_site(tmp_path, ed_key, now, mice_record_size=2048)
    files = {p: tmp_path.joinpath(*tree_files(tmp_path, "sha256-1024", p)[0].parts)
             for p in ("/a.bin", "/b.bin")}
    before = {p: (f.read_bytes(), f.stat().st_mtime_ns) for p, f in files.items()}
    mice_before = load_mice_head(tmp_path, "/b.bin")
    assert mice_before is not None and mice_before.record_size == 2048
    (tmp_path / "a.bin").write_bytes(DOC[:5001])
    sign_site(tmp_path, ed_key, now + 60, mice_record_size=2048)
    assert files["/b.bin"].stat().st_mtime_ns == before["/b.bin"][1]  # untouched
    assert files["/a.bin"].read_bytes() != before["/a.bin"][0]
    assert load_mice_head(tmp_path, "/b.bin") == mice_before
    tag, ob = tree_files(tmp_path, "blake3-1024", "/a.bin")
    ob.unlink()
    sign_site(tmp_path, ed_key, now + 120, mice_record_size=2048)
    assert ob.is_file()  # a missing tree is written again
    tag.write_bytes(tag.read_bytes()[:-5])  # a damaged tree tag is signed again
    sign_site(tmp_path, ed_key, now + 180, mice_record_size=2048)
    from sine.tree import pull_tree_tag
    from tls12.buffer import Buffer
    assert pull_tree_tag(Buffer(tag.read_bytes())).head.content_length == 5001
    with pytest.raises(ValueError):
        sign_site(tmp_path, ed_key, now, mice_record_size=512)
    with pytest.raises(ValueError):
        sign_site(tmp_path, ed_key, now, trees=((TreeHash.SHA256, 2048),))


def test_mice_signature_is_bound_to_path_and_expiry(site: tuple[Path, SigningKey]) -> None:
    root, key = site
    head = load_mice_head(root, "/doc.bin")
    assert head is not None
    fields = list(head.fields)
    pk = key.verifying_key()
    now = head.created + 10
    signed, decoder = open_mice_response(200, fields, pk, key_id=key_id_for(pk), now=now,
                                         path="/doc.bin", max_age=None)
    assert signed.covers(PATH_COMPONENT) and signed.expires is not None
    from sine.mice import mice_encode
    body = mice_encode(DOC, 1024).body
    assert mice_decode(body, pull_digest(dict(fields)["Digest"])) == DOC
    for path in ("/page.html", "/doc.bin/"):
        with pytest.raises(HttpSignatureError):
            open_mice_response(200, fields, pk, key_id=key_id_for(pk), now=now, path=path,
                               max_age=None)
    with pytest.raises(HttpSignatureError):  # past E
        open_mice_response(200, fields, pk, key_id=key_id_for(pk), now=signed.expires + 60,
                           path="/doc.bin", max_age=None)
    plain = [(n, v) for n, v in fields if n != "Signature-Input"] + [
        ("Signature-Input", dict(fields)["Signature-Input"].replace(";expires=", ";x="))]
    with pytest.raises(HttpSignatureError):
        open_mice_response(200, plain, pk, key_id=key_id_for(pk), now=now, path="/doc.bin",
                           max_age=None)
    with pytest.raises(HttpSignatureError):
        verify_response(200, fields, None, pk, key_id=key_id_for(pk), now=now,
                        request_path="no-slash", max_age=None)
    # correctly signed heads that lack the path binding, or an expiry, are refused too
    from sine.httpsig import MICE_COVERED, sign_response
    from sine.mice import response_fields
    base = [("Content-Type", "application/octet-stream"), *response_fields(mice_encode(DOC, 1024))]
    for covered, expires in [(MICE_COVERED, now + 3600), ((*MICE_COVERED, PATH_COMPONENT), None)]:
        lines = sign_response(200, base, body, key, key_id=key_id_for(pk), now=now,
                              expires=expires, unencoded=DOC, covered=covered,
                              request_path="/doc.bin")
        verify_response(200, lines, body, pk, key_id=key_id_for(pk), now=now, max_age=None,
                        request_path="/doc.bin", require=())  # authentic as signed ...
        with pytest.raises(HttpSignatureError):  # ... but not enough for a SINE client
            open_mice_response(200, lines, pk, key_id=key_id_for(pk), now=now,
                               path="/doc.bin", max_age=None)


# --- the origin's routes --------------------------------------------------------------------------


def test_origin_ranges_and_tree_routes(site: tuple[Path, SigningKey]) -> None:
    root, key = site

    async def go() -> None:
        origin = OriginServer(root)
        port, _ = await origin.start()
        conn = HttpConnection("127.0.0.1", port)
        try:
            status, h, body = await _get(conn, "/doc.bin")
            assert status == 200 and body == DOC and h["accept-ranges"] == "bytes"
            etag = h["etag"]
            for spec, (a, b) in [("bytes=0-0", (0, 0)), ("bytes=1000-2047", (1000, 2047)),
                                 ("bytes=149000-", (149000, 149999)),
                                 ("bytes=-100", (149900, 149999)),
                                 ("bytes=149990-999999", (149990, 149999))]:
                status, h, body = await _get(conn, "/doc.bin", ("Range", spec))
                assert status == 206 and body == DOC[a:b + 1], spec
                assert parse_content_range(h["content-range"]) == (a, b, len(DOC))
                assert h["etag"] == etag
            for spec in ("bytes=150000-", "bytes=-0", "bytes=9-3", "bytes=x-1"):
                status, h, body = await _get(conn, "/doc.bin", ("Range", spec))
                assert status == 416 and h["content-range"] == f"bytes */{len(DOC)}", spec
            status, _, body = await _get(conn, "/empty.bin", ("Range", "bytes=0-"))
            assert status == 416
            for extra in [("Range", "bytes=0-1,5-6"), ("Range", "items=0-1")]:
                status, _, body = await _get(conn, "/doc.bin", extra)
                assert status == 200 and body == DOC
            status, _, body = await _get(conn, "/doc.bin", ("Range", "bytes=5-9"),
                                         ("If-Range", '"old"'))
            assert status == 200 and body == DOC
            status, _, body = await _get(conn, "/doc.bin", ("Range", "bytes=5-9"),
                                         ("If-Range", etag))
            assert status == 206 and body == DOC[5:10]
            status, _, body = await _get(conn, "/doc.bin", ("Range", "bytes=5-9"),
                                         ("If-None-Match", etag))
            assert status == 304 and body == b""
            # the tree resources follow the URL convention; the tag announces the outboard
            for alg, g in TREES:
                ident = tree_id(alg, g)
                tag_file, ob_file = tree_files(root, ident, "/doc.bin")
                status, h, body = await _get(conn, tree_url(ident, "tag", "/doc.bin"))
                assert status == 200 and body == tag_file.read_bytes()
                assert h["content-type"] == "application/sine-tree-tag"
                assert link_targets([h["link"]], "sine-tree") == [
                    tree_url(ident, "outboard", "/doc.bin")]
                status, h, body = await _get(conn, tree_url(ident, "outboard", "/doc.bin"))
                assert status == 200 and body == ob_file.read_bytes()
                assert h["content-type"] == "application/sine-tree"
                assert "max-age=" in h["cache-control"] and h["etag"] != etag
                status, _, part = await _get(conn, tree_url(ident, "outboard", "/doc.bin"),
                                             ("Range", "bytes=16-79"))
                assert status == 206 and part == body[16:80]
                outboard = pull_outboard(__import__("tls12.buffer").buffer.Buffer(body))
                proof = make_proof(outboard, 70_000, 80_000)
                status, h, got = await _get(conn, tree_url(
                    ident, "proof", "/doc.bin", (proof.first_group, proof.groups)))
                assert status == 200 and got == push_range_proof(proof)
                status, _, got = await _get(conn, tree_url(ident, "stream", "/doc.bin"))
                assert status == 200 and got == b"".join(encode_interleaved(DOC, outboard))
                n = -(-len(DOC) // g)
                for bad in [tree_url(ident, "proof", "/doc.bin", (n - 1, 2)),
                            tree_url(ident, "proof", "/empty.bin", (0, 2)),
                            tree_url(ident, "tag", "/missing.bin")]:
                    status, _, _ = await _get(conn, bad)
                    assert status == 404, bad
            for bad in ["/.sine/tree/md5-1024/tag/doc.bin", "/.sine/tree/sha256-2048/tag/doc.bin",
                        "/.sine/tree/sha256-1024/proof/0-0/doc.bin",
                        "/.sine/tree/sha256-16384/tag/doc.bin",  # not signed with this tree
                        "/.sine/trees/sha256-1024/doc.bin.tt", "/.sine/mice/doc.bin.json"]:
                status, _, _ = await _get(conn, bad)
                assert status == 404, bad
            # the MICE variant: encoded body, Digest and an RFC 9421 signature bound to the path
            status, h, body = await _get(conn, "/doc.bin", ("Accept-Encoding", "mi-sha256-03"))
            assert status == 200 and h["content-encoding"] == "mi-sha256-03"
            assert h["vary"] == "Accept-Encoding" and "sine=" in h["signature"]
            assert mice_decode(body, pull_digest(h["digest"])) == DOC
            pk = key.verifying_key()
            verify_response(200, list(h.items()), body, pk, key_id=key_id_for(pk),
                            now=time.time(), max_age=None, request_path="/doc.bin")
            status, h, body = await _get(conn, "/doc.bin", ("Accept-Encoding", "gzip"))
            assert status == 200 and body == DOC and "content-encoding" not in h
        finally:
            await conn.close()
            await origin.close()

    run(go)


# --- every mode, whole documents and random ranges, byte-exact -----------------------------------


def _random_ranges(rng: random.Random, length: int, count: int) -> list[ByteRange]:
    out = [ByteRange(0, 0), ByteRange(length - 1, None), ByteRange(None, 1),
           ByteRange(length - 5000, length + 10)]
    for _ in range(count):
        a = rng.randrange(length)
        kind = rng.random()
        if kind < 0.6:
            out.append(ByteRange(a, min(length - 1, a + rng.randrange(1, 20_000))))
        elif kind < 0.8:
            out.append(ByteRange(a, None))
        else:
            out.append(ByteRange(None, rng.randrange(1, length)))
    return out


@pytest.mark.parametrize("mode,tree", MODES)
def test_every_mode_whole_and_random_ranges(site: tuple[Path, SigningKey], mode: str,
                                            tree: str) -> None:
    root, key = site
    rng = random.Random(f"{mode}-{tree}")

    async def go() -> None:
        origin = OriginServer(root)
        port, _ = await origin.start()
        try:
            async with SineClient(f"http://127.0.0.1:{port}", mode=mode, tree=tree,
                                  public_key=key.verifying_key(),
                                  mice_record_sizes=range(1024, 16385)) as c:
                for path in ("/doc.bin", "/one.bin", "/empty.bin", "/page.html"):
                    r = await c.get(path)
                    want = (root / path.lstrip("/")).read_bytes()
                    assert r.ok and r.data == want and r.offset == 0, (path, r.error)
                for spec in _random_ranges(rng, len(DOC), 8):
                    r = await c.get("/doc.bin", spec)
                    first, last = spec.resolve(len(DOC))
                    assert r.ok, (spec, r.error)
                    assert (r.offset, r.data) == (first, DOC[first:last + 1]), spec
                    assert r.status == (206 if mode == "tree" else 200)
                for path, spec in [("/doc.bin", ByteRange(len(DOC), None)),
                                   ("/empty.bin", ByteRange(0, None)),
                                   ("/empty.bin", ByteRange(None, 3))]:
                    r = await c.get(path, spec)
                    assert isinstance(r.error, RangeUnsatisfiable) and r.data == b"", (path, spec)
                r = await c.get("/one.bin", ByteRange(None, 5))
                assert r.ok and (r.offset, r.data) == (0, b"x")
        finally:
            await origin.close()

    run(go)


# --- the bytes a range costs ------------------------------------------------------------------------


def test_range_costs_range_plus_log_n_not_the_prefix(site: tuple[Path, SigningKey]) -> None:
    """Counted on the client's socket: a tree range costs the covering groups, a proof of
    O(log N) hashes and a small head; a chain (SINE, MICE) reads the prefix."""
    root, key = site

    async def go() -> dict[str, int]:
        origin = OriginServer(root)
        port, _ = await origin.start()
        spent: dict[str, int] = {}
        try:
            spec = ByteRange(135_000, 135_999)  # 1000 bytes at 90 %
            for mode, tree in MODES:
                async with SineClient(f"http://127.0.0.1:{port}", mode=mode, tree=tree,
                                      public_key=key.verifying_key()) as c:
                    r = await c.get("/doc.bin", spec)
                    assert r.ok and r.data == DOC[135_000:136_000], (mode, r.error)
                    spent[f"{mode} {tree}"] = c.counters.bytes_received
            conn = HttpConnection("127.0.0.1", port)
            await _get(conn, "/doc.bin", ("Range", spec.header()))
            spent["unverified"] = conn.bytes_received
            await conn.close()
        finally:
            await origin.close()
        return spent

    spent = run(go)
    for tree, g in [("sha256-1024", 1024), ("blake3-1024", 1024), ("blake3-4096", 4096)]:
        n = -(-len(DOC) // g)
        proof = 33 + 32 * 2 * n.bit_length()
        heads = 3 * 400  # three response heads
        budget = 2 * g + proof + 250 + heads  # covering groups, proof, tag, heads
        assert spent[f"tree {tree}"] <= budget, (tree, spent)
        assert spent[f"tree {tree}"] <= spent["unverified"] + 2 * g + proof + 1200
    for chain in ("sine sha256-1024", "separate sha256-1024", "mice sha256-1024"):
        assert spent[chain] >= 136_000, (chain, spent)  # the whole prefix
        assert spent[chain] > 20 * spent["tree sha256-1024"]


# --- the command line ----------------------------------------------------------------------------


def test_fetch_cli_tree_range_and_mice(site: tuple[Path, SigningKey], tmp_path: Path) -> None:
    root, _ = site
    from tests.sine.cache_procs import BackgroundOrigin

    origin = BackgroundOrigin(root)
    try:
        pem = str(root / ".sine" / "public.pem")
        out = tmp_path / "slice.bin"
        for mode, extra in [("tree", ["--tree", "blake3-4096"]), ("mice", [])]:
            proc = subprocess.run(
                [sys.executable, "-m", "sine.fetch", f"{origin.url}/doc.bin", "--key", pem,
                 "--mode", mode, "--range", "100000-100999", "--output", str(out), *extra],
                capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert out.read_bytes() == DOC[100_000:101_000]
            assert "1000 verified bytes (bytes 100000-100999 of " in proc.stdout
            assert "1 signatures" in proc.stdout, proc.stdout
        for bad in (["--range", "5-1"], ["--range", "1-2,4-5"], ["--tree", "md5-1024"],
                    ["--range", "x"]):
            proc = subprocess.run(
                [sys.executable, "-m", "sine.fetch", f"{origin.url}/doc.bin", "--key", pem,
                 "--mode", "tree", *bad], capture_output=True, text=True, timeout=60)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, bad
        proc = subprocess.run(
            [sys.executable, "-m", "sine.fetch", f"{origin.url}/doc.bin", "--key", pem,
             "--mode", "tree", "--range", f"{len(DOC)}-"], capture_output=True, text=True,
            timeout=60)
        assert proc.returncode == 1 and "FAILED" in proc.stdout
    finally:
        origin.stop()


def test_expired_tree_tag_fails_closed(tmp_path: Path, ed_key: SigningKey) -> None:
    (tmp_path / "old.bin").write_bytes(DOC[:3000])
    sign_site(tmp_path, ed_key, time.time() - 10_000, lifetime=3600)

    async def go() -> None:
        origin = OriginServer(tmp_path)
        port, _ = await origin.start()
        try:
            for mode in ("tree", "mice"):
                async with SineClient(f"http://127.0.0.1:{port}", mode=mode,
                                      public_key=ed_key.verifying_key()) as c:
                    for spec in (None, ByteRange(10, 20)):
                        r = await c.get("/old.bin", spec)
                        assert not r.ok and r.data == b"", (mode, spec)
                        assert isinstance(r.error, TagExpired if mode == "tree"
                                          else HttpSignatureError), r.error
                        assert isinstance(r.error, SineError) and r.error.block == 0
        finally:
            await origin.close()

    run(go)


def test_b64_digest_of_the_stored_head_is_canonical(site: tuple[Path, SigningKey]) -> None:
    head = load_mice_head(site[0], "/doc.bin")
    assert head is not None
    value = dict(head.fields)["Digest"].split("=", 1)[1]
    assert base64.b64encode(base64.b64decode(value)).decode() == value


def test_group_mismatch_is_reported_for_a_tampered_origin_file(site: tuple[Path, SigningKey],
                                                               tmp_path: Path) -> None:
    """A docroot whose outboard on disk was altered: the origin serves it, the client blames
    the outboard (block 1) or the group it cannot verify -- never releases a wrong byte."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(site[0], root)
    key = site[1]
    _, ob = tree_files(root, "sha256-1024", "/doc.bin")
    raw = bytearray(ob.read_bytes())
    raw[16 + 64 * 5 + 3] ^= 0x01  # one hash in the sixth parent
    ob.write_bytes(bytes(raw))

    async def go() -> None:
        origin = OriginServer(root)
        port, _ = await origin.start()
        try:
            async with SineClient(f"http://127.0.0.1:{port}", mode="tree",
                                  public_key=key.verifying_key()) as c:
                r = await c.get("/doc.bin")
                assert isinstance(r.error, GroupMismatch) and r.data == DOC[:len(r.data)]
                assert len(r.data) < len(DOC)
                assert r.error.block == len(r.data) // 1024 + 1
        finally:
            await origin.close()

    run(go)
