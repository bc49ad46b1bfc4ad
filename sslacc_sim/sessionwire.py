"""A TLS session's wire form, as the cluster replicates it (:mod:`sslacc_sim.sessions` in
the model, :mod:`sslacc_sim.aio.linux.sessions` on the real cluster).

Its own module, with nothing of the model: a real node imports it without SimPy.
The bytes carry the master secret: the cluster link is private (and, on the paper's
hardware, every message is MACed with the cluster key).
"""

from __future__ import annotations

import json

from tls12.session import Session

__all__ = ["decode_session", "encode_session"]


def encode_session(session: Session) -> bytes:
    """Wire form of a session (no delegate handles: those name keys inside one node)."""
    if session.handle is not None:
        raise ValueError("a delegated session's key handle cannot be replicated")
    return json.dumps({
        "id": session.session_id.hex(), "ms": session.master_secret.hex(),
        "suite": session.cipher_suite, "ems": session.extended_master_secret,
        "sni": session.server_name,
    }, separators=(",", ":")).encode()


def decode_session(data: bytes) -> Session:
    """Inverse of :func:`encode_session`."""
    doc = json.loads(data)
    return Session(bytes.fromhex(doc["id"]), bytes.fromhex(doc["ms"]), doc["suite"],
                   doc["ems"], doc["sni"])
