"""Wire codecs of SINE version 1: dataclasses with ``pull_*`` / ``push_*`` pairs.

Every structure here round-trips byte-exact: ``pull_x(Buffer(push_x(m))) == m`` and
``push_x(pull_x(b)) == b`` for every ``b`` the puller accepts.  Length-prefixed structures
reject trailing bytes.  ``FORMAT.md`` in this package is the normative description; this
module is its executable form.

The byte cursor is :class:`tls12.buffer.Buffer` (reads) and :class:`tls12.buffer.Writer`
(writes), as for every codec of the testbed.  A short read there raises
:class:`tls12.errors.DecodeError`; every ``pull_*`` here turns it into
:class:`~sine.errors.TagFormatError` naming the block, so a SINE caller sees one error type.

Structures
----------
:class:`TagInfo`
    The signed header: algorithms, block size, ``T``, ``E``, content length, ``n``, path,
    the root of the document's hash chain ``h_1`` and (SINEX) the Forward Authenticator's
    length and chain root ``f_1``.
:class:`Tag`
    ``Y_0``: a :class:`TagInfo` plus the signature over it.
:class:`SeparateTag`
    The separate-tag form ("AT" as a companion resource or header): the :class:`Tag`, the
    chain links ``h_2..h_n`` and the Forward Authenticator bytes.
:class:`ForwardAuthenticator`
    SINEX: sorted ``(path, AT_sign digest)`` pairs of the pages a page links to.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .algorithms import HashAlg, SigAlg, digest_size, hash_new
from .errors import TagFormatError

__all__ = [
    "MAGIC",
    "VERSION",
    "MIN_BLOCK_SIZE",
    "MAX_BLOCK_SIZE",
    "MAX_PATH_BYTES",
    "MAX_FA_LENGTH",
    "MAX_SIGNATURE",
    "AT_SIGN_LABEL",
    "Y0_LABEL",
    "TagInfo",
    "Tag",
    "SeparateTag",
    "ForwardAuthenticator",
    "pull_tag_info",
    "push_tag_info",
    "pull_tag",
    "push_tag",
    "pull_separate_tag",
    "push_separate_tag",
    "pull_forward_authenticator",
    "push_forward_authenticator",
    "block_count",
]

MAGIC = b"SINE"
VERSION = 1
MIN_BLOCK_SIZE = 16
MAX_BLOCK_SIZE = 1 << 20
MAX_PATH_BYTES = 1024
MAX_FA_LENGTH = 1 << 20
MAX_SIGNATURE = 1024
MAX_TAG_INFO = 4 + 4 + 4 + 8 * 4 + 2 + MAX_PATH_BYTES + 64 + 4 + 64
AT_SIGN_LABEL = b"SINE/1 AT_sign\x00"
Y0_LABEL = b"SINE/1 Y_0\x00"


def block_count(length: int, block_size: int) -> int:
    """``n = ceil(length / block_size)``; an empty document has ``n = 0``."""
    return -(-length // block_size)


@contextmanager
def _decoding(block: int = 0) -> Iterator[None]:
    """Turn the cursor's :class:`~tls12.errors.DecodeError` (a short read) into
    :class:`TagFormatError` for ``block``."""
    try:
        yield
    except DecodeError as exc:
        raise TagFormatError(str(exc), block) from None


@dataclass(frozen=True)
class TagInfo:
    """The signed header of a tag (the message under ``Y_0``'s signature).

    ``timestamp`` (``T``) and ``expires`` (``E``) are whole seconds since the Unix epoch.
    ``content_root`` is ``h_1``; ``fa_root`` is ``f_1`` (all zero bytes when there is no
    Forward Authenticator, i.e. ``fa_length == 0``).
    """

    hash_alg: HashAlg
    sig_alg: SigAlg
    block_size: int
    timestamp: int
    expires: int
    content_length: int
    path: str
    content_root: bytes
    fa_length: int = 0
    fa_root: bytes = b""
    version: int = VERSION

    def __post_init__(self) -> None:
        hlen = digest_size(self.hash_alg)
        if not self.fa_root:
            object.__setattr__(self, "fa_root", bytes(hlen))
        if len(self.content_root) != hlen or len(self.fa_root) != hlen:
            raise ValueError("chain roots must have the hash's digest size")
        if not MIN_BLOCK_SIZE <= self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block size must be in [{MIN_BLOCK_SIZE}, {MAX_BLOCK_SIZE}]")
        if not 0 <= self.timestamp < self.expires < 1 << 64:
            raise ValueError("need 0 <= timestamp < expires < 2**64")
        if not 0 <= self.content_length < 1 << 63:
            raise ValueError("content length out of range")
        if not 0 <= self.fa_length <= MAX_FA_LENGTH:
            raise ValueError("forward authenticator too long")
        _check_path(self.path)

    @property
    def digest_size(self) -> int:
        return digest_size(self.hash_alg)

    @property
    def block_count(self) -> int:
        """``n``, the number of document blocks."""
        return block_count(self.content_length, self.block_size)

    @property
    def fa_block_count(self) -> int:
        """``m``, the number of Forward-Authenticator blocks."""
        return block_count(self.fa_length, self.block_size)

    def identity_bytes(self) -> bytes:
        """The encoding up to and including ``h_1``: what AT_sign digests (no FA)."""
        w = Writer()
        w.push_bytes(MAGIC)
        for value in (self.version, self.hash_alg, self.sig_alg, 0):  # 0: reserved flags
            w.push_uint8(value)
        w.push_uint(self.block_size, 4)
        for value in (self.timestamp, self.expires, self.content_length, self.block_count):
            w.push_uint(value, 8)
        w.push_vector(2, self.path.encode())
        w.push_bytes(self.content_root)
        return w.getvalue()

    def at_sign(self) -> bytes:
        """``AT_sign = H(label || identity)``: the SINEB/SINEX digest of this document.

        It covers ``h_1, n, T, E`` (and path, sizes, algorithms) but not the Forward
        Authenticator, so that pages may link to each other in cycles and a content change
        re-signs only the pages that link to the changed one.
        """
        return bytes(hash_new(self.hash_alg, AT_SIGN_LABEL + self.identity_bytes()).digest())

    def signed_message(self) -> bytes:
        """The exact bytes the signature of ``Y_0`` covers."""
        return Y0_LABEL + push_tag_info(self)


def _check_path(path: str) -> None:
    raw = path.encode("utf-8", "strict")
    if not path.startswith("/") or len(raw) > MAX_PATH_BYTES or "\x00" in path:
        raise ValueError("path must start with '/', hold no NUL and be at most 1024 bytes")


def push_tag_info(info: TagInfo) -> bytes:
    """Encode a :class:`TagInfo` (see ``FORMAT.md`` section 2)."""
    w = Writer()
    w.push_bytes(info.identity_bytes())
    w.push_uint(info.fa_length, 4)
    w.push_bytes(info.fa_root)
    return w.getvalue()


def pull_tag_info(buf: Buffer) -> TagInfo:
    """Decode a :class:`TagInfo`, checking every field; errors name block 0."""
    with _decoding():
        return _pull_tag_info(buf)


def _pull_tag_info(buf: Buffer) -> TagInfo:
    if buf.pull_bytes(4) != MAGIC:
        raise TagFormatError("bad magic", 0)
    version = buf.pull_uint8()
    if version != VERSION:
        raise TagFormatError(f"unsupported version {version}", 0)
    try:
        hash_alg = HashAlg(buf.pull_uint8())
        sig_alg = SigAlg(buf.pull_uint8())
    except ValueError as exc:
        raise TagFormatError(f"unknown algorithm: {exc}", 0) from None
    if buf.pull_uint8() != 0:
        raise TagFormatError("reserved flags must be zero", 0)
    block_size = buf.pull_uint(4)
    timestamp, expires, length, count = (buf.pull_uint(8) for _ in range(4))
    path_len = buf.pull_uint16()
    if path_len > MAX_PATH_BYTES:
        raise TagFormatError("path too long", 0)
    raw_path = buf.pull_bytes(path_len)
    hlen = digest_size(hash_alg)
    content_root = buf.pull_bytes(hlen)
    fa_length = buf.pull_uint(4)
    fa_root = buf.pull_bytes(hlen)
    try:
        path = raw_path.decode("utf-8", "strict")
        info = TagInfo(
            hash_alg, sig_alg, block_size, timestamp, expires, length, path,
            content_root, fa_length, fa_root, version,
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise TagFormatError(str(exc), 0) from None
    if count != info.block_count:
        raise TagFormatError(f"block count {count} != ceil(length / block size)", 0)
    if fa_length == 0 and fa_root != bytes(hlen):
        raise TagFormatError("empty forward authenticator must have a zero root", 0)
    return info


@dataclass(frozen=True)
class Tag:
    """``Y_0`` on the wire: the :class:`TagInfo` and its signature."""

    info: TagInfo
    signature: bytes

    def __post_init__(self) -> None:
        if not 0 < len(self.signature) <= MAX_SIGNATURE:
            raise ValueError("signature length out of range")


def push_tag(tag: Tag) -> bytes:
    """``info_len u32 | info | sig_len u16 | signature``."""
    w = Writer()
    w.push_vector(4, push_tag_info(tag.info))
    w.push_vector(2, tag.signature)
    return w.getvalue()


def pull_tag(buf: Buffer) -> Tag:
    """Decode a :class:`Tag`; the info block must be consumed exactly."""
    with _decoding():
        info_len = buf.pull_uint(4)
        if info_len > MAX_TAG_INFO:
            raise TagFormatError("tag info too long", 0)
        inner = Buffer(buf.pull_bytes(info_len))
        info = pull_tag_info(inner)
        if not inner.eof():
            raise TagFormatError("trailing bytes inside the tag info", 0)
        sig_len = buf.pull_uint16()
        if not 0 < sig_len <= MAX_SIGNATURE:
            raise TagFormatError("signature length out of range", 0)
        return Tag(info, buf.pull_bytes(sig_len))


@dataclass(frozen=True)
class SeparateTag:
    """The separate authentication tag: ``Tag | h_2 .. h_n | FA bytes``.

    With it, the document travels unmodified (plain ``Content-Type``) and the verifier
    checks ``H(B_i || h_{i+1}) == h_i`` as each block arrives.
    """

    tag: Tag
    links: tuple[bytes, ...] = field(default=())
    forward_authenticator: bytes = b""

    def __post_init__(self) -> None:
        info = self.tag.info
        if len(self.links) != max(info.block_count - 1, 0):
            raise ValueError("need exactly n - 1 chain links h_2..h_n")
        if any(len(h) != info.digest_size for h in self.links):
            raise ValueError("chain links must have the hash's digest size")
        if len(self.forward_authenticator) != info.fa_length:
            raise ValueError("forward authenticator length differs from the tag's")


def push_separate_tag(at: SeparateTag) -> bytes:
    return push_tag(at.tag) + b"".join(at.links) + at.forward_authenticator


def pull_separate_tag(buf: Buffer, max_links: int = 1 << 22) -> SeparateTag:
    """Decode a :class:`SeparateTag`; rejects trailing bytes and more than ``max_links`` links."""
    tag = pull_tag(buf)
    info = tag.info
    count = max(info.block_count - 1, 0)
    if count > max_links:
        raise TagFormatError("too many chain links", 0)
    hlen = info.digest_size
    if buf.remaining != count * hlen + info.fa_length:
        raise TagFormatError("separate tag has the wrong length", 0)
    links = tuple(buf.pull_bytes(hlen) for _ in range(count))
    return SeparateTag(tag, links, buf.pull_bytes(info.fa_length))


@dataclass(frozen=True)
class ForwardAuthenticator:
    """SINEX ``Forward_Authenticator(P)``: ``AT_sign`` of every page in ``Expected_Set(P)``.

    ``entries`` is sorted by path, paths unique; every digest has the same length.
    """

    entries: tuple[tuple[str, bytes], ...] = ()

    def __post_init__(self) -> None:
        paths = [p for p, _ in self.entries]
        if paths != sorted(set(paths)):
            raise ValueError("entries must be sorted by path and unique")
        for path, digest in self.entries:
            _check_path(path)
            if not 1 <= len(digest) <= 64:
                raise ValueError("digest length out of range")

    def as_dict(self) -> dict[str, bytes]:
        return dict(self.entries)


def push_forward_authenticator(fa: ForwardAuthenticator) -> bytes:
    """``count u32 | (path_len u16 | path | digest_len u8 | digest)*``."""
    w = Writer()
    w.push_uint(len(fa.entries), 4)
    for path, digest in fa.entries:
        w.push_vector(2, path.encode())
        w.push_vector(1, digest)
    return w.getvalue()


def pull_forward_authenticator(buf: Buffer, block: int = 0) -> ForwardAuthenticator:
    """Decode a whole Forward Authenticator; rejects trailing bytes."""
    try:
        count = buf.pull_uint(4)
        if count > buf.remaining // 4:
            raise TagFormatError("entry count exceeds the data", block)
        entries = []
        for _ in range(count):
            path = buf.pull_vector(2).decode("utf-8", "strict")
            entries.append((path, buf.pull_vector(1)))
        if not buf.eof():
            raise TagFormatError("trailing bytes after the forward authenticator", block)
        return ForwardAuthenticator(tuple(entries))
    except TagFormatError as exc:
        raise TagFormatError(str(exc).split(": ", 1)[-1], block) from None
    except DecodeError as exc:
        raise TagFormatError(str(exc), block) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TagFormatError(f"bad forward authenticator: {exc}", block) from None
