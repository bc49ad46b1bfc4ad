"""Test helpers shared by the SINE tests: a small linked site."""

from __future__ import annotations

from pathlib import Path

SITE = {
    "index.html": b'<html><nav><a href="a.html">A</a> <a href="/b.html">B</a> '
    b'<a href="sub/">Sub</a> <img src="img.bin"></nav></html>\n',
    "a.html": b'<html><a href="index.html">home</a> <a href="b.html">B</a></html>\n',
    "b.html": b'<html><a href="/">home</a> <a href="a.html#top">A</a></html>\n',
    "sub/index.html": b'<html><a href="../a.html">A</a> <a href="http://elsewhere/x">x</a></html>\n',
}


def site_files(img_size: int = 40_000) -> dict[str, bytes]:
    files = dict(SITE)
    files["img.bin"] = bytes((i * 7 + i // 251) % 256 for i in range(img_size))
    return files


def write_site(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root
