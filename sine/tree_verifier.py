"""Sans-IO verifiers of tree mode: a whole document progressively, or one byte range alone.

Usage (whole document, combined stream: each parent's 64 bytes before its subtree)::

    v = TreeVerifier("/video.bin", now, public_key=pk, tag=tag_bytes)
    for chunk in body:
        for event in v.receive_data(chunk):
            if isinstance(event, VerifiedData):
                use(event.offset, event.data)    # only verified bytes ever come out
    v.receive_data(b"")                          # end of body: TruncatedDocument if short

With ``outboard=outboard_bytes`` (fetched first) the body is the plain, unmodified document.
A client that wants the head verified before it fetches the outboard (to bound that fetch by
:attr:`TreeVerifier.outboard_size`) passes ``outboard_later=True`` and hands the outboard over
with :meth:`TreeVerifier.supply_outboard` before the body.
A byte range (``Range: bytes=first-last``) verifies alone with its proof::

    v = SliceVerifier("/video.bin", now, public_key=pk, tag=tag_bytes, proof=proof_bytes,
                      first=first, last=last)
    v.receive_data(whole_groups)                 # the groups covering first..last

The head is verified at construction (block 0; the same checks and errors as SINE's ``Y_0``),
its events come out of the first :meth:`receive_data` call.  Errors are typed
:class:`~sine.errors.RemoteProtocolError` subclasses whose ``block`` is ``g + 1`` for the first
chunk group ``g`` that did not verify; events completed earlier in the failing call travel on
the exception as ``exc.events``; the verifier is closed afterwards.  A :class:`TreeVerifier`
holds at most one group plus one parent plus the chunk being fed; a :class:`SliceVerifier`
holds the covering groups until the root is recomputed (the proof has sibling hashes only, so
nothing in a range is trusted before all of it is in).
"""

from __future__ import annotations

import hmac
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto
from typing import NoReturn, TypeVar

from tls12.buffer import Buffer

from .algorithms import VerifyingKey
from .errors import LocalProtocolError, RemoteProtocolError
from .state import Input
from .tree import (
    HASH_SIZE,
    GroupMismatch,
    Outboard,
    RangeProof,
    TreeFormatError,
    TreeHead,
    TreeTag,
    TreeTrailingData,
    TreeTruncated,
    covering_groups,
    leaf_hash,
    left_groups,
    parent_hash,
    proof_root,
    pull_outboard,
    pull_range_proof,
    pull_tree_tag,
    root_hash,
    verify_tree_tag,
)

_T = TypeVar("_T")

__all__ = [
    "TreeEvent",
    "HeadVerified",
    "VerifiedData",
    "TreeVerified",
    "RangeVerified",
    "TreeState",
    "TREE_TRANSITIONS",
    "TreeVerifier",
    "SliceVerifier",
]


@dataclass(frozen=True, slots=True)
class TreeEvent:
    """Base class of tree-verifier events."""


@dataclass(frozen=True, slots=True)
class HeadVerified(TreeEvent):
    """The signed head is authentic, fresh and for the requested path."""

    head: TreeHead


@dataclass(frozen=True, slots=True)
class VerifiedData(TreeEvent):
    """Document bytes ``[offset, offset + len(data))``, verified against the signed root."""

    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class TreeVerified(TreeEvent):
    """Every group of the document verified; nothing is missing."""

    head: TreeHead


@dataclass(frozen=True, slots=True)
class RangeVerified(TreeEvent):
    """The requested range ``first..last`` (inclusive) verified."""

    first: int
    last: int


class TreeState(Enum):
    CONTENT = auto()
    DONE = auto()
    CLOSED = auto()


#: ``(state, input) -> next state``; any other pair raises :class:`LocalProtocolError`.
TREE_TRANSITIONS: dict[tuple[TreeState, Input], TreeState] = {
    (TreeState.CONTENT, Input.DATA): TreeState.CONTENT,
    (TreeState.CONTENT, Input.EOF): TreeState.CLOSED,  # truncated
    (TreeState.CONTENT, Input.CONTENT_DONE): TreeState.DONE,
    (TreeState.CONTENT, Input.FAIL): TreeState.CLOSED,
    (TreeState.DONE, Input.DATA): TreeState.CLOSED,  # trailing bytes
    (TreeState.DONE, Input.EOF): TreeState.DONE,
    (TreeState.DONE, Input.FAIL): TreeState.CLOSED,
}


def _tag(tag: bytes | TreeTag) -> TreeTag:
    return tag if isinstance(tag, TreeTag) else pull_tree_tag(Buffer(tag))


def _same_tree(head: TreeHead, alg: object, group_size: int, length: int, block: int) -> None:
    if (alg, group_size, length) != (head.tree_hash, head.group_size, head.content_length):
        raise TreeFormatError("hash, group size or length differ from the signed head", block)


