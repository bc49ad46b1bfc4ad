"""Tree mode: an outboard Merkle tree beside SINE's hash chain, so any byte range verifies alone.

The document stays unchanged; the tree is a separate resource (an *outboard*, as in Bao).
The document is cut into ``N = max(1, ceil(L / G))`` chunk groups of ``G`` bytes (1, 4, 16 or
64 KiB; the last group is short, an empty document has one empty group).  With ``H`` the
tree hash (SHA-256 from :mod:`hashlib` or BLAKE3 from the ``blake3`` package)::

    leaf(i)      = H(0x00 || u64(i) || group_i)
    parent(l, r) = H(0x01 || l || r)
    root         = H(0x02 || u8(hash) || u8(log2 G) || u64(L) || top)

The tree is left-full: a node over ``c > 1`` groups gives its left child the largest power
of two below ``c``.  The three prefixes keep leaves, parents and the root apart; the root binds
the length, so no truncation or extension verifies.  ``root`` is signed exactly as SINE signs
``Y_0``: ``Sign(label || TreeHead)`` with ``T``, ``E``, ``L`` and the path in the head (the
head's variant byte is the byte SINE version 1 reserves as zero, so a chain verifier rejects a
tree head and the labels keep the two signatures apart).  ``TREE.md`` is the normative
description of the bytes; this module is the executable form, sans-IO throughout.

The streaming and range verifiers are in :mod:`sine.tree_verifier`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

import blake3

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .algorithms import SigAlg, SigningKey, VerifyingKey
from .errors import (
    BlockMismatch,
    RemoteProtocolError,
    TagFormatError,
    TrailingData,
    TruncatedDocument,
)
from .format import MAGIC, MAX_PATH_BYTES, MAX_SIGNATURE, VERSION
from .verifier import check_signature, check_signed_head

__all__ = [
    "TreeHash", "GROUP_SIZES", "HASH_SIZE", "TREE_VARIANT", "TREE_LABEL", "TreeError",
    "TreeFormatError", "GroupMismatch", "TreeTruncated", "TreeTrailingData", "TreeHead",
    "TreeTag", "Outboard", "RangeProof", "SignedTree", "TreeOverhead", "group_count",
    "left_groups", "covering_groups", "leaf_hash", "parent_hash", "root_hash", "build_outboard",
    "sign_tree", "verify_tree_tag", "make_proof", "proof_offsets", "proof_from_outboard",
    "proof_root", "encode_interleaved", "tree_overhead", "push_tree_head", "pull_tree_head",
    "push_tree_tag", "pull_tree_tag", "push_outboard", "pull_outboard", "push_range_proof",
    "pull_range_proof",
]


class TreeHash(IntEnum):
    """Hash of the tree (its own identifier space: BLAKE3 is not a SINE chain hash)."""

    SHA256 = 1
    BLAKE3 = 2


#: allowed chunk-group sizes in bytes (1, 4, 16, 64 KiB), encoded as their base-2 logarithm
GROUP_SIZES = (1 << 10, 1 << 12, 1 << 14, 1 << 16)
HASH_SIZE = 32
TREE_VARIANT = 1  # the head byte that SINE version 1 calls "flags" and requires to be 0
TREE_LABEL = b"SINE/1 tree root\x00"
OUTBOARD_MAGIC = b"SITO"
PROOF_MAGIC = b"SITP"
HEADER_SIZE = 16  # outboard and proof header: magic, version, hash, log2 G, 0, u64 L
MAX_LENGTH = (1 << 63) - 1
_LEAF, _PARENT, _ROOT = b"\x00", b"\x01", b"\x02"


class _Hash(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> object: ...

    def digest(self) -> bytes: ...


_NEW: dict[TreeHash, Callable[[bytes], _Hash]] = {
    TreeHash.SHA256: hashlib.sha256,
    TreeHash.BLAKE3: blake3.blake3,
}


class TreeError(RemoteProtocolError):
    """A remote error of tree mode; ``block`` is 0 for the head and ``g + 1`` for group ``g``."""

    @property
    def group(self) -> int | None:
        """The 0-based chunk group blamed (``None``: the head)."""
        return self.block - 1 if self.block else None


class TreeFormatError(TreeError, TagFormatError):
    """Head, outboard or proof bytes do not parse, or do not match the signed head."""


class GroupMismatch(TreeError, BlockMismatch):
    """A chunk group, or a tree node above it, does not hash to the trusted value."""


class TreeTruncated(TreeError, TruncatedDocument):
    """The body ended before every group arrived; ``group`` is the first missing one."""


class TreeTrailingData(TreeError, TrailingData):
    """Bytes arrived after the last group (``group`` is one past it)."""


# -- tree arithmetic --------------------------------------------------------------------------


def group_count(length: int, group_size: int) -> int:
    """``N = max(1, ceil(L / G))``: an empty document is one empty group."""
    return max(1, -(-length // group_size))


def left_groups(count: int) -> int:
    """Groups under the left child of a node over ``count >= 2`` groups."""
    return 1 << ((count - 1).bit_length() - 1)


def covering_groups(first: int, last: int, length: int, group_size: int) -> tuple[int, int]:
    """``(g0, g1)``: the groups covering ``Range: bytes=first-last`` (inclusive, satisfiable)."""
    if not 0 <= first <= last < length:
        raise ValueError(f"range {first}-{last} not satisfiable for {length} bytes")
    return first // group_size, last // group_size


def _log2_group(group_size: int) -> int:
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group size must be one of {GROUP_SIZES}")
    return group_size.bit_length() - 1


def leaf_hash(alg: TreeHash, index: int, data: bytes | bytearray | memoryview) -> bytes:
    h = _NEW[alg](_LEAF + index.to_bytes(8, "big"))
    h.update(data)
    return h.digest()


def parent_hash(alg: TreeHash, left: bytes, right: bytes) -> bytes:
    return _NEW[alg](_PARENT + left + right).digest()


def root_hash(alg: TreeHash, group_size: int, length: int, top: bytes) -> bytes:
    """The signed root: the top node bound to the hash, the group size and the length."""
    head = bytes([alg, _log2_group(group_size)]) + length.to_bytes(8, "big")
    return _NEW[alg](_ROOT + head + top).digest()


def _check_root(alg: TreeHash, group_size: int, length: int, top: bytes, root: bytes) -> bool:
    return hmac.compare_digest(root_hash(alg, group_size, length, top), root)


# -- the signed head ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeHead:
    """The signed header of a tree (``TREE.md`` section 3); ``root`` is the signed root."""

    tree_hash: TreeHash
    sig_alg: SigAlg
    group_size: int
    timestamp: int
    expires: int
    content_length: int
    path: str
    root: bytes

    def __post_init__(self) -> None:
        _log2_group(self.group_size)
        if len(self.root) != HASH_SIZE:
            raise ValueError("root must be 32 bytes")
        if not 0 <= self.timestamp < self.expires < 1 << 64:
            raise ValueError("need 0 <= timestamp < expires < 2**64")
        if not 0 <= self.content_length <= MAX_LENGTH:
            raise ValueError("content length out of range")
        raw = self.path.encode("utf-8", "strict")
        if not self.path.startswith("/") or len(raw) > MAX_PATH_BYTES or "\x00" in self.path:
            raise ValueError("path must start with '/', hold no NUL and be at most 1024 bytes")

    @property
    def group_count(self) -> int:
        return group_count(self.content_length, self.group_size)

    def signed_message(self) -> bytes:
        """The exact bytes the signature covers (a label no SINE chain tag uses)."""
        return TREE_LABEL + push_tree_head(self)


def push_tree_head(head: TreeHead) -> bytes:
    w = Writer()
    w.push_bytes(MAGIC)
    for value in (VERSION, head.tree_hash, head.sig_alg, TREE_VARIANT):
        w.push_uint8(value)
    w.push_uint8(_log2_group(head.group_size))
    for value in (head.timestamp, head.expires, head.content_length, head.group_count):
        w.push_uint(value, 8)
    w.push_vector(2, head.path.encode())
    w.push_bytes(head.root)
    return w.getvalue()


def pull_tree_head(buf: Buffer) -> TreeHead:
    """Decode a :class:`TreeHead`; every error is :class:`TreeFormatError` for block 0."""
    try:
        if buf.pull_bytes(4) != MAGIC or buf.pull_uint8() != VERSION:
            raise TreeFormatError("bad magic or version", 0)
        alg, sig = TreeHash(buf.pull_uint8()), SigAlg(buf.pull_uint8())
        if buf.pull_uint8() != TREE_VARIANT:
            raise TreeFormatError("not a tree head", 0)
        log2 = buf.pull_uint8()
        timestamp, expires, length, count = (buf.pull_uint(8) for _ in range(4))
        path = buf.pull_vector(2, 1, MAX_PATH_BYTES).decode("utf-8", "strict")
        head = TreeHead(alg, sig, 1 << min(log2, 32), timestamp, expires, length, path,
                        buf.pull_bytes(HASH_SIZE))
    except (DecodeError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise TreeFormatError(f"bad tree head: {exc}", 0) from None
    if count != head.group_count:
        raise TreeFormatError("group count differs from the length", 0)
    return head


@dataclass(frozen=True)
class TreeTag:
    """The head and its signature, framed as SINE's ``Tag``: ``u32 len | head | u16 len | sig``."""

    head: TreeHead
    signature: bytes

    def __post_init__(self) -> None:
        if not 0 < len(self.signature) <= MAX_SIGNATURE:
            raise ValueError("signature length out of range")


