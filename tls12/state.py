"""Seam 3: export a connection's complete state and continue it in a fresh object.

SSLACC mirrors every TLS connection to a second accelerator so that the
connection survives a node failure; this module is how the mirror gets it.
:func:`export_connection` captures everything that determines the bytes the
connection will produce or accept next -- negotiated parameters, randoms,
master secret and the keys of both directions, sequence numbers, the
handshake transcript, partially received records and handshake messages,
bytes queued but not yet sent, and the pending handshake step with its
ephemeral secret -- as a versioned JSON document.
:func:`import_connection` loads it into a newly constructed connection of the
same role, which then continues byte-identically: the peer does not notice.

The blob contains key material.  Move it only over channels you would trust
with the private key.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from .buffer import Buffer
from .connection import HandshakeState
from .messages import pull_client_hello, push_client_hello
from .record import DirectionKeys, WriteProtection
from .session import Session
from .suites import SUITES, CipherSuite

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["export_connection", "import_connection", "STATE_FORMAT"]

STATE_FORMAT = "tls12-connection-state/1"

_BYTES = (
    "client_random",
    "server_random",
    "session_id",
    "master_secret",
    "_transcript",
    "_hs_buffer",
    "_output",
)
_SCALARS = (
    "version",
    "cipher_suite",
    "extended_master_secret",
    "secure_renegotiation",
    "server_name",
    "resumed",
    "_close_sent",
    "_close_received",
    "_handshake_done",
)


def _keys_out(keys: DirectionKeys | None) -> dict[str, Any] | None:
    if keys is None:
        return None
    return {
        "suite": int(keys.params.suite),
        "enc_key": keys.enc_key.hex(),
        "mac_key": keys.mac_key.hex(),
        "iv": keys.iv.hex(),
    }


def _keys_in(data: dict[str, Any] | None) -> DirectionKeys | None:
    if data is None:
        return None
    params = SUITES[CipherSuite(data["suite"])]
    return DirectionKeys(params, bytes.fromhex(data["enc_key"]), bytes.fromhex(data["mac_key"]), bytes.fromhex(data["iv"]))


def _session_out(session: Session | None) -> dict[str, Any] | None:
    if session is None:
        return None
    return {
        "session_id": session.session_id.hex(),
        "master_secret": session.master_secret.hex(),
        "cipher_suite": session.cipher_suite,
        "extended_master_secret": session.extended_master_secret,
        "server_name": session.server_name,
    }


def _session_in(data: dict[str, Any] | None) -> Session | None:
    if data is None:
        return None
    return Session(
        bytes.fromhex(data["session_id"]),
        bytes.fromhex(data["master_secret"]),
        data["cipher_suite"],
        data["extended_master_secret"],
        data["server_name"],
    )


def export_connection(conn: Connection) -> bytes:
    doc: dict[str, Any] = {
        "format": STATE_FORMAT,
        "role": "client" if conn.is_client else "server",
        "state": conn.state.value,
        "reader": {
            "keys": _keys_out(conn._reader.keys),
            "seq": conn._reader.seq,
            "version": conn._reader.version,
            "pending": conn._reader.pending.hex(),
        },
        "writer": {"keys": _keys_out(conn._write.keys), "seq": conn._write.seq},
        "pending_read": _keys_out(conn._pending_read),
        "pending_write": _keys_out(conn._pending_write),
        "session": _session_out(conn.session),
    }
    for name in _BYTES:
        doc[name] = bytes(getattr(conn, name)).hex()
    for name in _SCALARS:
        doc[name] = getattr(conn, name)
    if conn.is_client:
        offered = conn._offered  # type: ignore[attr-defined]
        doc["client"] = {
            "offered": push_client_hello(offered).hex() if offered is not None else None,
            "peer_certificates": [c.hex() for c in conn.peer_certificates],  # type: ignore[attr-defined]
            "server_ecdh": [conn._server_ecdh[0], conn._server_ecdh[1].hex()] if conn._server_ecdh else None,  # type: ignore[attr-defined]
            "certificate_requested": conn._certificate_requested,  # type: ignore[attr-defined]
        }
    else:
        doc["server"] = {
            "client_version": conn.client_version,  # type: ignore[attr-defined]
            "group": conn._group,  # type: ignore[attr-defined]
            "ecdhe_private": conn._ecdhe_private.hex(),  # type: ignore[attr-defined]
            "client_schemes": list(conn._client_schemes),  # type: ignore[attr-defined]
        }
    return json.dumps(doc, sort_keys=True).encode()


def import_connection(conn: Connection, blob: bytes) -> None:
    try:
        doc = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not an exported connection state: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise ValueError(f"unsupported state format {doc.get('format') if isinstance(doc, dict) else None!r}")
    role = "client" if conn.is_client else "server"
    if doc["role"] != role:
        raise ValueError(f"state of a {doc['role']} cannot be imported into a {role} connection")
    conn.state = HandshakeState(doc["state"])
    for name in _BYTES:
        value = bytes.fromhex(doc[name])
        setattr(conn, name, bytearray(value) if name in ("_transcript", "_hs_buffer", "_output") else value)
    for name in _SCALARS:
        setattr(conn, name, doc[name])
    reader = doc["reader"]
    conn._reader.set_keys(_keys_in(reader["keys"]), reader["seq"])
    conn._reader.version = reader["version"]
    conn._reader.feed(bytes.fromhex(reader["pending"]))
    conn._write = WriteProtection(_keys_in(doc["writer"]["keys"]), conn._rng, doc["writer"]["seq"])
    conn._pending_read = _keys_in(doc["pending_read"])
    conn._pending_write = _keys_in(doc["pending_write"])
    conn.session = _session_in(doc["session"])
    if conn.is_client:
        c = doc["client"]
        conn._offered = pull_client_hello(Buffer(bytes.fromhex(c["offered"]))) if c["offered"] else None  # type: ignore[attr-defined]
        certs = tuple(bytes.fromhex(h) for h in c["peer_certificates"])
        conn.peer_certificates = certs  # type: ignore[attr-defined]
        if certs:
            key = x509.load_der_x509_certificate(certs[0]).public_key()
            if isinstance(key, rsa.RSAPublicKey):
                conn._server_public_key = key  # type: ignore[attr-defined]
        ecdh = c["server_ecdh"]
        conn._server_ecdh = (ecdh[0], bytes.fromhex(ecdh[1])) if ecdh else None  # type: ignore[attr-defined]
        conn._certificate_requested = c["certificate_requested"]  # type: ignore[attr-defined]
    else:
        s = doc["server"]
        conn.client_version = s["client_version"]  # type: ignore[attr-defined]
        conn._group = s["group"]  # type: ignore[attr-defined]
        conn._ecdhe_private = bytes.fromhex(s["ecdhe_private"])  # type: ignore[attr-defined]
        conn._client_schemes = tuple(s["client_schemes"])  # type: ignore[attr-defined]
