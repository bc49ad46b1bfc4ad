"""``barnraising://`` URIs: how a volunteer names the site it wants to help (paper §5.1).

A volunteer is configured with one string, e.g. ``barnraising://broker.example.org/news/front``:
the *broker* to ask (host, optional port) and the *site* (the path).  Everything else -- the
splitting server, the record store, the DNS names, the cache sizes -- comes from the broker's
answer, so a site can move its server or change its parameters without touching a single
volunteer.

Grammar (a strict subset of RFC 3986, chosen so that a site name is also a safe file name
and database key)::

    URI   = "barnraising://" host [ ":" port ] "/" site
    host  = reg-name | IPv4address | "[" IPv6address "]"
    site  = segment *( "/" segment )            ; 1 to 8 segments, at most 200 characters
    segment = 1*( ALPHA / DIGIT / "-" / "_" / "." ) ; but never "." or ".."

No user information, query or fragment; the scheme and host are case-insensitive (lowered),
the site is case-sensitive.  :func:`parse_uri` raises :class:`URIError` (a ``ValueError``)
that says which part is wrong.  The module is sans-IO: it never resolves the host.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from .errors import URIError

__all__ = [
    "SCHEME",
    "DEFAULT_PORT",
    "MAX_URI_LENGTH",
    "MAX_SITE_LENGTH",
    "MAX_SITE_SEGMENTS",
    "URIError",
    "BarnraisingURI",
    "parse_uri",
    "check_site",
]

SCHEME = "barnraising"
DEFAULT_PORT = 8470
"""The broker's join-protocol port when the URI names none."""
MAX_URI_LENGTH = 512
MAX_SITE_LENGTH = 200
MAX_SITE_SEGMENTS = 8

_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def check_site(site: str) -> str:
    """Return ``site`` if it is a valid site name (``news/front``), else raise :class:`URIError`."""
    if not isinstance(site, str):
        raise URIError(f"site name must be a string, not {type(site).__name__}")
    if not site:
        raise URIError("site name is empty")
    if len(site) > MAX_SITE_LENGTH:
        raise URIError(f"site name is {len(site)} characters; at most {MAX_SITE_LENGTH}")
    segments = site.split("/")
    if len(segments) > MAX_SITE_SEGMENTS:
        raise URIError(f"site name has {len(segments)} segments; at most {MAX_SITE_SEGMENTS}")
    for seg in segments:
        if not seg:
            raise URIError(f"site name {site!r} has an empty segment")
        if seg in (".", ".."):
            raise URIError(f"site name {site!r} has a {seg!r} segment")
        if not _SEGMENT.fullmatch(seg):
            raise URIError(
                f"site segment {seg!r} may hold only letters, digits, '-', '_' and '.'"
            )
    return site


def _check_host(host: str) -> str:
    if host.startswith("["):
        if not host.endswith("]"):
            raise URIError(f"unterminated IPv6 literal {host!r}")
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise URIError(f"{host!r} is not an IPv6 address") from None
    if not host:
        raise URIError("broker host is empty")
    if len(host) > 253:
        raise URIError("broker host name is longer than 253 characters")
    labels = host.rstrip(".").split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise URIError(f"broker host {host!r} is not a host name or IPv4 address")
    if all(label.isdigit() for label in labels):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise URIError(f"broker host {host!r} is not an IPv4 address") from None
    return host.lower()


@dataclass(frozen=True, slots=True)
class BarnraisingURI:
    """A parsed ``barnraising://`` URI; ``str()`` gives its canonical spelling."""

    broker_host: str
    broker_port: int
    site: str

    def __str__(self) -> str:
        host = f"[{self.broker_host}]" if ":" in self.broker_host else self.broker_host
        port = "" if self.broker_port == DEFAULT_PORT else f":{self.broker_port}"
        return f"{SCHEME}://{host}{port}/{self.site}"


def parse_uri(text: str) -> BarnraisingURI:
    """Parse ``barnraising://BROKER[:PORT]/some/site/name``; raise :class:`URIError` if invalid."""
    if not isinstance(text, str):
        raise URIError(f"URI must be a string, not {type(text).__name__}")
    if len(text) > MAX_URI_LENGTH:
        raise URIError(f"URI is {len(text)} characters; at most {MAX_URI_LENGTH}")
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise URIError(f"{text!r} is not a URI: expected {SCHEME}://BROKER/SITE")
    if scheme.lower() != SCHEME:
        raise URIError(f"scheme must be {SCHEME!r}, not {scheme!r}")
    for bad, what in (("?", "query"), ("#", "fragment")):
        if bad in rest:
            raise URIError(f"a {SCHEME} URI has no {what}")
    authority, slash, site = rest.partition("/")
    if not slash or not site:
        raise URIError(f"URI names no site: expected {SCHEME}://BROKER/SITE")
    if "@" in authority:
        raise URIError(f"a {SCHEME} URI has no user information")
    host, port = authority, DEFAULT_PORT
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise URIError(f"unterminated IPv6 literal in {authority!r}")
        host, tail = authority[: end + 1], authority[end + 1:]
        if tail:
            if not tail.startswith(":"):
                raise URIError(f"unexpected {tail!r} after the IPv6 literal")
            port = _port(tail[1:])
    elif ":" in authority:
        host, _, port_text = authority.rpartition(":")
        port = _port(port_text)
    return BarnraisingURI(_check_host(host), port, check_site(site))


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5:
        raise URIError(f"port {text!r} is not a number")
    value = int(text)
    if not 1 <= value <= 65535:
        raise URIError(f"port {value} is outside 1-65535")
    return value