def push_tree_tag(tag: TreeTag) -> bytes:
    w = Writer()
    w.push_vector(4, push_tree_head(tag.head))
    w.push_vector(2, tag.signature)
    return w.getvalue()


def pull_tree_tag(buf: Buffer) -> TreeTag:
    """Decode a :class:`TreeTag`; the head must be consumed exactly, trailing bytes rejected."""
    try:
        inner = Buffer(buf.pull_vector(4, 1, 80 + MAX_PATH_BYTES))
        head = pull_tree_head(inner)
        if not inner.eof():
            raise TreeFormatError("trailing bytes inside the head", 0)
        tag = TreeTag(head, buf.pull_vector(2, 1, MAX_SIGNATURE))
    except DecodeError as exc:
        raise TreeFormatError(f"bad tree tag: {exc}", 0) from None
    if not buf.eof():
        raise TreeFormatError("trailing bytes after the tree tag", 0)
    return tag


def verify_tree_tag(
    tag: TreeTag, path: str, now: float, public_key: VerifyingKey, clock_skew: float = 300.0
) -> TreeHead:
    """Check the head as :class:`sine.verifier.StreamVerifier` checks ``Y_0``: signature, path,
    then ``T - skew <= now < E``.  Raises the same typed errors, all for block 0."""
    head = tag.head
    check_signature(public_key, head.sig_alg, head.signed_message(), tag.signature)
    check_signed_head("tree head", head.path, path, head.timestamp, head.expires, now, clock_skew)
    return head


