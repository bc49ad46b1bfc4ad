"""Shared pieces of the Barnraising tests: a site, a registry on a temporary database."""

from __future__ import annotations

from pathlib import Path

from sslsplit.barnraising.registry import Registry, SiteConfig

SITE = SiteConfig("news/front", ("127.0.0.1", 8443), ("127.0.0.1", 8444),
                  ("www.news.test",), {"memory_mb": 64}, "origin-secret")


def registry(path: Path | str = ":memory:", **options: object) -> Registry:
    """A registry serving :data:`SITE` (ids 000...1, 000...2, ... so tests can name them)."""
    counter = iter(range(1, 1 << 30))
    options.setdefault("new_id", lambda: f"{next(counter):032x}")
    return Registry([SITE], path, **options)  # type: ignore[arg-type]
