"""Origin server and verifying client over loopback (no cache), and the three CLIs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sine.aio.client import HttpConnection, SineClient
from sine.algorithms import SigningKey
from sine.errors import TagExpired
from sine.fetch import main as fetch_main
from sine.sign import main as sign_main
from sine.site import sign_site
from tests.sine.sine_helpers import site_files, write_site


@pytest.fixture
def signed_site(tmp_path: Path, ed_key: SigningKey) -> Path:
    root = write_site(tmp_path / "root", site_files())
    sign_site(root, ed_key, time.time())
    return root


def test_direct_fetch_all_modes_and_http_semantics(signed_site: Path, ed_key: SigningKey
                                                   ) -> None:
    from sine.aio.server import OriginServer

    async def go() -> None:
        origin = OriginServer(signed_site)
        port, _ = await origin.start()
        try:
            for mode in ("sine", "separate", "sinex"):
                async with SineClient(f"http://127.0.0.1:{port}", mode=mode,
                                      public_key=ed_key.verifying_key()) as c:
                    for path, rel in [("/", "index.html"), ("/img.bin", "img.bin")]:
                        r = await c.get(path)
                        assert r.ok and r.data == (signed_site / rel).read_bytes(), r.error
            conn = HttpConnection("127.0.0.1", port)
            resp, body = await conn.request("/img.bin", [("Host", "x"),
                                                         ("Accept-Encoding", "sine")])
            await _drain(body)
            headers = dict(resp.headers)
            assert headers[b"content-encoding"] == b"sine" and b"max-age=" in headers[
                b"cache-control"]
            resp, body = await conn.request("/img.bin", [
                ("Host", "x"), ("Accept-Encoding", "sine"),
                ("If-None-Match", headers[b"etag"].decode())])
            assert resp.status_code == 304 and await _drain(body) == b""
            for target, status in [("/.sine/tags/img.bin.at", 404), ("/nope", 404),
                                   ("/.sine/sign/img.bin", 404), ("/../etc/passwd", 400)]:
                resp, body = await conn.request(target, [("Host", "x")])
                await _drain(body)
                assert resp.status_code == status, target
            (signed_site / "img.bin").write_bytes(b"changed after signing")
            resp, body = await conn.request("/img.bin", [("Host", "x")])
            await _drain(body)
            assert resp.status_code == 503
            await conn.close()
        finally:
            await origin.close()

    asyncio.run(asyncio.wait_for(go(), 30))


async def _drain(body) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join([c async for c in body])


def test_expired_site_is_refused(tmp_path: Path, ed_key: SigningKey) -> None:
    from sine.aio.server import OriginServer

    root = write_site(tmp_path / "r", {"x.txt": b"x" * 3000})
    sign_site(root, ed_key, time.time() - 10_000, lifetime=3600)

    async def go() -> object:
        origin = OriginServer(root)
        port, _ = await origin.start()
        try:
            async with SineClient(f"http://127.0.0.1:{port}",
                                  public_key=ed_key.verifying_key()) as c:
                return await c.get("/x.txt")
        finally:
            await origin.close()

    r = asyncio.run(go())
    assert isinstance(r.error, TagExpired) and r.data == b""  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", ["sine.sign", "sine.fetch", "sine.server"])
def test_cli_help(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                         text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert out.returncode == 0 and "usage:" in out.stdout


def test_sign_and_fetch_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sine.aio.server import OriginServer

    root = write_site(tmp_path / "root", site_files(5000))
    key_file = tmp_path / "key.pem"
    assert sign_main([str(root), "--key", str(key_file), "--alg", "ed25519"]) == 0
    assert "5 signed" in capsys.readouterr().out
    assert sign_main([str(root), "--key", str(key_file)]) == 0
    assert "0 signed, 5 unchanged" in capsys.readouterr().out
    loop = asyncio.new_event_loop()
    origin = OriginServer(root)
    port, _ = loop.run_until_complete(origin.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        urls = [f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/a.html"]
        out_file = tmp_path / "a.html"
        code = fetch_main([*urls, "--key", str(root / ".sine/public.pem"), "--mode", "sinex",
                           "--output", str(out_file)])
        text = capsys.readouterr().out
        assert code == 0, text
        assert "1 public-key operations" in text and text.count("verified;") == 2
        assert out_file.read_bytes() == (root / "a.html").read_bytes()
        other = SigningKey.generate(SigningKey.from_pem(key_file.read_bytes()).alg)
        (tmp_path / "wrong.pem").write_bytes(other.verifying_key().to_pem())
        assert fetch_main([urls[0], "--key", str(tmp_path / "wrong.pem")]) == 1
        assert "FAILED" in capsys.readouterr().out
    finally:
        asyncio.run_coroutine_threadsafe(origin.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