# -- outboard ----------------------------------------------------------------------------------


def _push_header(w: Writer, magic: bytes, alg: TreeHash, group_size: int, length: int) -> None:
    w.push_bytes(magic)
    for value in (VERSION, alg, _log2_group(group_size), 0):
        w.push_uint8(value)
    w.push_uint(length, 8)


def _pull_header(buf: Buffer, magic: bytes) -> tuple[TreeHash, int, int]:
    """``(hash, group size, length)``; raises :class:`DecodeError` or :class:`ValueError`."""
    if buf.pull_bytes(4) != magic or buf.pull_uint8() != VERSION:
        raise ValueError("bad magic or version")
    alg = TreeHash(buf.pull_uint8())
    log2 = buf.pull_uint8()
    if buf.pull_uint8() != 0:
        raise ValueError("reserved byte must be zero")
    group_size = 1 << min(log2, 32)
    _log2_group(group_size)
    length = buf.pull_uint(8)
    if length > MAX_LENGTH:
        raise ValueError("length out of range")
    return alg, group_size, length


@dataclass(frozen=True)
class Outboard:
    """The tree without the data: every parent's ``(left, right)`` child hashes, pre-order."""

    tree_hash: TreeHash
    group_size: int
    content_length: int
    parents: tuple[tuple[bytes, bytes], ...]

    def __post_init__(self) -> None:
        _log2_group(self.group_size)
        if len(self.parents) != group_count(self.content_length, self.group_size) - 1:
            raise ValueError("need exactly N - 1 parents")
        if any(len(h) != HASH_SIZE for pair in self.parents for h in pair):
            raise ValueError("hashes must be 32 bytes")


