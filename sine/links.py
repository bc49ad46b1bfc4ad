"""``Compute_Expected_Set(P)``: the same-site pages an HTML page links to (SINEX).

A real HTML parser (:mod:`html.parser` from the standard library) collects ``href`` and ``src``
attributes of ``a``, ``area``, ``link``, ``img``, ``script``, ``iframe``, ``frame``, ``source``,
``embed`` and ``form action``.  Each URL is resolved against the page's own path; it is kept if
it stays on the same site (a relative URL, or an absolute one whose ``scheme://host[:port]`` is
one of ``site_origins``).  Fragments and queries are dropped; the page itself is excluded.

The result is a sorted tuple of absolute paths, to be filtered by the caller against the
resources that actually exist (see :mod:`sine.site`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit

__all__ = ["extract_links", "expected_set"]

_LINK_ATTRS = {
    "a": ("href",),
    "area": ("href",),
    "link": ("href",),
    "img": ("src",),
    "script": ("src",),
    "iframe": ("src",),
    "frame": ("src",),
    "source": ("src",),
    "embed": ("src",),
    "form": ("action",),
}


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base":
            for name, value in attrs:
                if name == "href" and value and self.base is None:
                    self.base = value.strip()
            return
        wanted = _LINK_ATTRS.get(tag)
        if wanted:
            for name, value in attrs:
                if name in wanted and value:
                    self.urls.append(value.strip())

    handle_startendtag = handle_starttag


def extract_links(html: str) -> tuple[list[str], str | None]:
    """Raw link targets in document order and the ``<base href>`` if any."""
    parser = _LinkParser()
    parser.feed(html)
    parser.close()
    return parser.urls, parser.base


def expected_set(
    html: str | bytes, page_path: str, site_origins: Iterable[str] = ()
) -> tuple[str, ...]:
    """Same-site absolute paths linked from the page at ``page_path``.

    ``site_origins`` are origins such as ``"http://example.org"`` that count as this site
    when a link is absolute.
    """
    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    origins = {o.rstrip("/").lower() for o in site_origins}
    urls, base = extract_links(html)
    page_url = "http://site.invalid" + page_path
    if base:
        page_url = urljoin(page_url, base)
    found: set[str] = set()
    for url in urls:
        parts = urlsplit(urljoin(page_url, url))
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        if origin != "http://site.invalid" and origin not in origins:
            continue
        if parts.scheme not in ("http", "https"):
            continue
        path = posixpath.normpath(unquote(parts.path or "/"))
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        if parts.path.endswith("/") and not path.endswith("/"):
            path += "/"
        if path != page_path:
            found.add(path)
    return tuple(sorted(found))
