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
------------------------------------------------------------------------
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
from typing import TYPE_CHECKING, Any, TypeVar

from .connection import HandshakeState
from .context import context_from_json, context_to_json
from .errors import LocalProtocolError

if TYPE_CHECKING:
    from .connection import Connection

__all__ = [
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

E = TypeVar("E", bound=type[Enum])


def _enum_key(enum: type[Enum]) -> str:
    return f"{enum.__module__}.{enum.__qualname__}"


def register_state_enum(enum: E) -> E:
    """Make the members of ``enum`` importable as connection states (usable as a decorator)."""
    _STATE_ENUMS[_enum_key(enum)] = enum
    return enum


register_state_enum(HandshakeState)


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


def export_connection(conn: Connection) -> bytes:
    """The connection as a JSON document (see the module docstring for what is in it)."""
    return json.dumps(_document(conn), sort_keys=True).encode()


def export_keys(conn: Connection) -> bytes:
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


def _document(conn: Connection) -> dict[str, Any]:
    enum = type(conn.state)
    if _STATE_ENUMS.get(_enum_key(enum)) is not enum:
        raise TypeError(
            f"state enum {enum.__qualname__} is not registered: call register_state_enum on it"
        )
    machinery = conn.export_machinery()
    doc: dict[str, Any] = {
        "format": STATE_FORMAT,
        "role": "client" if conn.is_client else "server",
        "context": type(conn.context).__qualname__,
        "state": conn.state.value,
        "state_enum": _enum_key(enum),
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


def import_connection(conn: Connection, blob: bytes) -> None:
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
