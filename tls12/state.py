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
channels you would trust with the private key.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from .connection import HandshakeState
from .context import context_from_json, context_to_json

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["export_connection", "import_connection", "register_state_enum", "STATE_FORMAT"]

STATE_FORMAT = "tls12-connection-state/2"

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


def export_connection(conn: Connection) -> bytes:
    """The connection as a JSON document (see the module docstring for what is in it)."""
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
    return json.dumps(doc, sort_keys=True).encode()


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
