"""The proxy's sans-IO core: rebuild TLS records for the client from the server's messages.

For each message from the server (see :mod:`sslsplit.wire`):

* a **verbatim** record is passed on unchanged;
* a **key-expose** message installs the server-write key and IV: from then
  on rebuilt records are encrypted with it (AES-CBC, explicit IV drawn from
  the proxy's own RNG) -- an empty key means a NULL suite;
* a **stub** becomes a record: ``header || seal_with_mac(payload, MAC)``.
  A *literal* stub carries its payload; a *digest* stub names it, and the
  caller looks the payload up (its caches, other proxies, the origin) and
  passes it to :meth:`Splicer.rebuild`, which checks it against the id first.

The proxy holds the encryption key but never the MAC key, so any payload it
changes -- by malice or a poisoned cache -- fails the client's MAC check.

Sans-IO shape (the same as ``tls12``'s, so :mod:`netsim.drive` and the asyncio proxy drive
it alike)::

    events = splicer.receive_data(from_server)   # b"" = the server's stream ended
    for event in events:                         # PayloadNeeded / StreamEnded
        if isinstance(event, PayloadNeeded):     # a digest stub: find its payload ...
            events += splicer.supply(event.stub, lookup(event.stub.ident))   # ... and go on
    to_client = splicer.data_to_send()

Records leave in the order of the server's messages: at a digest stub the splicer stops and
emits :class:`PayloadNeeded`; the messages after it wait until :meth:`Splicer.supply` (or
:meth:`Splicer.resume` with a record built by the caller) gives it the stub's record. End of
stream: ``receive_data(b"")`` returns :class:`StreamEnded` at a message boundary (after the
pending stub, if any, is supplied) and raises :class:`TruncatedMessage` inside a message.
Which call is allowed when is a transition table (:mod:`sslsplit.state`, :attr:`Splicer.state`):
bytes after the end raise :class:`~sslsplit.errors.DataAfterEnd` (a DecodeError), ``supply()``
or ``resume()`` with nothing pending :class:`~sslsplit.errors.SplicerMisuse` (a ValueError).

**Batch mode** (``Splicer(rng, batch=N)``, what the deployed proxy runs): the same stream,
with Python's cost paid per run of messages instead of per record::

    events = splicer.receive_data(from_server)
    for event in events:                         # PayloadsNeeded / StreamEnded
        if isinstance(event, PayloadsNeeded):    # a run's digest stubs: find all payloads ...
            payloads = [lookup(encoding, ident) for encoding, ident in event.keys]
            events += splicer.supply_many(event.keys, payloads)   # ... and go on
    to_client = splicer.data_to_send()           # or data_to_send_view(): no copy

The splicer cuts every whole message buffered in one call (:func:`~sslsplit.wire.cut_messages`,
stubs as plain tuples) and splices runs of at most ``N`` messages: a run with digest stubs
stops at one :class:`PayloadsNeeded` with the ``(encoding, id)`` of each, in order; its records
are built in one loop (:meth:`Splicer.supply_many`) with one ``rng`` call for the run's explicit
IVs, each written straight into one reused output buffer.  The client gets the per-record
path's bytes (``rng`` is drawn as one stream: ``rng(32)`` must give what ``rng(16)`` twice gives,
as ``os.urandom`` and ``random.Random.randbytes`` do) and its errors, typed the same way;
``supply_many`` builds every record of its run or none (the key state is restored).
``data_to_send`` may be called between runs, so records leave while the next run is looked up.

The message-level calls underneath (:meth:`~Splicer.feed`, :meth:`~Splicer.next_message`,
:meth:`~Splicer.handle`, :meth:`~Splicer.rebuild`) stay available for callers that drive the
messages themselves.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from tls12.errors import DecodeError, IllegalParameter
from tls12.recordcrypto import RecordCipher

from .errors import PayloadMismatch, SplicerMisuse, TruncatedMessage
from .state import SplicerInput, SplicerState, advance
from .wire import (
    CutMessage,
    IDEncoding,
    KeyExpose,
    Message,
    MessageReader,
    Stub,
    Verbatim,
    check_payload,
    push_message,
    stub_of,
)

__all__ = ["Splicer", "SplicerStats", "PayloadMismatch", "TruncatedMessage", "SplicerEvent",
           "PayloadNeeded", "PayloadsNeeded", "StreamEnded", "SplicerState"]

_CIPHER_BY_KEY_LENGTH = {0: "null", 16: "aes-128-cbc", 32: "aes-256-cbc"}
_MAC_BY_LENGTH = {20: "sha1", 32: "sha256"}


_HEADER = struct.Struct(">BHH")  # a record header: type, version, length
_LITERAL = IDEncoding.LITERAL


def _exported(buf: bytearray) -> bool:
    """Is a view of ``buf`` alive?  (A bytearray with exports refuses to change its size.)"""
    try:
        buf.append(0)
    except BufferError:
        return True
    del buf[-1]
    return False


class _Output:
    """The client bytes not yet taken, in one buffer that is reused, never shrunk.

    Taking them leaves the memory in place, so a connection's steady state allocates nothing
    big: a fresh 512 KiB buffer per run costs the kernel a page fault per 4 KiB each time malloc
    hands the memory back and takes it again (measured: about a fifth of the proxy's CPU).
    A view handed out (:meth:`take_view`) is never written under: if it is still alive at the
    next write -- a transport that keeps what it has not sent yet, as uvloop's does -- the
    buffer is left to it and a fresh one is used.
    """

    __slots__ = ("buf", "size", "lent")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.size = 0  # bytes of buf in use
        self.lent = False  # a view of buf was handed out since the last write

    def reserve(self, extra: int) -> bytearray:
        """The buffer to write into, with room for ``extra`` more bytes after :attr:`size`."""
        if self.lent:
            self.lent = False
            if _exported(self.buf):
                self._move(max(len(self.buf), self.size + extra))
        need = self.size + extra
        if need > len(self.buf):
            grown = max(need, 2 * len(self.buf))
            try:
                self.buf.extend(bytes(grown - len(self.buf)))
            except BufferError:  # a view taken otherwise (memoryview(splicer...)) is alive
                self._move(grown)
        return self.buf

    def _move(self, capacity: int) -> None:
        fresh = bytearray(capacity)
        fresh[: self.size] = memoryview(self.buf)[: self.size]
        self.buf = fresh

    def add(self, data: bytes) -> None:
        end = self.size + len(data)
        self.reserve(len(data))[self.size : end] = data
        self.size = end

    def take(self) -> bytes:
        out = bytes(memoryview(self.buf)[: self.size])
        self.size = 0
        return out

    def take_view(self) -> memoryview:
        out = memoryview(self.buf)[: self.size].toreadonly()
        self.size = 0
        self.lent = True
        return out


_SavedKeys = tuple[bytes | None, dict[int, RecordCipher]]
"""The key state a run restores when it fails (the key, the ciphers by MAC length)."""

@dataclass(frozen=True, slots=True)
class SplicerEvent:
    """Base class of the events :meth:`Splicer.receive_data` returns."""


@dataclass(frozen=True, slots=True)
class PayloadNeeded(SplicerEvent):
    """A digest stub: look its payload up, then call :meth:`Splicer.supply` (nothing moves on)."""

    stub: Stub


@dataclass(frozen=True, slots=True)
class PayloadsNeeded(SplicerEvent):
    """Batch mode: the ``(encoding, id)`` of each digest stub of the next run of messages, in
    order; look every payload up, then call :meth:`Splicer.supply_many` with these ``keys``
    (nothing moves on before)."""

    keys: tuple[tuple[IDEncoding, bytes], ...]


@dataclass(frozen=True, slots=True)
class StreamEnded(SplicerEvent):
    """The server's stream ended at a message boundary and every record was produced."""


@dataclass
class SplicerStats:
    messages: int = 0
    verbatim: int = 0
    literal: int = 0
    digest: int = 0
    rebuilt_bytes: int = 0


class Splicer:
    """Turns the server's message stream into the record stream a client expects."""

    def __init__(self, rng: Callable[[int], bytes], *, batch: int = 0) -> None:
        """``rng(n)``: n random bytes (explicit IVs).  ``batch``: 0 for one event per digest stub
        (:class:`PayloadNeeded`), N > 0 for runs of at most N messages (:class:`PayloadsNeeded`)."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
            raise ValueError(f"batch must be an integer >= 0, got {batch!r}")
        self._rng = rng
        self._batch = batch
        self._reader = MessageReader()
        self._key: bytes | None = None
        self._ciphers: dict[int, RecordCipher] = {}
        self.stats = SplicerStats()
        self._out = _Output()
        self._waiting: Stub | None = None
        self._parsed: list[CutMessage] = []  # batch mode: messages cut, not yet spliced ...
        self._next = 0  # ... from this index on
        self._held: tuple[list[CutMessage], tuple[tuple[IDEncoding, bytes], ...]] | None = None
        # ^ the run a PayloadsNeeded holds, and its keys
        self._state = SplicerState.OPEN

    # --- sans-IO API ------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[SplicerEvent]:
        """Bytes from the server (``b""``: its stream ended); the events they caused.

        DecodeError / RecordOverflow on garbage, :class:`TruncatedMessage` at an end of
        stream inside a message.
        """
        if data:
            self._state = advance(self._state, SplicerInput.DATA)  # DataAfterEnd once ended
            self._reader.feed(data)
        else:
            self._state = advance(self._state, SplicerInput.EOF)
        return self._drain()

    def supply(self, stub: Stub, payload: bytes, *, checked: bool = False) -> list[SplicerEvent]:
        """The payload for the stub of the last :class:`PayloadNeeded`; splicing goes on."""
        if stub is not self._waiting:
            raise SplicerMisuse("supply() answers the pending PayloadNeeded, for that stub",
                                self._state, SplicerInput.PAYLOAD)
        return self.resume(self.rebuild(stub, payload, checked=checked))

    def resume(self, record: bytes) -> list[SplicerEvent]:
        """Like :meth:`supply`, with the client record already built (e.g. by :meth:`rebuild`)."""
        if self._held is not None:
            raise SplicerMisuse("a PayloadsNeeded is pending: answer it with supply_many()",
                                self._state, SplicerInput.PAYLOAD)
        self._state = advance(self._state, SplicerInput.PAYLOAD)  # SplicerMisuse if none pending
        self._waiting = None
        self._out.add(record)
        return self._drain()

    def supply_many(self, keys: Sequence[tuple[IDEncoding, bytes]], payloads: Sequence[bytes], *,
                    checked: bool = False) -> list[SplicerEvent]:
        """Batch mode: the payloads for the last :class:`PayloadsNeeded`'s ``keys``, in their order;
        the run's records are built and splicing goes on.

        Each payload is checked against its id unless the caller did (``checked=True``):
        :class:`PayloadMismatch` before anything changes.  Local misuse (not the pending keys,
        a wrong count) is a :class:`~sslsplit.errors.SplicerMisuse`; a stub the server should
        not have sent (a MAC of no known length, a MAC before the keys) a DecodeError.  Either
        way no record of the run is out and the batch is still pending.
        """
        held = self._held
        if held is None or keys is not held[1]:
            raise SplicerMisuse("supply_many() answers the pending PayloadsNeeded, with its keys",
                                self._state, SplicerInput.PAYLOAD)
        if len(payloads) != len(keys):
            raise SplicerMisuse(f"{len(payloads)} payloads for {len(keys)} stubs", self._state,
                                SplicerInput.PAYLOAD)
        if not checked:
            for (encoding, ident), payload in zip(keys, payloads, strict=True):
                if not check_payload(encoding, ident, payload):
                    raise PayloadMismatch(f"payload does not match its {encoding.name} id {ident.hex()[:16]}")
        self._splice(held[0], payloads)
        self._state = advance(self._state, SplicerInput.PAYLOAD)
        self._held = None
        return self._drain()

    @property
    def state(self) -> SplicerState:
        """Where the splicer is (:mod:`sslsplit.state` has the transition table)."""
        return self._state

    @property
    def waiting(self) -> Stub | None:
        """The digest stub whose payload the splicer waits for, or None."""
        return self._waiting

    def data_to_send(self) -> bytes:
        """Records for the client produced so far (and not yet taken)."""
        return self._out.take()

    def data_to_send_view(self) -> memoryview:
        """:meth:`data_to_send` without a copy: a read-only view of the splicer's own buffer.

        The splicer never writes into a buffer while a view of it is alive (it moves to a fresh
        one), so the view may be kept as long as needed -- by a transport that sends it later,
        as uvloop's does; asyncio's own copies what the socket does not take at once, so the
        buffer is reused as soon as the caller drops the view."""
        return self._out.take_view()

    def _drain(self) -> list[SplicerEvent]:
        if self._state not in (SplicerState.OPEN, SplicerState.CLOSING):
            return []  # waiting for a payload, or every record is out
        if self._batch:
            events = self._drain_runs()
            if events:
                return events
        else:
            while (msg := self.next_message()) is not None:
                record = self.handle(msg)
                if record is None:
                    assert isinstance(msg, Stub)
                    self._state = advance(self._state, SplicerInput.STUB)
                    self._waiting = msg
                    return [PayloadNeeded(msg)]
                self._out.add(record)
        if self._state is SplicerState.CLOSING:
            if self.pending:
                raise TruncatedMessage(f"stream ended inside a message ({self.pending} B of it)",
                                       self.pending)
            self._state = advance(self._state, SplicerInput.END)
            return [StreamEnded()]
        return []

    # --- batch mode -------------------------------------------------------------------

    def _drain_runs(self) -> list[SplicerEvent]:
        """Splice runs of at most ``batch`` messages until one needs payloads or none is left."""
        while True:
            parsed = self._parsed
            if self._next >= len(parsed):
                parsed = self._parsed = self._reader.cut()  # DecodeError / RecordOverflow
                self._next = 0
                if not parsed:
                    return []
                self.stats.messages += len(parsed)
            start = self._next
            self._next = stop = min(start + self._batch, len(parsed))
            run = parsed[start:stop]
            keys = tuple([m[:2] for m in run if type(m) is tuple and m[0] is not _LITERAL])
            if keys:
                self._state = advance(self._state, SplicerInput.STUB)
                self._held = (run, keys)
                return [PayloadsNeeded(keys)]
            self._splice(run, ())

    def _ivs_for(self, run: list[CutMessage], start: int) -> bytes:
        """One ``rng`` call: explicit IVs for the stubs of ``run[start:]`` up to the next key change."""
        count = 0
        for msg in islice(run, start, None):
            if isinstance(msg, KeyExpose):
                break
            count += isinstance(msg, tuple)
        ivs = self._rng(16 * count)
        if len(ivs) != 16 * count:
            raise ValueError(f"rng({16 * count}) returned {len(ivs)} bytes")
        return ivs

    def _splice(self, run: list[CutMessage], payloads: Sequence[bytes]) -> None:
        """The records of ``run`` (its digest stubs take ``payloads`` in order), or after an error
        none and the key state as it was: :meth:`handle`, :meth:`rebuild` and :meth:`_build` in
        one loop, each record written straight into the reused output buffer."""
        out = self._out
        buf, pos, start = out.reserve(0), out.size, out.size  # (never under a view still alive)
        pack_into = _HEADER.pack_into
        next_payload = iter(payloads).__next__
        saved: _SavedKeys | None = None
        verbatim = literal = digest = rebuilt = at = 0
        ivs, ciphers = b"", self._ciphers
        plaintext = self._key is None  # before ChangeCipherSpec: plaintext records, no MAC
        try:
            for i, msg in enumerate(run):
                if type(msg) is tuple:  # a stub (RawStub)
                    encoding, payload, content_type, version, mac = msg  # a literal's id is its payload
                    if encoding is _LITERAL:
                        literal += 1
                    else:
                        payload = next_payload()
                        digest += 1
                    if plaintext:
                        if mac:
                            raise DecodeError("stub with a MAC before the keys were exposed")
                        body = payload
                    else:
                        cipher = ciphers.get(len(mac)) or self._cipher(len(mac))
                        if len(payload) > 1 << 14:
                            raise DecodeError("payload larger than a TLS record")
                        if cipher.block_size:
                            if at == len(ivs):
                                ivs, at = self._ivs_for(run, i), 0
                            body = cipher.seal_with_mac(payload, mac, ivs[at : at + 16])
                            at += 16
                        else:
                            body = cipher.seal_with_mac(payload, mac, b"")
                    n = len(body)
                    rebuilt += 5 + n
                elif isinstance(msg, Verbatim):
                    verbatim += 1
                    body, content_type, version = msg.fragment, msg.content_type, msg.version
                    n = len(body)
                else:
                    saved = self._expose_in_run(msg, saved)
                    ciphers, plaintext = self._ciphers, self._key is None
                    continue
                end = pos + 5 + n
                if end > len(buf):
                    out.size = pos
                    buf = out.reserve(5 + n)
                pack_into(buf, pos, content_type, version, n)
                buf[pos + 5 : end] = body
                pos = end
        except BaseException:
            out.size = start  # none of the run's records
            if saved is not None:
                self._key, self._ciphers = saved
            raise
        out.size = pos
        self._count_run(verbatim, literal, digest, rebuilt)

    def _expose_in_run(self, msg: CutMessage, saved: _SavedKeys | None) -> _SavedKeys:
        """A key exposure inside a run: the keys as they were before the run's first one are
        kept (returned) so that a failing run can put them back."""
        assert isinstance(msg, KeyExpose)  # the only message left (for mypy)
        if saved is None:
            saved = (self._key, dict(self._ciphers))
        self.expose(msg)
        return saved

    def _count_run(self, verbatim: int, literal: int, digest: int, rebuilt: int) -> None:
        stats = self.stats
        stats.verbatim += verbatim
        stats.literal += literal
        stats.digest += digest
        stats.rebuilt_bytes += rebuilt

    # --- message-level API ------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message waiting for the rest (0 at a message boundary)."""
        return self._reader.buffered

    def next_message(self) -> Message | None:
        """The next whole message from the server, or None; DecodeError/RecordOverflow on garbage."""
        if self._next < len(self._parsed):  # batch mode: messages already cut come first
            self._next += 1
            cut = self._parsed[self._next - 1]
            return stub_of(cut) if isinstance(cut, tuple) else cut
        msg = self._reader.next_message()
        if msg is not None:
            self.stats.messages += 1
        return msg

    def handle(self, msg: Message) -> bytes | None:
        """Bytes for the client from a message that needs no lookup; None for a digest stub."""
        if isinstance(msg, Verbatim):
            self.stats.verbatim += 1
            return push_message(msg)
        if isinstance(msg, KeyExpose):
            self.expose(msg)
            return b""
        if msg.encoding is IDEncoding.LITERAL:
            self.stats.literal += 1
            return self._build(msg, msg.ident)
        return None

    def expose(self, msg: KeyExpose) -> None:
        if len(msg.key) not in _CIPHER_BY_KEY_LENGTH:
            raise IllegalParameter(f"key-expose with a {len(msg.key)}-byte key")
        self._key = msg.key
        self._ciphers.clear()

    def rebuild(self, stub: Stub, payload: bytes, *, checked: bool = False) -> bytes:
        """The client record for a digest stub, given the payload found for its id.

        The payload is checked against the id unless the caller already did
        (``checked=True``: the cache hierarchy checks everything it returns).
        """
        if not checked and not check_payload(stub.encoding, stub.ident, payload):
            raise PayloadMismatch(f"payload does not match its {stub.encoding.name} id {stub.ident.hex()[:16]}")
        self.stats.digest += 1
        return self._build(stub, payload)

    def _cipher(self, mac_length: int) -> RecordCipher:
        cipher = self._ciphers.get(mac_length)
        if cipher is None:
            assert self._key is not None
            if mac_length not in _MAC_BY_LENGTH:
                raise DecodeError(f"stub with a {mac_length}-byte MAC")
            cipher = RecordCipher(_CIPHER_BY_KEY_LENGTH[len(self._key)], _MAC_BY_LENGTH[mac_length], self._key, b"")
            self._ciphers[mac_length] = cipher
        return cipher

    def _build(self, stub: Stub, payload: bytes) -> bytes:
        if self._key is None:  # before ChangeCipherSpec: plaintext records, no MAC
            if stub.mac:
                raise DecodeError("stub with a MAC before the keys were exposed")
            body = payload
        else:
            cipher = self._ciphers.get(len(stub.mac)) or self._cipher(len(stub.mac))
            if len(payload) > 1 << 14:
                raise DecodeError("payload larger than a TLS record")
            body = cipher.seal_with_mac(payload, stub.mac, self._rng(16) if cipher.block_size else b"")
        n = len(body)
        self.stats.rebuilt_bytes += 5 + n
        return bytes((stub.content_type, stub.version >> 8, stub.version & 0xFF, n >> 8, n & 0xFF)) + body