def push_outboard(ob: Outboard) -> bytes:
    w = Writer()
    _push_header(w, OUTBOARD_MAGIC, ob.tree_hash, ob.group_size, ob.content_length)
    for left, right in ob.parents:
        w.push_bytes(left + right)
    return w.getvalue()


def pull_outboard(buf: Buffer, block: int = 1) -> Outboard:
    """Decode an outboard; its length must be exactly ``16 + 64 (N - 1)`` (checked first).

    Errors are :class:`TreeFormatError` for ``block`` (default 1: nothing verifies without it).
    """
    try:
        alg, group_size, length = _pull_header(buf, OUTBOARD_MAGIC)
        count = group_count(length, group_size) - 1
        if buf.remaining != 2 * HASH_SIZE * count:
            raise ValueError("outboard has the wrong length")
        parents = tuple((buf.pull_bytes(HASH_SIZE), buf.pull_bytes(HASH_SIZE))
                        for _ in range(count))
    except (DecodeError, ValueError) as exc:
        raise TreeFormatError(f"bad outboard: {exc}", block) from None
    return Outboard(alg, group_size, length, parents)


def _group(data: bytes | bytearray | memoryview, index: int, group_size: int) -> bytes | bytearray | memoryview:
    return data[index * group_size : (index + 1) * group_size]


def build_outboard(document: bytes, group_size: int, alg: TreeHash) -> tuple[Outboard, bytes]:
    """The outboard of ``document`` and its signed root (one pass, pre-order parents)."""
    view = memoryview(document)
    parents: list[tuple[bytes, bytes]] = []

    def node(start: int, count: int) -> bytes:
        if count == 1:
            return leaf_hash(alg, start, _group(view, start, group_size))
        slot = len(parents)
        parents.append((b"", b""))
        split = left_groups(count)
        pair = node(start, split), node(start + split, count - split)
        parents[slot] = pair
        return parent_hash(alg, *pair)

    top = node(0, group_count(len(document), group_size))
    outboard = Outboard(alg, group_size, len(document), tuple(parents))
    return outboard, root_hash(alg, group_size, len(document), top)


@dataclass(frozen=True)
class SignedTree:
    """The signer's output: the signed head (``tag``) and the outboard."""

    tag: TreeTag
    outboard: Outboard


def sign_tree(
    document: bytes,
    path: str,
    key: SigningKey,
    now: float,
    *,
    lifetime: int = 24 * 3600,
    group_size: int = GROUP_SIZES[0],
    tree_hash: TreeHash = TreeHash.SHA256,
) -> SignedTree:
    """Sign ``document`` at ``path`` in tree mode; ``T = floor(now)``, ``E = T + lifetime``."""
    if lifetime <= 0:
        raise ValueError("lifetime must be positive")
    outboard, root = build_outboard(document, group_size, TreeHash(tree_hash))
    timestamp = int(now)
    head = TreeHead(TreeHash(tree_hash), key.alg, group_size, timestamp, timestamp + lifetime,
                    len(document), path, root)
    return SignedTree(TreeTag(head, key.sign(head.signed_message())), outboard)


