"""The HTTP side of tree mode and of byte ranges: header codecs and URL names (sans-IO).

Everything here is text in, values out -- no socket, no clock -- so the origin
(:mod:`sine.origin`), the client (:mod:`sine.aio.client`) and the tests share one reading of
each header:

* ``Range`` (RFC 9110 §14.2): :func:`parse_range` reads ``bytes=a-b``, ``bytes=a-`` and
  ``bytes=-n``; :meth:`ByteRange.resolve` turns one into inclusive offsets for a representation
  of known length or raises :class:`RangeNotSatisfiable` (the origin's 416).
* ``Content-Range`` (RFC 9110 §14.4): :func:`content_range` writes it, :func:`parse_content_range`
  reads it strictly (a client must know which bytes a 206 carries before it verifies them).
* ``Link`` (RFC 8288): :func:`parse_link` reads the announcement of the tree resources.
* The URL convention of tree mode (``TREE.md`` §9), one name per tree configuration
  (``<hash>-<group size>``, e.g. ``sha256-1024``)::

      /.sine/tree/<id>/tag/<path>             the signed TreeTag     application/sine-tree-tag
      /.sine/tree/<id>/outboard/<path>        the outboard           application/sine-tree
      /.sine/tree/<id>/proof/<g0>-<k>/<path>  the proof of groups g0 .. g0+k-1
                                                                     application/sine-tree-proof
      /.sine/tree/<id>/stream/<path>          the combined stream    application/sine-tree-stream

  :func:`tree_url` builds these, :func:`parse_tree_route` reads them back.
* :class:`BodyDecoder`: the ``gzip`` content coding a transcoding cache may add, undone with a
  bound on the decoded size (a cache cannot make the client inflate a bomb).

Every parser raises :class:`ValueError` (or a subclass; the named ones are also
:class:`~sine.errors.SineError`) on bad input and nothing else.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import SineError
from .tree import GROUP_SIZES, TreeHash

__all__ = [
    "MAX_POSITION",
    "InvalidRange",
    "RangeNotSatisfiable",
    "ByteRange",
    "parse_range",
    "content_range",
    "parse_content_range",
    "LinkValue",
    "parse_link",
    "link_targets",
    "TREE_ROOT",
    "TREE_KINDS",
    "TREE_MEDIA_TYPES",
    "tree_id",
    "parse_tree_id",
    "tree_url",
    "TreeRoute",
    "parse_tree_route",
    "content_codings",
    "CodingError",
    "BodyDecoder",
]

#: byte positions above this are clamped to it (any real length is below 2**63)
MAX_POSITION = 1 << 63
_DIGITS = re.compile(r"[0-9]+")
_TCHAR = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class InvalidRange(SineError, ValueError):
    """A ``bytes`` Range whose syntax is wrong (the origin answers 416, as nginx does)."""


class RangeNotSatisfiable(SineError, ValueError):
    """A well-formed range that selects no byte of the representation (416)."""


def _position(text: str) -> int:
    """A non-negative decimal; very long numbers are clamped (they lie past any end anyway)."""
    if not _DIGITS.fullmatch(text):
        raise InvalidRange(f"not a byte position: {text!r}")
    return MAX_POSITION if len(text) > 19 else min(int(text), MAX_POSITION)


@dataclass(frozen=True, slots=True)
class ByteRange:
    """One range-spec: ``first-last`` and ``first-`` (``last is None``), or the suffix
    ``-last`` (``first is None``: the final ``last`` bytes)."""

    first: int | None
    last: int | None

    def __post_init__(self) -> None:
        if self.first is None and self.last is None:
            raise ValueError("a range needs a first position or a suffix length")
        if self.first is not None and self.last is not None and self.last < self.first:
            raise InvalidRange("last position before first")

    def resolve(self, length: int) -> tuple[int, int]:
        """Inclusive ``(first, last)`` within ``length`` bytes, or :class:`RangeNotSatisfiable`.

        ``last`` beyond the end is clamped to ``length - 1`` (RFC 9110 §14.1.2); a suffix longer
        than the representation selects all of it; nothing is satisfiable in an empty one.
        """
        if self.first is None:
            assert self.last is not None
            if self.last == 0 or length == 0:
                raise RangeNotSatisfiable("empty suffix range")
            return max(0, length - self.last), length - 1
        if self.first >= length:
            raise RangeNotSatisfiable(f"first position {self.first} at or past {length}")
        last = length - 1 if self.last is None else min(self.last, length - 1)
        return self.first, last

    def header(self) -> str:
        """The ``Range`` field value asking for exactly this range."""
        first = "" if self.first is None else str(self.first)
        last = "" if self.last is None else str(self.last)
        return f"bytes={first}-{last}"


def parse_range(value: str) -> ByteRange | None:
    """Read a ``Range`` field value.

    ``None`` means "ignore the field and send the whole representation": another range unit
    (or no ``=``), or several ranges (allowed by RFC 9110 §14.2; this origin sends no ``multipart/byteranges``).
    A ``bytes`` value with bad syntax (or with ``last < first``) raises :class:`InvalidRange`.
    """
    unit, sep, ranges = value.partition("=")
    if not sep or unit.strip(" \t").lower() != "bytes":
        return None
    specs = [s.strip(" \t") for s in ranges.split(",")]
    parsed = [_spec(s) for s in specs if s]  # empty list elements are allowed (RFC 9110 §5.6.1)
    if not parsed:
        raise InvalidRange("no range in a bytes Range")
    return parsed[0] if len(parsed) == 1 else None


def _spec(text: str) -> ByteRange:
    first, sep, last = text.partition("-")
    if not sep:
        raise InvalidRange(f"no '-' in range {text!r}")
    if not first:
        return ByteRange(None, _position(last))
    return ByteRange(_position(first), _position(last) if last else None)


def content_range(first: int, last: int, length: int) -> str:
    """``bytes first-last/length`` (a 206 response)."""
    if not 0 <= first <= last < length:
        raise ValueError("need 0 <= first <= last < length")
    return f"bytes {first}-{last}/{length}"


_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19}|\*)")


def parse_content_range(value: str) -> tuple[int, int, int | None]:
    """``(first, last, length or None)`` of a 206's ``Content-Range``; strict: one satisfied
    range, ``first <= last``, and ``last < length`` when the length is given."""
    m = _CONTENT_RANGE.fullmatch(value.strip(" \t"))
    if m is None:
        raise ValueError(f"not a satisfied byte Content-Range: {value!r}")
    first, last = int(m[1]), int(m[2])
    length = None if m[3] == "*" else int(m[3])
    if last < first or (length is not None and last >= length):
        raise ValueError(f"inconsistent Content-Range: {value!r}")
    return first, last, length


# -- Link (RFC 8288) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkValue:
    """One link-value: the target between ``<>`` and its parameters (names lower-cased,
    quoted strings unquoted, a parameter without value as ``""``)."""

    target: str
    params: tuple[tuple[str, str], ...]

    def rels(self) -> tuple[str, ...]:
        """The relation types (``rel`` holds a space-separated list), lower-cased; the first
        ``rel`` parameter counts (RFC 8288 §3.3)."""
        for name, value in self.params:
            if name == "rel":
                return tuple(r.lower() for r in value.split())
        return ()


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def ows(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at {self.pos} in Link")
        self.pos += 1

    def token(self) -> str:
        m = _TCHAR.match(self.text, self.pos)
        if m is None:
            raise ValueError(f"expected a token at {self.pos} in Link")
        self.pos = m.end()
        return m[0]

    def quoted(self) -> str:
        self.expect('"')
        out: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise ValueError("unterminated quoted string in Link")
            self.pos += 1
            if char == '"':
                return "".join(out)
            if char == "\\":
                char = self.peek()
                if not char:
                    raise ValueError("dangling escape in Link")
                self.pos += 1
            if char in "\r\n\x00":
                raise ValueError("control character in a quoted string")
            out.append(char)


def parse_link(value: str) -> list[LinkValue]:
    """All link-values of a ``Link`` field value (RFC 8288 §3), in order.

    ``<target>`` may hold commas and semicolons; quoted parameter values may hold them too;
    empty list elements are skipped.  Anything else malformed raises :class:`ValueError`.
    """
    s = _Scanner(value)
    links: list[LinkValue] = []
    while True:
        s.ows()
        if not s.peek():
            return links
        if s.peek() == ",":
            s.pos += 1
            continue
        s.expect("<")
        end = value.find(">", s.pos)
        if end < 0:
            raise ValueError("unterminated <target> in Link")
        target = value[s.pos : end]
        if any(c in target for c in "<\r\n\x00 "):
            raise ValueError("bad character in a Link target")
        s.pos = end + 1
        params: list[tuple[str, str]] = []
        while True:
            s.ows()
            if s.peek() != ";":
                break
            s.pos += 1
            s.ows()
            name = s.token().lower()
            s.ows()
            param = ""
            if s.peek() == "=":
                s.pos += 1
                s.ows()
                param = s.quoted() if s.peek() == '"' else s.token()
            params.append((name, param))
        links.append(LinkValue(target, tuple(params)))
        s.ows()
        if s.peek() not in (",", ""):
            raise ValueError(f"expected ',' at {s.pos} in Link")


def link_targets(values: list[str], rel: str) -> list[str]:
    """Targets of every link with relation ``rel`` in the ``Link`` field lines ``values``."""
    return [link.target for v in values for link in parse_link(v) if rel.lower() in link.rels()]


# -- the URL convention of tree mode ---------------------------------------------------------------

TREE_ROOT = "/.sine/tree"
TREE_KINDS = ("tag", "outboard", "proof", "stream")
TREE_MEDIA_TYPES = {
    "tag": "application/sine-tree-tag",
    "outboard": "application/sine-tree",
    "proof": "application/sine-tree-proof",
    "stream": "application/sine-tree-stream",
}
_HASH_NAMES = {TreeHash.SHA256: "sha256", TreeHash.BLAKE3: "blake3"}
_TREE_ID = re.compile(r"(sha256|blake3)-([0-9]{4,5})")
_PROOF_SPAN = re.compile(r"([0-9]{1,19})-([0-9]{1,19})")


def tree_id(alg: TreeHash, group_size: int) -> str:
    """The name of one tree configuration in URLs and on disk, e.g. ``blake3-4096``."""
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group size must be one of {GROUP_SIZES}")
    return f"{_HASH_NAMES[TreeHash(alg)]}-{group_size}"


def parse_tree_id(text: str) -> tuple[TreeHash, int]:
    """``(hash, group size)`` of a tree id; :class:`ValueError` for anything else."""
    m = _TREE_ID.fullmatch(text)
    if m is None or int(m[2]) not in GROUP_SIZES:
        raise ValueError(f"not a tree id (<sha256|blake3>-<1024|4096|16384|65536>): {text!r}")
    alg = next(a for a, name in _HASH_NAMES.items() if name == m[1])
    return alg, int(m[2])


def tree_url(tree: str, kind: str, path: str, groups: tuple[int, int] | None = None) -> str:
    """The URL path of a tree resource of document ``path`` (not percent-encoded);
    ``groups = (g0, k)`` for ``kind == "proof"``."""
    parse_tree_id(tree)
    if kind not in TREE_KINDS or (kind == "proof") != (groups is not None):
        raise ValueError(f"kind must be one of {TREE_KINDS}; groups exactly for proofs")
    if not path.startswith("/"):
        raise ValueError("path must start with '/'")
    span = f"/{groups[0]}-{groups[1]}" if groups is not None else ""
    return f"{TREE_ROOT}/{tree}/{kind}{span}{path}"


@dataclass(frozen=True, slots=True)
class TreeRoute:
    """A parsed tree URL: configuration, resource kind, the document path and, for proofs,
    the first group and the group count."""

    tree_hash: TreeHash
    group_size: int
    kind: str
    path: str
    first_group: int = 0
    groups: int = 0


def parse_tree_route(path: str) -> TreeRoute:
    """Read a path made by :func:`tree_url` (already percent-decoded); :class:`ValueError`
    when it is not one."""
    prefix = TREE_ROOT + "/"
    if not path.startswith(prefix):
        raise ValueError("not under " + TREE_ROOT)
    ident, _, rest = path[len(prefix):].partition("/")
    alg, group_size = parse_tree_id(ident)
    kind, sep, rest = rest.partition("/")
    if kind not in TREE_KINDS or not sep:
        raise ValueError(f"unknown tree resource {kind!r}")
    first = count = 0
    if kind == "proof":
        span, sep, rest = rest.partition("/")
        m = _PROOF_SPAN.fullmatch(span)
        if m is None or not sep:
            raise ValueError(f"bad proof span {span!r}")
        first, count = int(m[1]), int(m[2])
        if count < 1:
            raise ValueError("a proof covers at least one group")
    return TreeRoute(alg, group_size, kind, "/" + rest, first, count)


# -- content codings ---------------------------------------------------------------------------------


def content_codings(value: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` value, in the order they were applied,
    lower-cased (``identity`` and empty members dropped)."""
    if not value:
        return []
    return [c for c in (m.strip(" \t").lower() for m in value.split(",")) if c and c != "identity"]


