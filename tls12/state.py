"""Seam 3: export a connection's complete state and continue it in a fresh object.

SSLACC mirrors every TLS connection to a second accelerator so that the
connection survives a node failure; this module is how the mirror gets it.
:func:`export_connection` captures everything that determines the bytes the
connection will produce or accept next, as a versioned JSON document:

* the *machinery* (:meth:`tls12.connection.Connection.export_machinery`):
  keys and sequence numbers of both directions, pending keys, partially
  received records and handshake messages, bytes queued but not yet sent,
  the close flags;
* the *handshake context* (:mod:`tls12.context`): every field of the
  connection's context dataclass, generically -- a protocol variant that
  subclasses the context (Reverse SSL does) is exported with its own fields,
  in any state, without a line here;
* the *state*: the enum member's value and the name of its enum.  Enums are
  looked up in a registry (:func:`register_state_enum`) so that a variant's
  own states (``reverse_ssl.config.ReverseState``) import as well as the
  core's :class:`tls12.connection.HandshakeState`.

:func:`import_connection` loads the document into a newly constructed
connection of the same class, which then continues byte-identically: the
peer does not notice.  The blob contains key material.  Move it only over
channels you would trust with the private key.  A connection whose secrets
live in a delegate (:mod:`tls12.delegate`) has no keys to export: every
export raises :class:`tls12.delegate.DelegatedStateError`.

Compact form for established connections: keys once, then progress deltas
-------------------------------------------------------------------------
Most of a full export of an established connection is the raw handshake
transcript, which nothing needs once both Finished messages are checked.  A
mirror that follows a connection for its whole life therefore takes

* :func:`export_keys` once after the handshake: the same document without
  the transcript, 1.3-1.6 KB for a server against 3.8-4.3 KB for
  :func:`export_connection` depending on the suite (measured by
  ``tests/tls12/test_state_progress.py``; a client's is 2.8-3.1 KB, it keeps
  the server's certificate chain), then
* a :class:`Progress` per checkpoint: read and write sequence numbers and
  the close flags, :data:`PROGRESS_SIZE` (18) bytes on the wire.

The backup imports the keys document with :func:`import_connection` and
applies the latest progress with
:meth:`tls12.connection.Connection.import_progress`.  Because explicit CBC
IVs are a function of the exported keys and the sequence number
(:mod:`tls12.record`), the backup then seals exactly the bytes the original
would have.  Neither form carries bytes received but not yet a whole record:
a mirror withholds their TCP acknowledgement, so the peer sends them again
(SSLACC §5.5).  Queued output must have been taken (``data_to_send()``)
before :func:`export_keys`; a :class:`Progress` says nothing about it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from .context import context_from_json, context_to_json
from .delegate import DelegatedStateError
from .errors import LocalProtocolError
from .handshake_table import HandshakeState
from .keyjson import keys_from_json, keys_to_json
from .record import RecordReader, WriteProtection

__all__ = [
    "StateSeam",
    "export_connection",
    "export_keys",
    "import_connection",
    "register_state_enum",
    "Progress",
    "PROGRESS_SIZE",
    "STATE_FORMAT",
]

STATE_FORMAT = "tls12-connection-state/2"
_PROGRESS = struct.Struct(">BQQB")
_PROGRESS_VERSION = 1
PROGRESS_SIZE = _PROGRESS.size
"""Bytes of an encoded :class:`Progress`: version, two 64-bit sequence numbers, flags."""
_SEQ_MAX = (1 << 64) - 1

_RESERVED = frozenset(
    {"format", "role", "context", "state", "state_enum", "machinery", "reader", "writer"}
)
_STATE_ENUMS: dict[str, type[Enum]] = {}
_ENUM_NAMES: dict[type[Enum], str] = {}

E = TypeVar("E", bound=type[Enum])


def register_state_enum(enum: E, name: str | None = None) -> E:
    """Make the members of ``enum`` importable as connection states (usable as a decorator).

    Documents name the enum ``name``, by default ``module.QualifiedName``; an enum that
    moved keeps the name older documents carry by passing it.
    """
    key = name or f"{enum.__module__}.{enum.__qualname__}"
    _STATE_ENUMS[key] = enum
    _ENUM_NAMES[enum] = key
    return enum


# defined in tls12.handshake_table, public (and exported) as tls12.connection.HandshakeState
register_state_enum(HandshakeState, "tls12.connection.HandshakeState")


@dataclass(frozen=True, slots=True)
class Progress:
    """Where an established connection is: the delta on top of :func:`export_keys`."""

    read_seq: int
    """Sequence number of the next record to open."""
    write_seq: int
    """Sequence number of the next record to seal (a mirror may rewind it to an unacked record)."""
    close_sent: bool = False
    close_received: bool = False
    closed: bool = False

    def __post_init__(self) -> None:
        for name in ("read_seq", "write_seq"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= _SEQ_MAX:
                raise ValueError(f"{name} must be an int in 0..2^64-1")

    def to_bytes(self) -> bytes:
        """The :data:`PROGRESS_SIZE`-byte encoding."""
        flags = self.close_sent | self.close_received << 1 | self.closed << 2
        return _PROGRESS.pack(_PROGRESS_VERSION, self.read_seq, self.write_seq, flags)

    @classmethod
    def from_bytes(cls, blob: bytes) -> Progress:
        """Inverse of :meth:`to_bytes`; ``ValueError`` for anything else."""
        if len(blob) != PROGRESS_SIZE:
            raise ValueError(f"a progress delta is {PROGRESS_SIZE} bytes, not {len(blob)}")
        version, read_seq, write_seq, flags = _PROGRESS.unpack(blob)
        if version != _PROGRESS_VERSION or flags > 0b111:
            raise ValueError(f"unsupported progress delta (version {version}, flags {flags:#x})")
        return cls(read_seq, write_seq, bool(flags & 1), bool(flags & 2), bool(flags & 4))


def export_connection(conn: StateSeam) -> bytes:
    """The connection as a JSON document (see the module docstring for what is in it)."""
    return json.dumps(_document(conn), sort_keys=True).encode()


def export_keys(conn: StateSeam) -> bytes:
    """The compact base of an *established* connection: :func:`export_connection` minus the
    transcript (module docstring).  Import it with :func:`import_connection`.

    :class:`LocalProtocolError` unless the handshake is complete, the
    connection is still established, no handshake message is half received
    and no output is queued (take ``data_to_send()`` first).
    """
    if not conn.handshake_complete or conn.state is not HandshakeState.ESTABLISHED:
        raise LocalProtocolError(f"export_keys needs an established connection, not {conn.state}")
    doc = _document(conn)
    machinery = doc["machinery"]
    if machinery["output"] or machinery["hs_buffer"]:
        raise LocalProtocolError("take data_to_send() (and finish any handshake message) first")
    doc["transcript"] = ""
    doc["reader"]["pending"] = ""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _document(conn: StateSeam) -> dict[str, Any]:
    enum = type(conn.state)
    enum_name = _ENUM_NAMES.get(enum)
    if enum_name is None or _STATE_ENUMS.get(enum_name) is not enum:
        raise TypeError(
            f"state enum {enum.__qualname__} is not registered: call register_state_enum on it"
        )
    machinery = conn.export_machinery()
    doc: dict[str, Any] = {
        "format": STATE_FORMAT,
        "role": "client" if conn.is_client else "server",
        "context": type(conn.context).__qualname__,
        "state": conn.state.value,
        "state_enum": enum_name,
        # reader and writer stay top-level keys: tools read the keys of an ended connection there
        "reader": machinery.pop("reader"),
        "writer": machinery.pop("writer"),
        "machinery": machinery,
    }
    for section, values in context_to_json(conn.context).items():
        if section is None:
            clash = _RESERVED & values.keys()
            if clash:
                raise TypeError(
                    f"context fields {sorted(clash)} clash with the document's own keys"
                )
            doc.update(values)
        else:
            doc[section] = values
    return doc


def import_connection(conn: StateSeam, blob: bytes) -> None:
    """Load ``blob`` (from :func:`export_connection`) into the freshly constructed ``conn``.

    ``ValueError`` if the blob is not an exported state, was exported by a
    connection of the other role or with a different context class, or names
    a state this process does not know.
    """
    try:
        doc = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not an exported connection state: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise ValueError(
            f"unsupported state format {doc.get('format') if isinstance(doc, dict) else None!r}"
        )
    role = "client" if conn.is_client else "server"
    if doc["role"] != role:
        raise ValueError(f"state of a {doc['role']} cannot be imported into a {role} connection")
    context_class = type(conn.context).__qualname__
    if doc["context"] != context_class:
        raise ValueError(
            f"state with a {doc['context']} cannot be imported into a {context_class} connection"
        )
    enum = _STATE_ENUMS.get(doc["state_enum"])
    if enum is None:
        raise ValueError(
            f"unknown state enum {doc['state_enum']}: register it with register_state_enum"
        )
    try:
        state = enum(doc["state"])
    except ValueError:
        raise ValueError(f"{doc['state']!r} is not a state of {doc['state_enum']}") from None
    sections: dict[str | None, dict[str, Any]] = {None: doc}
    sections.update({k: v for k, v in doc.items() if isinstance(v, dict)})
    context_from_json(conn.context, sections)
    conn.import_machinery({**doc["machinery"], "reader": doc["reader"], "writer": doc["writer"]})
    conn.state = state


class StateSeam:
    """Seam 3 on the connection: the methods :class:`tls12.connection.Connection` inherits.

    They read and write the connection's record layer and buffers, so they live beside the
    document format they produce; :class:`~tls12.connection.Connection` supplies the
    attributes (``_reader``, ``_write``, the pending keys and buffers, the close flags).
    """

    is_client: bool = False
    state: Enum
    context: Any
    _rng: Any
    _reader: RecordReader
    _write: WriteProtection
    _pending_read: Any
    _pending_write: Any
    _hs_buffer: bytearray
    _output: bytearray
    _close_sent: bool
    _close_received: bool
    _handshake_done: bool
    _delegate: Any

    @property
    def handshake_complete(self) -> bool:
        """True once both Finished messages were verified (and still after a later close)."""
        return self._handshake_done

    def export_state(self) -> bytes:
        """Serialise the whole connection so another process can continue it (contains keys!).

        :class:`tls12.delegate.DelegatedStateError` for a delegated connection: its keys are in
        the delegate, and a document of handles alone could not be continued elsewhere.
        """
        self._refuse_delegated_export()
        return export_connection(self)

    def export_keys(self) -> bytes:
        """The compact base of an established connection: keys and parameters, no transcript.

        Taken once after the handshake; from then on :meth:`export_progress`
        is all a mirror needs (see :func:`tls12.state.export_keys`).
        :class:`tls12.delegate.DelegatedStateError` for a delegated connection.
        """
        self._refuse_delegated_export()
        return export_keys(self)

    def _refuse_delegated_export(self) -> None:
        if self._delegate is not None:
            raise DelegatedStateError(
                "a delegated connection's keys are held by its delegate; its state cannot be exported"
            )

    def export_progress(self) -> Progress:
        """Sequence numbers and close flags now: the delta on top of :meth:`export_keys`."""
        return Progress(
            self._reader.seq,
            self._write.seq,
            self._close_sent,
            self._close_received,
            self.state is HandshakeState.CLOSED,
        )

    def import_progress(self, progress: Progress | bytes) -> None:
        """Move an imported connection to ``progress`` (a :class:`tls12.state.Progress`).

        The sequence numbers are set as given, backwards included: a mirror
        rewinds the write side to the first record the peer has not
        acknowledged and re-seals it (byte-identically, :mod:`tls12.record`).
        """
        if isinstance(progress, bytes):
            progress = Progress.from_bytes(progress)
        if not self._handshake_done:
            raise LocalProtocolError("progress applies to a connection past its handshake")
        self._reader.seq = progress.read_seq
        self._write.seq = progress.write_seq
        self._close_sent = progress.close_sent
        self._close_received = progress.close_received
        if progress.closed:
            self.state = HandshakeState.CLOSED

    def export_machinery(self) -> dict[str, Any]:
        """The record layer and buffers as JSON-ready values (for :mod:`tls12.state`).

        Everything that is not handshake context: the read and write epochs
        with their sequence numbers, the pending keys between key derivation
        and ChangeCipherSpec, bytes received but not yet a whole record or
        message, bytes queued for sending, and the close flags.
        :class:`tls12.delegate.DelegatedStateError` for a delegated connection.
        """
        self._refuse_delegated_export()
        return {
            "reader": {
                "keys": keys_to_json(self._reader.keys),
                "seq": self._reader.seq,
                "version": self._reader.version,
                "pending": self._reader.pending.hex(),
            },
            "writer": {"keys": keys_to_json(self._write.keys), "seq": self._write.seq},
            "pending_read": keys_to_json(self._pending_read),
            "pending_write": keys_to_json(self._pending_write),
            "hs_buffer": bytes(self._hs_buffer).hex(),
            "output": bytes(self._output).hex(),
            "close_sent": self._close_sent,
            "close_received": self._close_received,
            "handshake_done": self._handshake_done,
        }

    def import_machinery(self, doc: dict[str, Any]) -> None:
        """Inverse of :meth:`export_machinery`, into a freshly constructed connection."""
        reader = doc["reader"]
        self._reader = RecordReader()
        self._reader.set_keys(keys_from_json(reader["keys"]), reader["seq"])
        self._reader.version = reader["version"]
        self._reader.feed(bytes.fromhex(reader["pending"]))
        self._write = WriteProtection(keys_from_json(doc["writer"]["keys"]), self._rng, doc["writer"]["seq"])
        self._pending_read = keys_from_json(doc["pending_read"])
        self._pending_write = keys_from_json(doc["pending_write"])
        self._hs_buffer = bytearray.fromhex(doc["hs_buffer"])
        self._output = bytearray.fromhex(doc["output"])
        self._close_sent = bool(doc["close_sent"])
        self._close_received = bool(doc["close_received"])
        self._handshake_done = bool(doc["handshake_done"])

