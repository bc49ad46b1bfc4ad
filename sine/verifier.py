"""The streaming verifier: feed bytes, get verified plaintext blocks (sans-IO).

Usage (``Content-Encoding: sine`` body)::

    v = StreamVerifier("/index.html", now=time.time(), public_key=pk)
    for chunk in body_chunks:
        for event in v.receive_data(chunk):
            if isinstance(event, BlockVerified):
                render(event.data)          # only verified bytes ever come out
    v.receive_data(b"")                     # end of stream: TruncatedDocument if blocks are missing

End of stream is ``receive_data(b"")``, as for every sans-IO object of the testbed (``tls12``,
the SSL-splitting splicer; see :mod:`netsim.drive`); :meth:`~StreamVerifier.receive_eof` is the
same call under its older name. The verifier sends nothing: :meth:`~StreamVerifier.data_to_send`
is always ``b""`` (it is there so one driver fits every object).

Separate-tag form: ``StreamVerifier(path, now, public_key=pk, separate=at_bytes)`` verifies
the tag at construction time (block 0) and is then fed the *plain* document; the events of
that verification come out of the first :meth:`~StreamVerifier.receive_data` call.

Trust anchors (block 0), tried in this order:

* ``trusted_digest`` -- SINEB (AT_sign fetched over TLS) or SINEX (AT_sign found in a verified
  Forward Authenticator): ``H(label || identity)`` must match; no public-key operation.  The
  Forward Authenticator of such a page is *not* covered by the digest and is not released.
* ``public_key`` -- SINE: one signature verification; the Forward Authenticator is trusted.

Guarantees: a :class:`BlockVerified` is emitted only after ``H(B_i || h_{i+1}) == h_i`` held
for that block; the first failing block raises a typed :class:`RemoteProtocolError` whose
``block`` is its index, and the verifier is closed.  Events for blocks verified earlier in the
same :meth:`~StreamVerifier.receive_data` call travel on the exception as ``exc.events``.
The verifier changes state only through the transition table of :mod:`sine.state`; a call
out of order (any call after an error) raises :class:`LocalProtocolError`.  Memory is bounded by one record plus the
chunk being fed (plus, in separate mode, the tag's link list, held once more joined).

Speed: every run of whole records a chunk holds before a chain's last record is checked in
one call of :func:`sine.chaincrypto.verify_run` (the C extension, OpenSSL EVP, or its Python
twin with ``SINE_PURE_PYTHON=1``), which returns the verified blocks, the next trusted value
and whether the record after them failed; events, errors and blame are the same as record by
record (``tests/sine/test_verifier_runs.py``).  A record split across chunks, and each
chain's last record (padding, terminator), take the record-by-record path.

Coalesced events: ``StreamVerifier(..., coalesce=True)`` emits one :class:`RunVerified` per
run of blocks verified together (a :func:`~sine.chaincrypto.verify_run_joined` call returns
them as one bytes object; a record taken alone is a run of one) instead of one
:class:`BlockVerified` per block.  The guarantees are the same: a run's event is emitted only
after every block in it verified, a failure names the exact block, and the runs verified
before it travel on the exception; the bytes released are the same, in the same order
(``tests/sine/test_verifier_coalesce.py``).  At 1 KiB blocks the per-block events cost about
as much as the hashing (``benchmarks/bench_sine.py``).
"""

from __future__ import annotations

import hmac
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NoReturn, TypeVar

from tls12.buffer import Buffer

from .algorithms import VerifyingKey, hash_constructor
from .chaincrypto import verify_run, verify_run_joined
from .errors import (
    BadPadding,
    BlockMismatch,
    DigestMismatch,
    LocalProtocolError,
    RemoteProtocolError,
    SignatureInvalid,
    TagExpired,
    TagFormatError,
    TagNotYetValid,
    TrailingData,
    TruncatedDocument,
    UntrustedTag,
    WrongResource,
)
from .format import (
    MAX_SIGNATURE,
    MAX_TAG_INFO,
    ForwardAuthenticator,
    SeparateTag,
    Tag,
    TagInfo,
    pull_forward_authenticator,
    pull_separate_tag,
    pull_tag,
)
from .state import Input, State, transition
from .tag import hash_chain

