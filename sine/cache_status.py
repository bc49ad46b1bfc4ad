"""Was a response served from a cache?  A sans-IO reading of the headers caches add.

SINE's point is that an untrusted cache may serve signed documents, so ``python -m sine.fetch``
prints, for every document, whether a cache answered (``cache=HIT``) or the request went on to
the origin (``cache=MISS``).  Caches say so in four ways; :func:`cache_verdict` reads them in
this order and the first that gives an answer decides:

``Cache-Status`` (RFC 9211, the standard)
    A Structured Field *List* (RFC 9651 §3.1): one member per cache that handled the request,
    ``Cache-Status: OriginCache; hit; ttl=1100, "CDN Company Here"; fwd=uri-miss``.  Each
    member is the cache's name (a Token or a String) with parameters: ``hit`` (it answered
    from storage), ``fwd=<why>`` (it forwarded the request: ``uri-miss``, ``vary-miss``,
    ``miss``, ``request``, ``stale``, ``partial``, ``bypass``, ``method``), ``fwd-status``
    (the next hop's status code), ``ttl``, ``stored``, ``collapsed``, ``key``, ``detail``.
    **Order matters** (RFC 9211 §2): caches append, so the *first* member is the cache
    nearest the origin and the *last* the one nearest the client.  The verdict walks from the
    last member towards the origin: a member with ``hit`` served the response (HIT); one with
    ``fwd=stale; fwd-status=304`` served its stored copy after revalidating it (REVALIDATED);
    one with any other ``fwd`` passed the request on, so the answer is whatever the members
    before it say, and MISS if none of them holds a copy.  A value that is not a valid List
    is ignored as a whole, as RFC 9651 requires of every Structured Field.
``X-Cache-Status`` (nginx's ``$upstream_cache_status``, added by ``add_header``)
    ``HIT``, ``STALE`` and ``UPDATING`` are served from storage (HIT), ``REVALIDATED`` after a
    304 from upstream, ``MISS``, ``EXPIRED`` and ``BYPASS`` went upstream (MISS).
``X-Cache`` (Squid: ``HIT from host`` / ``MISS from host``; CDNs: ``Hit from cloudfront``,
    ``RefreshHit ...``)
    The last comma-separated element (each Squid in a chain appends its own) decides; its
    first word containing ``REFRESH`` is REVALIDATED, ``HIT`` HIT, ``MISS`` MISS.
``Age`` (RFC 9111 §5.1)
    A positive number of seconds means a cache kept the response that long: HIT.  ``Age: 0``
    and malformed values say nothing.

Nothing here raises on what a server or proxy sent: :func:`cache_verdict` returns a
:class:`CacheVerdict` whose ``outcome`` is ``None`` when no header decides.  Only
:func:`parse_cache_status`, asked directly, raises :class:`CacheStatusError` (a
``ValueError``) for a malformed field.

    >>> str(cache_verdict({"x-cache-status": "HIT"}))
    'HIT (X-Cache-Status: HIT)'
    >>> v = cache_verdict([(b"Cache-Status", b'Origin; hit, "Edge 1"; fwd=uri-miss')])
    >>> v.outcome, v.cache
    (<Outcome.HIT: 'HIT'>, 'Origin')
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from .errors import SineError

__all__ = [
    "CacheEntry",
    "CacheStatusError",
    "CacheVerdict",
    "Outcome",
    "Token",
    "cache_verdict",
    "format_cache_status",
    "parse_cache_status",
]


class CacheStatusError(SineError, ValueError):
    """A ``Cache-Status`` value that is not a valid RFC 9211 / RFC 9651 List."""


class Token(str):
    """An RFC 9651 Token (``fwd=uri-miss``), kept apart from a String (``key="..."``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Token({str(self)!r})"


#: A parameter's value: Boolean, Integer, Decimal, String, Token or Byte Sequence.
BareItem = bool | int | float | str | Token | bytes


class Outcome(Enum):
    """What the cache nearest the origin that kept a copy did with the request."""

    HIT = "HIT"                  # answered from storage; the origin was not contacted
    REVALIDATED = "REVALIDATED"  # stored copy sent after a conditional request upstream (304)
    MISS = "MISS"                # the response came from upstream


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One member of a ``Cache-Status`` List: a cache's name and its parameters, in order."""

    cache: str
    params: tuple[tuple[str, BareItem], ...] = ()

    def get(self, name: str) -> BareItem | None:
        """The parameter ``name`` (the last one if repeated, RFC 9651 §4.2.3.2), or ``None``."""
        found = None
        for key, value in self.params:
            if key == name:
                found = value
        return found

    @property
    def hit(self) -> bool:
        return self.get("hit") is True

    @property
    def fwd(self) -> str | None:
        value = self.get("fwd")
        return str(value) if isinstance(value, str) else None

    @property
    def fwd_status(self) -> int | None:
        value = self.get("fwd-status")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def outcome(self) -> Outcome | None:
        """This cache's own handling: HIT, REVALIDATED, MISS (forwarded) or ``None`` (silent).

        ``hit`` wins over a contradictory ``fwd``: the RFC defines ``hit`` as "not forwarded".
        """
        if self.hit:
            return Outcome.HIT
        if self.fwd is not None:
            if self.fwd == "stale" and self.fwd_status == 304:
                return Outcome.REVALIDATED
            return Outcome.MISS
        if self.get("hit") is False:
            return Outcome.MISS
        return None


@dataclass(frozen=True, slots=True)
class CacheVerdict:
    """The answer of :func:`cache_verdict` and the header that gave it."""

    outcome: Outcome | None = None
    header: str = ""   # "Cache-Status", "X-Cache-Status", "X-Cache" or "Age"
    value: str = ""    # that header's value, as received
    cache: str = ""    # Cache-Status: the name of the cache that decided
    entries: tuple[CacheEntry, ...] = field(default=(), repr=False)

    def __str__(self) -> str:
        """``HIT (X-Cache-Status: HIT)``, or ``-`` when no header decides."""
        if self.outcome is None:
            return "-"
        shown = self.value if len(self.value) <= 100 else self.value[:97] + "..."
        return f"{self.outcome.value} ({self.header}: {shown})"


# --- RFC 9651 List parsing ---------------------------------------------------------------

_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?")
_BASE64 = re.compile(r"[A-Za-z0-9+/=]*")
_OWS = " \t"


class _Parser:
    """RFC 9651 §4.2 over one field value; every method fails with :class:`CacheStatusError`."""

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def fail(self, what: str) -> CacheStatusError:
        return CacheStatusError(f"Cache-Status: {what} at offset {self.i} of {self.s!r}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip(self, chars: str) -> None:
        while self.i < len(self.s) and self.s[self.i] in chars:
            self.i += 1

    def list(self) -> list[CacheEntry]:
        self.skip(" ")
        members: list[CacheEntry] = []
        while self.i < len(self.s):
            members.append(self.member())
            self.skip(_OWS)
            if self.i == len(self.s):
                return members
            if self.peek() != ",":
                raise self.fail("expected ',' between members")
            self.i += 1
            self.skip(_OWS)
            if self.i == len(self.s):
                raise self.fail("trailing ','")
        return members

    def member(self) -> CacheEntry:
        if self.peek() == "(":
            raise self.fail("an Inner List is not a cache name")
        name = self.bare_item()
        if not isinstance(name, str):
            raise self.fail("a cache name must be a Token or a String")
        return CacheEntry(str(name), self.parameters())

    def parameters(self) -> tuple[tuple[str, BareItem], ...]:
        params: list[tuple[str, BareItem]] = []
        while self.peek() == ";":
            self.i += 1
            self.skip(" ")
            m = _KEY.match(self.s, self.i)
            if not m:
                raise self.fail("expected a parameter name")
            self.i = m.end()
            value: BareItem = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare_item()
            params.append((m.group(), value))
        return tuple(params)

    def bare_item(self) -> BareItem:
        c = self.peek()
        if c == "-" or c.isdigit():
            return self.number()
        if c == '"':
            return self.string()
        if c == "?":
            flag = self.s[self.i + 1:self.i + 2]
            if flag not in ("0", "1"):
                raise self.fail("a Boolean is ?0 or ?1")
            self.i += 2
            return flag == "1"
        if c == ":":
            end = self.s.find(":", self.i + 1)
            raw = self.s[self.i + 1:end] if end >= 0 else ""
            if end < 0 or not _BASE64.fullmatch(raw):
                raise self.fail("malformed Byte Sequence")
            try:
                data = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
            except ValueError:
                raise self.fail("malformed Byte Sequence") from None
            self.i = end + 1
            return data
        if c == "@":  # a Date (RFC 9651 §3.3.7): seconds since the epoch
            self.i += 1
            value = self.number()
            if isinstance(value, float):
                raise self.fail("a Date is an Integer")
            return value
        if c == "%":
            return self.display_string()
        m = _TOKEN.match(self.s, self.i)
        if m:
            self.i = m.end()
            return Token(m.group())
        raise self.fail("expected an Item")

    def number(self) -> int | float:
        m = _NUMBER.match(self.s, self.i)
        if not m:
            raise self.fail("expected a number")
        text = m.group()
        digits = text.lstrip("-")
        if "." in digits:
            whole, frac = digits.split(".")
            if len(whole) > 12 or not 1 <= len(frac) <= 3:
                raise self.fail("a Decimal has at most 12 + 3 digits")
            self.i = m.end()
            return float(text)
        if len(digits) > 15:
            raise self.fail("an Integer has at most 15 digits")
        self.i = m.end()
        return int(text)

    def string(self) -> str:
        out = []
        self.i += 1
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "\\":
                nxt = self.peek()
                if nxt not in ('"', "\\") or not nxt:
                    raise self.fail("only \\\" and \\\\ escape in a String")
                out.append(nxt)
                self.i += 1
            elif c == '"':
                return "".join(out)
            elif not " " <= c <= "~":
                raise self.fail("a String holds printable ASCII only")
            else:
                out.append(c)
        raise self.fail("unterminated String")

    def display_string(self) -> str:
        if self.s[self.i:self.i + 2] != '%"':
            raise self.fail("expected a Display String")
        self.i += 2
        raw = bytearray()
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "%":
                hexpair = self.s[self.i:self.i + 2]
                if not re.fullmatch(r"[0-9a-f]{2}", hexpair):
                    raise self.fail("a Display String escapes as %xx, lower-case hex")
                raw.append(int(hexpair, 16))
                self.i += 2
            elif c == '"':
                try:
                    return raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise self.fail("a Display String is UTF-8") from None
            elif " " <= c <= "~":
                raw += c.encode()
            else:
                raise self.fail("a Display String holds printable ASCII only")
        raise self.fail("unterminated Display String")


def parse_cache_status(value: str | bytes) -> list[CacheEntry]:
    """The members of one ``Cache-Status`` value, first (nearest the origin) to last.

    Several ``Cache-Status`` header lines are one field: join them with ``", "`` in the order
    received before parsing (:func:`cache_verdict` does).  Raises :class:`CacheStatusError`
    for anything that is not an RFC 9651 List whose members are Tokens or Strings.

    >>> [(e.cache, e.outcome()) for e in parse_cache_status('A; fwd=stale; fwd-status=304')]
    [('A', <Outcome.REVALIDATED: 'REVALIDATED'>)]
    """
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise CacheStatusError("Cache-Status: not ASCII") from None
    return _Parser(value.strip(_OWS)).list()


def _format_item(value: BareItem) -> str:
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, Token):
        if not _TOKEN.fullmatch(value):
            raise CacheStatusError(f"not a Token: {value!r}")
        return str(value)
    if isinstance(value, int):
        if abs(value) >= 10**15:
            raise CacheStatusError(f"Integer out of range: {value}")
        return str(value)
    if isinstance(value, float):
        text = f"{round(value, 3):.3f}".rstrip("0")
        return text + "0" if text.endswith(".") else text
    if isinstance(value, bytes):
        return ":" + base64.b64encode(value).decode() + ":"
    if any(not " " <= c <= "~" for c in value):
        raise CacheStatusError(f"a String holds printable ASCII only: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_cache_status(entries: Iterable[CacheEntry]) -> str:
    """Serialise members as one ``Cache-Status`` value (RFC 9651 §4.1), the inverse of
    :func:`parse_cache_status`; a cache name that is a valid Token is written as one."""
    members = []
    for e in entries:
        name = e.cache if isinstance(e.cache, Token) or _TOKEN.fullmatch(e.cache) else None
        out = [str(name) if name is not None else _format_item(e.cache)]
        for key, value in e.params:
            if not _KEY.fullmatch(key):
                raise CacheStatusError(f"not a parameter name: {key!r}")
            out.append(f";{key}" if value is True else f";{key}={_format_item(value)}")
        members.append("".join(out))
    return ", ".join(members)


# --- the verdict ------------------------------------------------------------------------

_NGINX = {"HIT": Outcome.HIT, "STALE": Outcome.HIT, "UPDATING": Outcome.HIT,
          "REVALIDATED": Outcome.REVALIDATED,
          "MISS": Outcome.MISS, "EXPIRED": Outcome.MISS, "BYPASS": Outcome.MISS}


def _fields(headers: Mapping[str, str] | Iterable[tuple[str | bytes, str | bytes]]
            ) -> dict[str, str]:
    """Header names lower-cased, repeated fields joined with ``", "`` (RFC 9110 §5.3)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in pairs:
        n = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        v = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        n = n.strip().lower()
        out[n] = f"{out[n]}, {v.strip()}" if n in out else v.strip()
    return out


def _from_cache_status(value: str) -> CacheVerdict | None:
    try:
        entries = tuple(parse_cache_status(value))
    except CacheStatusError:
        return None  # RFC 9651: a malformed field is ignored as a whole
    forwarded = None
    for entry in reversed(entries):  # the last member is the cache nearest the client
        outcome = entry.outcome()
        if outcome in (Outcome.HIT, Outcome.REVALIDATED):
            return CacheVerdict(outcome, "Cache-Status", value, entry.cache, entries)
        if outcome is Outcome.MISS and forwarded is None:
            forwarded = entry  # passed on: what the members before it say decides
    if forwarded is None:
        return None
    return CacheVerdict(Outcome.MISS, "Cache-Status", value, forwarded.cache, entries)


def _from_x_cache_status(value: str) -> CacheVerdict | None:
    outcome = _NGINX.get(value.rsplit(",", 1)[-1].strip().upper())
    return CacheVerdict(outcome, "X-Cache-Status", value) if outcome else None


def _from_x_cache(value: str) -> CacheVerdict | None:
    words = value.rsplit(",", 1)[-1].split()
    word = words[0].upper() if words else ""
    if "REFRESH" in word:
        outcome = Outcome.REVALIDATED
    elif "HIT" in word:
        outcome = Outcome.HIT
    elif "MISS" in word:
        outcome = Outcome.MISS
    else:
        return None
    return CacheVerdict(outcome, "X-Cache", value)


def _from_age(value: str) -> CacheVerdict | None:
    text = value.strip()
    if not text.isascii() or not text.isdigit() or int(text) == 0:
        return None  # RFC 9111 §5.1: delta-seconds; 0 or garbage says nothing here
    return CacheVerdict(Outcome.HIT, "Age", value)


_READERS = (("cache-status", _from_cache_status), ("x-cache-status", _from_x_cache_status),
            ("x-cache", _from_x_cache), ("age", _from_age))


def cache_verdict(headers: Mapping[str, str] | Iterable[tuple[str | bytes, str | bytes]]
                  ) -> CacheVerdict:
    """Whether a cache served the response with these ``headers`` (see the module docstring).

    ``headers`` is a mapping of names to values (any case) or ``(name, value)`` pairs as
    h11 gives them (``bytes`` or ``str``).  Never raises for any header value; returns a
    verdict whose ``outcome`` is ``None`` when no header decides.
    """
    fields = _fields(headers)
    for name, reader in _READERS:
        if name in fields:
            verdict = reader(fields[name])
            if verdict is not None:
                return verdict
    return CacheVerdict()
