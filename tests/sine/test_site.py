"""Expected_Set from real HTML, SINEX two-pass signing, and minimal re-signing."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sine.algorithms import SigningKey
from sine.format import pull_forward_authenticator
from sine.links import expected_set
from sine.site import load_signed, sign_site
from tests.sine.sine_helpers import site_files, write_site
from tls12.buffer import Buffer

NOW = 1_700_000_000.0


def test_expected_set_resolves_relative_links_and_drops_foreign_ones() -> None:
    html = (
        '<html><head><link rel=stylesheet href="s.css"><script src="/js/app.js"></script>'
        '</head><body><a href="../up.html">u</a> <a href="x.html#frag">x</a>'
        '<a href="x.html?q=1">x again</a> <a href="http://other.example/y">y</a>'
        '<a href="https://site.example/abs.html">abs</a> <a href="mailto:me@site">m</a>'
        '<img src=pic.png><a href="self.html">me</a><a href="dir/">d</a></body></html>'
    )
    got = expected_set(html, "/sec/self.html", ["https://site.example"])
    assert got == ("/abs.html", "/js/app.js", "/sec/dir/", "/sec/pic.png", "/sec/s.css",
                   "/sec/x.html", "/up.html")


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_expected_set_fuzz(html: str) -> None:
    got = expected_set(html, "/p/q.html")
    assert all(p.startswith("/") for p in got)
    assert list(got) == sorted(set(got))


def _fa(root: Path, path: str) -> dict[str, bytes]:
    at = load_signed(root, path)
    assert at is not None
    if not at.forward_authenticator:
        return {}
    return pull_forward_authenticator(Buffer(at.forward_authenticator)).as_dict()


def test_sinex_forward_authenticators_hold_linked_digests(tmp_path: Path,
                                                         ed_key: SigningKey) -> None:
    root = write_site(tmp_path, site_files())
    report = sign_site(root, ed_key, NOW)
    assert set(report.actions.values()) == {"new"}
    index = _fa(root, "/index.html")
    assert sorted(index) == ["/a.html", "/b.html", "/img.bin", "/sub/index.html"]
    for path, digest in index.items():
        at = load_signed(root, path)
        assert at is not None and at.tag.info.at_sign() == digest
    assert sorted(_fa(root, "/b.html")) == ["/a.html", "/index.html"]  # cycle a <-> b is fine
    assert sorted(_fa(root, "/sub/index.html")) == ["/a.html"]
    assert _fa(root, "/img.bin") == {}


def test_resigning_touches_only_the_changed_page_and_its_linkers(tmp_path: Path,
                                                                ed_key: SigningKey) -> None:
    root = write_site(tmp_path, site_files())
    sign_site(root, ed_key, NOW)
    before = {p: (root / ".sine/tags" / (p + ".at")).read_bytes()
              for p in ["index.html", "a.html", "b.html", "sub/index.html", "img.bin"]}
    again = sign_site(root, ed_key, NOW + 60)
    assert again.signed() == []
    (root / "b.html").write_bytes(b'<html>changed <a href="/">home</a></html>\n')
    report = sign_site(root, ed_key, NOW + 120)
    assert report.actions["/b.html"] == "content"
    # index and a link to b: new forward authenticator, same identity; nothing else re-signed
    assert report.actions["/index.html"] == "forward-authenticator"
    assert report.actions["/a.html"] == "forward-authenticator"
    assert report.actions["/sub/index.html"] == "unchanged"
    assert report.actions["/img.bin"] == "unchanged"
    after = {p: (root / ".sine/tags" / (p + ".at")).read_bytes() for p in before}
    assert after["sub/index.html"] == before["sub/index.html"]
    assert after["img.bin"] == before["img.bin"]
    idx = load_signed(root, "/index.html")
    b = load_signed(root, "/b.html")
    assert idx is not None and b is not None
    assert _fa(root, "/index.html")["/b.html"] == b.tag.info.at_sign()
    assert idx.tag.info.timestamp == int(NOW)  # identity (and AT_sign) kept: no cascade


def test_renewal_near_expiry(tmp_path: Path, ed_key: SigningKey) -> None:
    root = write_site(tmp_path, {"x.txt": b"hello"})
    sign_site(root, ed_key, NOW, lifetime=7200)
    assert sign_site(root, ed_key, NOW + 10, lifetime=7200).actions["/x.txt"] == "unchanged"
    assert sign_site(root, ed_key, NOW + 7000, lifetime=7200).actions["/x.txt"] == "renewed"
    assert os.path.exists(root / ".sine/public.pem")