_T = TypeVar("_T")

__all__ = [
    "Event",
    "TagVerified",
    "BlockVerified",
    "RunVerified",
    "ForwardAuthenticatorVerified",
    "DocumentVerified",
    "State",
    "StreamVerifier",
]


def check_signature(key: VerifyingKey, sig_alg: object, message: bytes, signature: bytes) -> None:
    """Block 0's signature: made with ``key``'s algorithm and valid over ``message``
    (:class:`SignatureInvalid` otherwise). The chain's tag and the tree's head share it."""
    if key.alg != sig_alg:
        raise SignatureInvalid("signature algorithm differs from the key's", 0)
    if not key.verify(message, signature):
        raise SignatureInvalid("bad signature", 0)


def check_signed_head(what: str, path: str, wanted: str, timestamp: int, expires: int,
                      now: float, clock_skew: float) -> None:  # fmt: skip
    """Block 0 names the requested ``path`` and is valid now: ``T - skew <= now < E``
    (:class:`WrongResource`, :class:`TagExpired`, :class:`TagNotYetValid`); ``what`` names
    the signed object in the message ("tag", "tree head")."""
    if path != wanted:
        raise WrongResource(f"{what} is for {path!r}, not {wanted!r}", 0)
    if now >= expires:
        raise TagExpired(f"expired at {expires}, now {now:.0f}", 0)
    if timestamp > now + clock_skew:
        raise TagNotYetValid(f"timestamp {timestamp} is in the future", 0)


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of verifier events."""


@dataclass(frozen=True, slots=True)
class TagVerified(Event):
    """Block 0 is authentic and fresh; ``method`` is ``"signature"`` or ``"digest"``."""

    info: TagInfo
    method: str
    at_sign: bytes


@dataclass(frozen=True, slots=True)
class BlockVerified(Event):
    """Document block ``index`` (1-based) verified; ``data`` has the padding removed."""

    index: int
    data: bytes


_new_event = object.__new__
_set_index = vars(BlockVerified)["index"].__set__  # the slots' member descriptors
_set_data = vars(BlockVerified)["data"].__set__


def _block_events(first: int, blocks: list[bytes]) -> list[BlockVerified]:
    """``[BlockVerified(first, blocks[0]), BlockVerified(first + 1, blocks[1]), ...]``.

    The same objects as the constructor makes (``BlockVerified`` has no ``__post_init__``),
    built by three C-level loops that fill the slots instead of one call of the frozen
    dataclass's ``__init__`` per event, which costs about twice as much (some 0.2 µs, where
    the hash of a 1 KiB record costs some 0.55 µs; ``benchmarks/bench_sine.py``).
    """
    events: list[BlockVerified] = list(map(_new_event, repeat(BlockVerified, len(blocks))))
    deque(map(_set_index, events, range(first, first + len(blocks))), maxlen=0)
    deque(map(_set_data, events, blocks), maxlen=0)
    return events


@dataclass(frozen=True, slots=True)
class RunVerified(Event):
    """Document blocks ``first`` to ``last`` (1-based, inclusive) verified, in order; ``data``
    is their bytes joined, the padding removed (``coalesce=True`` only)."""

    first: int
    last: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ForwardAuthenticatorVerified(Event):
    """SINEX: the page's Forward Authenticator, covered by a verified signature."""

    forward_authenticator: ForwardAuthenticator


@dataclass(frozen=True, slots=True)
class DocumentVerified(Event):
    """Every one of the ``n`` blocks (and the FA) verified; nothing is missing."""

    info: TagInfo