class _Base(ABC):
    """State machine, failure plumbing and the head check shared by both verifiers."""

    def __init__(self, path: str, now: float, public_key: VerifyingKey, tag: bytes | TreeTag,
                 clock_skew: float) -> None:
        self.state = TreeState.CONTENT
        self._events: list[TreeEvent] = []
        self._buf = bytearray()
        self.released_bytes = 0
        self.head: TreeHead = self._fail_safe(
            lambda: verify_tree_tag(_tag(tag), path, now, public_key, clock_skew))
        self._events.append(HeadVerified(self.head))

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[TreeEvent]:
        """Feed received bytes; return the events they completed.  ``b""`` ends the body."""
        if not data:
            if self._move(Input.EOF) is TreeState.CLOSED:
                self._fail(TreeTruncated("body ended early", self._missing_block()))
            return self._take()
        if self._move(Input.DATA) is TreeState.CLOSED:
            self._fail(TreeTrailingData("bytes after the last group", self.head.group_count + 1))
        self._buf += data
        self._fail_safe(self._process)
        return self._take()

    def data_to_send(self) -> bytes:
        """Always ``b""``: a verifier only receives."""
        return b""

    @property
    def buffered(self) -> int:
        """Bytes held but not yet verified."""
        return len(self._buf)

    @abstractmethod
    def _process(self) -> None:
        """Verify and release what the buffer holds (each verifier's own walk)."""

    @abstractmethod
    def _missing_block(self) -> int:
        """The block a truncated body lacks first (for :class:`TreeTruncated`)."""

    def _take(self) -> list[TreeEvent]:
        events, self._events = self._events, []
        return events

    def _move(self, what: Input) -> TreeState:
        try:
            nxt = TREE_TRANSITIONS[self.state, what]
        except KeyError:
            message = ("verifier is closed after an error" if self.state is TreeState.CLOSED
                       else f"{what.name} not allowed in {self.state.name}")
            self.state = TreeState.CLOSED
            self._buf.clear()
            raise LocalProtocolError(message) from None
        if nxt is not TreeState.CLOSED:
            self.state = nxt
        return nxt

    def _done(self) -> None:
        self._move(Input.CONTENT_DONE)
        if self._buf:
            raise TreeTrailingData("bytes after the last group", self.head.group_count + 1)

    def _fail(self, exc: RemoteProtocolError) -> NoReturn:
        if self.state is not TreeState.CLOSED:
            self.state = TREE_TRANSITIONS[self.state, Input.FAIL]
        self._buf.clear()
        exc.events.extend(self._take())
        raise exc

    def _fail_safe(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except RemoteProtocolError as exc:
            self._fail(exc)


@dataclass(slots=True)
class _Node:
    """A subtree still to verify: its trusted hash and its groups ``start .. start+count-1``."""

    expected: bytes
    start: int
    count: int
    is_top: bool  # the top node is checked through the root (length binding)


class TreeVerifier(_Base):
    """Progressive verifier of a whole document (combined stream, or outboard plus plain body).

    Walks the tree in pre-order with a stack of trusted subtree hashes (``O(log N)``): a
    parent's child hashes are trusted once ``H(0x01 || l || r)`` matches, a group is released
    once ``H(0x00 || u64(i) || group)`` matches.  The top node is checked through the root, so
    a wrong length never verifies.
    """

    def __init__(
        self,
        path: str,
        now: float,
        *,
        public_key: VerifyingKey,
        tag: bytes | TreeTag,
        outboard: bytes | Outboard | None = None,
        outboard_later: bool = False,
        clock_skew: float = 300.0,
    ) -> None:
        super().__init__(path, now, public_key, tag, clock_skew)
        head = self.head
        self._outboard: Outboard | None = None
        self._awaiting_outboard = outboard_later and outboard is None
        if outboard is not None:
            self._outboard = self._fail_safe(lambda: self._check_outboard(outboard))
        self._pair = 0  # next outboard parent (pre-order)
        self._stack = [_Node(head.root, 0, head.group_count, True)]
        if not self._awaiting_outboard:
            self._fail_safe(self._process)  # an empty document verifies with no bytes at all

    @property
    def outboard_size(self) -> int:
        """Bytes of the outboard this (verified) head calls for: ``16 + 64 (N - 1)``.

        A client fetching the outboard after the head bounds the response by it, so a cache
        cannot make it buffer more than the signed tree is worth.
        """
        return 16 + 2 * HASH_SIZE * (self.head.group_count - 1)

    def supply_outboard(self, outboard: bytes | Outboard) -> list[TreeEvent]:
        """Hand over the outboard of a verifier made with ``outboard_later=True``.

        The head is verified first (at construction), so the outboard is fetched only for an
        authentic, fresh head and can be bounded by :attr:`outboard_size`.  A bad outboard is
        :class:`~sine.tree.TreeFormatError` for block 1 (the verifier closes); calling this
        twice, or without ``outboard_later``, is a :class:`LocalProtocolError`.  Returns the
        events it completed (an empty document verifies here).
        """
        if not self._awaiting_outboard or self.state is not TreeState.CONTENT:
            self.state = TreeState.CLOSED
            raise LocalProtocolError("no outboard expected now")
        self._awaiting_outboard = False
        self._outboard = self._fail_safe(lambda: self._check_outboard(outboard))
        self._fail_safe(self._process)
        return self._take()

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[TreeEvent]:
        if self._awaiting_outboard:
            self.state = TreeState.CLOSED
            raise LocalProtocolError("supply_outboard() must come before the body")
        return super().receive_data(data)

    def _check_outboard(self, outboard: bytes | Outboard) -> Outboard:
        ob = outboard if isinstance(outboard, Outboard) else pull_outboard(Buffer(outboard))
        _same_tree(self.head, ob.tree_hash, ob.group_size, ob.content_length, 1)
        return ob

    def _missing_block(self) -> int:
        return self._stack[-1].start + 1 if self._stack else self.head.group_count + 1

    def _trusted(self, node: _Node, digest: bytes) -> bool:
        h = self.head
        if node.is_top:
            digest = root_hash(h.tree_hash, h.group_size, h.content_length, digest)
        return hmac.compare_digest(digest, node.expected)

    def _process(self) -> None:
        pos, stack, h = 0, self._stack, self.head
        view = memoryview(self._buf)
        try:
            while stack:
                node = stack[-1]
                if node.count > 1:
                    pair, pos = self._next_pair(view, pos)
                    if pair is None:
                        break
                    left, right = pair
                    if not self._trusted(node, parent_hash(h.tree_hash, left, right)):
                        raise GroupMismatch("tree node does not match", node.start + 1)
                    split = left_groups(node.count)
                    stack.pop()
                    stack += [_Node(right, node.start + split, node.count - split, False),
                              _Node(left, node.start, split, False)]
                    continue
                end = min((node.start + 1) * h.group_size, h.content_length)
                size = end - node.start * h.group_size
                if len(view) - pos < size:
                    break
                data = bytes(view[pos : pos + size])
                if not self._trusted(node, leaf_hash(h.tree_hash, node.start, data)):
                    raise GroupMismatch("chunk group does not match", node.start + 1)
                pos += size
                stack.pop()
                self._release(node.start * h.group_size, data)
        finally:
            view.release()
            del self._buf[:pos]
        if not stack:
            self._done()

    def _next_pair(self, view: memoryview, pos: int) -> tuple[tuple[bytes, bytes] | None, int]:
        if self._outboard is not None:
            self._pair += 1
            return self._outboard.parents[self._pair - 1], pos
        if len(view) - pos < 2 * HASH_SIZE:
            return None, pos
        raw = bytes(view[pos : pos + 2 * HASH_SIZE])
        return (raw[:HASH_SIZE], raw[HASH_SIZE:]), pos + 2 * HASH_SIZE

    def _release(self, offset: int, data: bytes) -> None:
        if data:
            self.released_bytes += len(data)
            self._events.append(VerifiedData(offset, data))

    def _done(self) -> None:
        super()._done()
        self._events.append(TreeVerified(self.head))


class SliceVerifier(_Base):
    """Verifier of one byte range ``first..last`` (inclusive) with its :class:`RangeProof`.

    It is fed the whole chunk groups covering the range (the client widens the request to
    group boundaries, see :meth:`span`), recomputes the root from them and the proof's sibling
    hashes, and releases exactly ``first..last`` once the root matches.
    """

    def __init__(
        self,
        path: str,
        now: float,
        *,
        public_key: VerifyingKey,
        tag: bytes | TreeTag,
        proof: bytes | RangeProof,
        first: int,
        last: int,
        clock_skew: float = 300.0,
    ) -> None:
        super().__init__(path, now, public_key, tag, clock_skew)
        try:
            g0, g1 = covering_groups(first, last, self.head.content_length, self.head.group_size)
        except ValueError as exc:
            self.state = TreeState.CLOSED
            raise LocalProtocolError(str(exc)) from None
        self.first, self.last = first, last
        self._g0 = g0
        self.proof = self._fail_safe(lambda: self._check_proof(proof, g0, g1))
        self.start, self.end = self.proof.byte_span()

    @property
    def span(self) -> tuple[int, int]:
        """``[start, end)``: the bytes to fetch (``Range: bytes=start-(end-1)``)."""
        return self.start, self.end

    def _check_proof(self, proof: bytes | RangeProof, g0: int, g1: int) -> RangeProof:
        p = proof if isinstance(proof, RangeProof) else pull_range_proof(Buffer(proof), g0 + 1)
        _same_tree(self.head, p.tree_hash, p.group_size, p.content_length, g0 + 1)
        if (p.first_group, p.groups) != (g0, g1 - g0 + 1):
            raise TreeFormatError("proof is for another range", g0 + 1)
        return p

    def _missing_block(self) -> int:
        return self._g0 + len(self._buf) // self.head.group_size + 1

    def _process(self) -> None:
        need = self.end - self.start
        if len(self._buf) < need:
            return
        if len(self._buf) > need:
            raise TreeTrailingData("bytes after the covering groups", self._g0 + self.proof.groups + 1)
        if not hmac.compare_digest(proof_root(self.proof, self._buf), self.head.root):
            raise GroupMismatch("range does not match the signed root", self._g0 + 1)
        data = bytes(self._buf[self.first - self.start : self.last + 1 - self.start])
        self._buf.clear()
        self.released_bytes += len(data)
        self._events += [VerifiedData(self.first, data), RangeVerified(self.first, self.last)]
        self._done()