def encode_interleaved(document: bytes, outboard: Outboard) -> Iterator[bytes]:
    """The combined stream: each parent's 64 bytes before its subtree, groups in order."""
    if len(document) != outboard.content_length:
        raise ValueError("document length differs from the outboard's")
    view, g = memoryview(document), outboard.group_size
    pairs = iter(outboard.parents)
    stack = [(0, group_count(len(document), g))]
    while stack:
        start, count = stack.pop()
        if count == 1:
            yield bytes(_group(view, start, g))
            continue
        yield b"".join(next(pairs))
        split = left_groups(count)
        stack += [(start + split, count - split), (start, split)]


# -- range proofs ------------------------------------------------------------------------------


def _sibling_spans(count: int, g0: int, g1: int) -> list[tuple[int, int, int]]:
    """``(start, count, pair index)`` of the subtrees beside groups ``g0..g1``, left to right.

    The pair index is the pre-order index of the subtree's parent in the outboard and the
    side (0 left, 1 right) is encoded as ``2 * index + side``.
    """
    out: list[tuple[int, int, int]] = []

    def walk(start: int, count: int, pair: int) -> None:
        split = left_groups(count)
        children = ((start, split, pair + 1, 0), (start + split, count - split, pair + split, 1))
        for c_start, c_count, c_pair, side in children:
            if c_start > g1 or c_start + c_count <= g0:
                out.append((c_start, c_count, 2 * pair + side))
            elif c_count > 1 and not (g0 <= c_start and c_start + c_count - 1 <= g1):
                walk(c_start, c_count, c_pair)

    if count > 1 and not (g0 == 0 and g1 == count - 1):
        walk(0, count, 0)
    return out


@dataclass(frozen=True)
class RangeProof:
    """The sibling hashes that verify groups ``first_group .. first_group + groups - 1``."""

    tree_hash: TreeHash
    group_size: int
    content_length: int
    first_group: int
    groups: int
    siblings: tuple[bytes, ...]

    def __post_init__(self) -> None:
        n = group_count(self.content_length, self.group_size)
        if not (self.groups >= 1 and 0 <= self.first_group
                and self.first_group + self.groups <= n):
            raise ValueError("group range outside the document")
        last = self.first_group + self.groups - 1
        if len(self.siblings) != len(_sibling_spans(n, self.first_group, last)):
            raise ValueError("wrong number of sibling hashes for this range")
        if any(len(h) != HASH_SIZE for h in self.siblings):
            raise ValueError("hashes must be 32 bytes")

    def byte_span(self) -> tuple[int, int]:
        """``[start, end)`` of the data this proof verifies (whole groups)."""
        start = self.first_group * self.group_size
        end = min((self.first_group + self.groups) * self.group_size, self.content_length)
        return start, end