@dataclass(frozen=True, slots=True)
class _Chain:
    """Per-chain constants of the record loop (content chain or Forward-Authenticator chain)."""

    offset: int  # block index of the chain's first block minus one (0 or n)
    count: int  # records in the chain
    block_size: int
    hlen: int
    last_size: int  # bytes of the last record on the wire
    last_data: int  # document bytes in the last block
    tail_pad: bytes  # hashed after the last record's bytes: padding (separate) + terminator
    new: Any  # hashlib constructor
    hash_name: str  # the same hash for :func:`sine.chaincrypto.verify_run` ("sha256", ...)

    @classmethod
    def for_info(cls, info: TagInfo, offset: int, separate: bool) -> _Chain:
        content = offset == 0
        count = info.block_count if content else info.fa_block_count
        length = info.content_length if content else info.fa_length
        bs, hlen = info.block_size, info.digest_size
        last_data = length - (count - 1) * bs if count else 0
        last_size = last_data if separate else bs
        pad = bytes(bs - last_data) if separate else b""
        new = hash_constructor(info.hash_alg)
        return cls(offset, count, bs, hlen, last_size, last_data, pad + bytes(hlen), new,
                   new().name)


class StreamVerifier:
    """Incremental verifier of one SINE document (see the module docstring)."""

    def __init__(
        self,
        path: str,
        now: float,
        *,
        public_key: VerifyingKey | None = None,
        trusted_digest: bytes | None = None,
        separate: bytes | SeparateTag | None = None,
        clock_skew: float = 300.0,
        coalesce: bool = False,
    ) -> None:
        if public_key is None and trusted_digest is None:
            raise LocalProtocolError("need a public key or a trusted digest")
        self.path = path
        self.now = now
        self.public_key = public_key
        self.trusted_digest = trusted_digest
        self.clock_skew = clock_skew
        self.coalesce = coalesce
        self.state = State.TAG
        self.info: TagInfo | None = None
        self.fa_trusted = False
        self.released_bytes = 0
        self.blocks_verified = 0
        self._buf = bytearray()
        self._separate: SeparateTag | None = None
        self._links = b""  # separate form: h_2..h_n concatenated, for verify_run
        self._index = 0  # index (1-based) of the last verified block of the current chain
        self._expected = b""
        self._chain: _Chain | None = None
        self._fa = bytearray()
        self._events: list[Event] = []
        if separate is not None:
            at = separate
            if not isinstance(at, SeparateTag):
                raw = at
                at = self._fail_safe(lambda: pull_separate_tag(Buffer(raw)))
            self._separate = at
            self._links = b"".join(at.links)
            self._fail_safe(lambda: self._accept_tag(at.tag))

    # -- public API ------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Feed received bytes; return the events they completed (possibly none).

        ``b""`` means the body ended: :class:`TruncatedDocument` unless every block arrived.
        """
        if not data:
            return self.receive_eof()
        if self._move(Input.DATA) is State.CLOSED:
            self._fail(TrailingData("bytes after the last block", self._next_block()))
        self._fail_safe(lambda: self._process(data))
        return self._take()

    def receive_eof(self) -> list[Event]:
        """The body ended (same as ``receive_data(b"")``); raises :class:`TruncatedDocument`
        unless every block arrived."""
        if self._move(Input.EOF) is State.CLOSED:
            self._fail(TruncatedDocument("stream ended early", self._next_block()))
        return self._take()

    def data_to_send(self) -> bytes:
        """Always ``b""``: a verifier only receives (the sans-IO shape every driver expects)."""
        return b""

    @property
    def buffered(self) -> int:
        """Bytes held but not yet verified (bounded by one record plus one fed chunk)."""
        return len(self._buf)

    # -- internals -------------------------------------------------------------------------

    def _take(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def _move(self, what: Input) -> State:
        """Take the transition ``what`` of :data:`sine.state.TRANSITIONS`; return the next state.

        A pair the table does not list closes the verifier and raises
        :class:`LocalProtocolError`.  A next state of ``CLOSED`` (trailing bytes, early end) is
        returned without being entered: the caller raises the remote error through
        :meth:`_fail`, which closes.
        """
        try:
            nxt = transition(self.state, what)
        except LocalProtocolError:
            self.state = State.CLOSED
            self._buf.clear()
            raise
        if nxt is not State.CLOSED:
            self.state = nxt
        return nxt

    def _fail(self, exc: RemoteProtocolError) -> NoReturn:
        # Blocks verified earlier in the same call are still authentic: hand them over on
        # the exception (``exc.events``) so a caller can release exactly blocks < exc.block.
        self.state = transition(self.state, Input.FAIL)
        self._buf.clear()
        exc.events.extend(self._take())
        raise exc

    def _fail_safe(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except RemoteProtocolError as exc:
            self._fail(exc)

    def _next_block(self) -> int:
        if self.info is None:
            return 0
        if self.state is State.FORWARD:
            return self.info.block_count + self._index + 1
        if self.state is State.DONE:
            return self.info.block_count + self.info.fa_block_count + 1
        return self._index + 1

    def _accept_tag(self, tag: Tag) -> None:
        info = tag.info
        digest = info.at_sign()
        if self.trusted_digest is not None:
            if not hmac.compare_digest(digest, self.trusted_digest):
                raise DigestMismatch("AT_sign differs from the trusted digest", 0)
            method = "digest"
        elif self.public_key is not None:
            check_signature(self.public_key, info.sig_alg, info.signed_message(), tag.signature)
            method = "signature"
            self.fa_trusted = True
        else:  # pragma: no cover - excluded by the constructor
            raise UntrustedTag("no trust anchor", 0)
        check_signed_head("tag", info.path, self.path, info.timestamp, info.expires, self.now,
                          self.clock_skew)  # fmt: skip
        self.info = info
        if self._separate is not None:
            self._check_separate_fa()
        self._expected = info.content_root
        self._index = 0
        self._chain = _Chain.for_info(info, 0, self._separate is not None)
        self._events.append(TagVerified(info, method, digest))
        self._move(Input.TAG_OK)
        if info.block_count == 0:
            self._enter_forward()

    def _enter_forward(self) -> None:
        assert self.info is not None
        self._move(Input.CONTENT_DONE)
        self._index = 0
        self._expected = self.info.fa_root
        self._chain = _Chain.for_info(self.info, self.info.block_count, False)
        if self.info.fa_block_count == 0 or self._separate is not None:
            self._finish()

    def _finish(self) -> None:
        assert self.info is not None
        if self.info.fa_length and self.fa_trusted:
            fa = pull_forward_authenticator(Buffer(bytes(self._fa)), self.info.block_count + 1)
            self._events.append(ForwardAuthenticatorVerified(fa))
        self._fa.clear()
        self._move(Input.FA_DONE)
        self._events.append(DocumentVerified(self.info))

    def _check_separate_fa(self) -> None:
        assert self.info is not None and self._separate is not None
        fa = self._separate.forward_authenticator
        if fa:
            root = hash_chain(fa, self.info.block_size, self.info.hash_alg)[0]
            if not hmac.compare_digest(root, self.info.fa_root):
                raise BlockMismatch("forward authenticator", self.info.block_count + 1)
            self._fa += fa

    def _process(self, data: bytes | bytearray | memoryview) -> None:
        """Verify whole records straight from ``data``; only a partial record is copied."""
        if self.state is State.TAG:
            self._buf += data
            if not self._parse_stream_tag():
                return
            data = bytes(self._buf)
            self._buf.clear()
        view = memoryview(data)
        pos = 0
        try:
            if self._buf and self.state in (State.CONTENT, State.FORWARD):
                size = self._record_size()
                pos = min(size - len(self._buf), len(view))
                self._buf += view[:pos]
                if len(self._buf) < size:
                    return
                with memoryview(self._buf) as pending:
                    self._one_record(pending, 0)
                self._buf.clear()
            while self.state in (State.CONTENT, State.FORWARD):
                pos = self._run(view, pos)
                after = self._one_record(view, pos)
                if after < 0:
                    break
                pos = after
            if pos < len(view):
                if self.state is State.DONE:
                    raise TrailingData("bytes after the last block", self._next_block())
                self._buf += view[pos:]
        finally:
            view.release()

    def _parse_stream_tag(self) -> bool:
        buf = self._buf
        if len(buf) < 4:
            return False
        (info_len,) = struct.unpack_from("!I", buf, 0)
        if info_len > MAX_TAG_INFO:
            raise TagFormatError("tag info too long", 0)
        if len(buf) < 4 + info_len + 2:
            return False
        (sig_len,) = struct.unpack_from("!H", buf, 4 + info_len)
        if not 0 < sig_len <= MAX_SIGNATURE:
            raise TagFormatError("signature length out of range", 0)
        end = 4 + info_len + 2 + sig_len
        if len(buf) < end:
            return False
        tag = pull_tag(Buffer(bytes(buf[:end])))
        del buf[:end]
        self._accept_tag(tag)
        return True

    def _record_size(self) -> int:
        """Bytes of the next record in the current chain."""
        c = self._chain
        assert c is not None  # called only while a chain is being verified
        index = self._index + 1
        if index == c.count:
            return c.last_size
        return c.block_size if self._separate is not None else c.block_size + c.hlen

    def _run(self, view: memoryview, pos: int) -> int:
        """Verify the whole records at ``pos`` before the chain's last one in one
        :func:`~sine.chaincrypto.verify_run` call (:func:`~sine.chaincrypto.verify_run_joined`
        with ``coalesce``); return the position after them.

        Same checks, events and first failing block as :meth:`_one_record` record by record.
        """
        c = self._chain
        assert c is not None  # called only while a chain is being verified
        todo = c.count - 1 - self._index  # records before the last one
        separate = self._separate is not None
        size = c.block_size if separate else c.block_size + c.hlen
        if todo <= 0 or len(view) - pos < size:
            return pos
        args = (c.hash_name, c.block_size, self._expected)
        with view[pos:] as rest, memoryview(self._links)[self._index * c.hlen :] as links:
            more = (rest, todo, links if separate else None)
            if self.coalesce:
                data, trusted, mismatch = verify_run_joined(*args, *more)
                done = len(data) // c.block_size
            else:
                blocks, trusted, mismatch = verify_run(*args, *more)
                done = len(blocks)
                data = b"".join(blocks) if c.offset else b""
        first = self._index + 1
        self._index += done
        self._expected = trusted
        if c.offset:
            self._fa += data
        else:
            self.blocks_verified += done
            self.released_bytes += done * c.block_size
            if not self.coalesce:
                self._events += _block_events(first, blocks)
            elif done:
                self._events.append(RunVerified(first, self._index, data))
        if mismatch:
            raise BlockMismatch("hash chain broken", c.offset + self._index + 1)
        return pos + done * size

    def _one_record(self, view: memoryview, pos: int) -> int:
        """Verify one record at ``pos``; return the new position or -1 if incomplete."""
        c = self._chain
        assert c is not None  # called only while a chain is being verified
        index = self._index + 1
        last = index == c.count
        separate = self._separate
        if last:
            size = c.last_size
        else:
            size = c.block_size if separate is not None else c.block_size + c.hlen
        if len(view) - pos < size:
            return -1
        data_len = c.last_data if last else c.block_size
        with view[pos : pos + size] as record:
            h = c.new(record)
            if last:
                h.update(c.tail_pad)
            elif separate is not None:
                h.update(separate.links[index - 1])
            if not hmac.compare_digest(h.digest(), self._expected):
                raise BlockMismatch("hash chain broken", c.offset + index)
            padding_ok = separate is not None or not last or not any(record[data_len:])
            data = bytes(record[:data_len])
            if not last:
                self._expected = (bytes(record[c.block_size :]) if separate is None
                                  else separate.links[index - 1])
        if not padding_ok:
            raise BadPadding("non-zero padding", c.offset + index)
        self._index = index
        if c.offset == 0:
            self.blocks_verified += 1
            self.released_bytes += data_len
            self._events.append(RunVerified(index, index, data) if self.coalesce
                                else BlockVerified(index, data))
            if last:
                self._enter_forward()
        else:
            self._fa += data
            if last:
                self._finish()
        return pos + size
