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

The message-level calls underneath (:meth:`~Splicer.feed`, :meth:`~Splicer.next_message`,
:meth:`~Splicer.handle`, :meth:`~Splicer.rebuild`) stay available for callers that drive the
messages themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tls12.errors import DecodeError, IllegalParameter
from tls12.recordcrypto import RecordCipher

from .errors import PayloadMismatch, SplicerMisuse, TruncatedMessage
from .state import SplicerInput, SplicerState, advance
from .wire import (
    IDEncoding,
    KeyExpose,
    Message,
    MessageReader,
    Stub,
    Verbatim,
    check_payload,
    push_message,
)

__all__ = ["Splicer", "SplicerStats", "PayloadMismatch", "TruncatedMessage", "SplicerEvent",
           "PayloadNeeded", "StreamEnded", "SplicerState"]

_CIPHER_BY_KEY_LENGTH = {0: "null", 16: "aes-128-cbc", 32: "aes-256-cbc"}
_MAC_BY_LENGTH = {20: "sha1", 32: "sha256"}


@dataclass(frozen=True, slots=True)
class SplicerEvent:
    """Base class of the events :meth:`Splicer.receive_data` returns."""


@dataclass(frozen=True, slots=True)
class PayloadNeeded(SplicerEvent):
    """A digest stub: look its payload up, then call :meth:`Splicer.supply` (nothing moves on)."""

    stub: Stub


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

    def __init__(self, rng: Callable[[int], bytes]) -> None:
        self._rng = rng
        self._reader = MessageReader()
        self._key: bytes | None = None
        self._ciphers: dict[int, RecordCipher] = {}
        self.stats = SplicerStats()
        self._out = bytearray()
        self._waiting: Stub | None = None
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
        self._state = advance(self._state, SplicerInput.PAYLOAD)  # SplicerMisuse if none pending
        self._waiting = None
        self._out += record
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
        out = bytes(self._out)
        self._out.clear()
        return out

    def _drain(self) -> list[SplicerEvent]:
        if self._state not in (SplicerState.OPEN, SplicerState.CLOSING):
            return []  # waiting for a payload, or every record is out
        while (msg := self.next_message()) is not None:
            record = self.handle(msg)
            if record is None:
                assert isinstance(msg, Stub)
                self._state = advance(self._state, SplicerInput.STUB)
                self._waiting = msg
                return [PayloadNeeded(msg)]
            self._out += record
        if self._state is SplicerState.CLOSING:
            if self.pending:
                raise TruncatedMessage(f"stream ended inside a message ({self.pending} B of it)",
                                       self.pending)
            self._state = advance(self._state, SplicerInput.END)
            return [StreamEnded()]
        return []

    # --- message-level API ------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message waiting for the rest (0 at a message boundary)."""
        return self._reader.buffered

    def next_message(self) -> Message | None:
        """The next whole message from the server, or None; DecodeError/RecordOverflow on garbage."""
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