def make_proof(outboard: Outboard, first: int, last: int) -> RangeProof:
    """The proof for ``Range: bytes=first-last``, from the outboard alone (no document bytes)."""
    g = outboard.group_size
    g0, g1 = covering_groups(first, last, outboard.content_length, g)
    n = group_count(outboard.content_length, g)
    siblings = tuple(outboard.parents[code // 2][code % 2]
                     for _, _, code in _sibling_spans(n, g0, g1))
    return RangeProof(outboard.tree_hash, g, outboard.content_length, g0, g1 - g0 + 1, siblings)


def proof_offsets(length: int, group_size: int, first_group: int, groups: int) -> list[int]:
    """Offsets in the encoded outboard of the 32-byte sibling hashes proving groups
    ``first_group .. first_group + groups - 1`` (left to right); ``ValueError`` outside."""
    n = group_count(length, group_size)
    if not (groups >= 1 and 0 <= first_group and first_group + groups <= n):
        raise ValueError("group range outside the document")
    spans = _sibling_spans(n, first_group, first_group + groups - 1)
    return [HEADER_SIZE + HASH_SIZE * code for _, _, code in spans]


def proof_from_outboard(read: Callable[[int, int], bytes], alg: TreeHash, group_size: int,
                        length: int, first_group: int, groups: int) -> RangeProof:
    """The :class:`RangeProof` of a group span read through ``read(offset, size)`` (a seek
    and a read of the outboard file: ``O(log N)`` hashes, no parsing of the whole tree)."""
    siblings = tuple(read(offset, HASH_SIZE)
                     for offset in proof_offsets(length, group_size, first_group, groups))
    return RangeProof(alg, group_size, length, first_group, groups, siblings)  # checks sizes


def push_range_proof(proof: RangeProof) -> bytes:
    w = Writer()
    _push_header(w, PROOF_MAGIC, proof.tree_hash, proof.group_size, proof.content_length)
    w.push_uint(proof.first_group, 8)
    w.push_uint(proof.groups, 8)
    w.push_uint8(len(proof.siblings))
    for h in proof.siblings:
        w.push_bytes(h)
    return w.getvalue()


def pull_range_proof(buf: Buffer, block: int = 1) -> RangeProof:
    """Decode a :class:`RangeProof`; the sibling count must fit the range, no trailing bytes.

    Errors are :class:`TreeFormatError` for ``block`` (a verifier passes its first group + 1).
    """
    try:
        alg, group_size, length = _pull_header(buf, PROOF_MAGIC)
        first, groups, count = buf.pull_uint(8), buf.pull_uint(8), buf.pull_uint8()
        if buf.remaining != count * HASH_SIZE:
            raise ValueError("proof has the wrong length")
        siblings = tuple(buf.pull_bytes(HASH_SIZE) for _ in range(count))
        return RangeProof(alg, group_size, length, first, groups, siblings)
    except (DecodeError, ValueError) as exc:
        raise TreeFormatError(f"bad range proof: {exc}", block) from None


def proof_root(proof: RangeProof, data: bytes | bytearray | memoryview) -> bytes:
    """The signed root implied by ``proof`` and the whole groups ``data`` (no check here)."""
    alg, g = proof.tree_hash, proof.group_size
    n = group_count(proof.content_length, g)
    g0, g1 = proof.first_group, proof.first_group + proof.groups - 1
    siblings = iter(proof.siblings)

    def node(start: int, count: int) -> bytes:
        if start > g1 or start + count <= g0:
            return next(siblings)
        if count == 1:
            return leaf_hash(alg, start, _group(data, start - g0, g))
        split = left_groups(count)
        return parent_hash(alg, node(start, split), node(start + split, count - split))

    return root_hash(alg, g, proof.content_length, node(0, n))


# -- the cost model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeOverhead:
    """Bytes beyond the document (or the requested range) that tree mode costs."""

    outboard: int  # the outboard resource: 16 + 64 (N - 1)
    interleaved: int  # parents carried by the combined stream: 64 (N - 1)
    proof: int  # range proof (0 without a range)
    widening: int  # bytes of the covering groups outside the requested range


def tree_overhead(
    length: int, group_size: int, byte_range: tuple[int, int] | None = None
) -> TreeOverhead:
    """Overhead of tree mode for a document of ``length`` bytes (pure arithmetic, no hashing).

    ``byte_range = (first, last)`` (inclusive, as in ``Range: bytes=first-last``) adds the proof
    and the widening to whole groups.  The signed head (about 100 bytes plus the path and the
    signature) is the same in every case and left out.
    """
    _log2_group(group_size)
    n = group_count(length, group_size)
    parents = 2 * HASH_SIZE * (n - 1)
    proof = widening = 0
    if byte_range is not None:
        first, last = byte_range
        g0, g1 = covering_groups(first, last, length, group_size)
        proof = HEADER_SIZE + 17 + HASH_SIZE * len(_sibling_spans(n, g0, g1))
        end = min((g1 + 1) * group_size, length)
        widening = (end - g0 * group_size) - (last - first + 1)
    return TreeOverhead(HEADER_SIZE + parents, parents, proof, widening)