class CodingError(SineError, ValueError):
    """A body that does not decode, or decodes past its bound."""


class BodyDecoder:
    """Undo the outermost ``gzip`` coding of a body as it arrives, with bounds.

    ``BodyDecoder(None, limit)`` passes bytes through; ``BodyDecoder("gzip", limit)`` inflates
    them, in pieces of at most ``piece`` bytes (so one small chunk of a gzip bomb never becomes
    one huge buffer).  Either way more than ``limit`` output bytes in all raise
    :class:`CodingError`, as does a gzip stream that is corrupt, ends early (at :meth:`finish`)
    or has bytes after its end.
    """

    def __init__(self, coding: str | None, limit: int, piece: int = 1 << 20) -> None:
        if coding not in (None, "gzip", "x-gzip"):
            raise CodingError(f"unsupported content coding {coding!r}")
        if limit < 0 or piece < 1:
            raise ValueError("need limit >= 0 and piece >= 1")
        self.limit, self.piece = limit, piece
        self.produced = 0
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if coding else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, as non-empty pieces."""
        pieces = [data] if self._inflate is None else self._inflated(data)
        for out in pieces:
            room = self.limit - self.produced
            self.produced += len(out)
            if self.produced > self.limit:
                if room > 0:
                    yield out[:room]  # up to the bound: the consumer may name the first bad byte
                raise CodingError(f"body decodes to more than {self.limit} bytes")
            if out:
                yield out

    def _inflated(self, data: bytes) -> Iterator[bytes]:
        assert self._inflate is not None
        while True:  # until the input is used up and a piece came out short (nothing pending)
            if self._inflate.eof and data:
                raise CodingError("bytes after the end of the gzip stream")
            try:
                out = self._inflate.decompress(data, self.piece)
            except zlib.error as exc:
                raise CodingError(f"corrupt gzip body: {exc}") from None
            if self._inflate.unused_data:
                raise CodingError("bytes after the end of the gzip stream")
            data = self._inflate.unconsumed_tail
            yield out
            if not data and len(out) < self.piece:
                return

    def finish(self) -> None:
        """The body has ended: a gzip stream must have ended too."""
        if self._inflate is not None and not self._inflate.eof:
            raise CodingError("gzip body ended early")
