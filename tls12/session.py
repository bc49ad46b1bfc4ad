"""Sessions and the pluggable session store used for resumption by session ID (RFC 5246 §7.3).

A full handshake that completes on a server with a ``session_store`` puts a
:class:`Session` in it; a later ClientHello that names its ``session_id`` can
then skip the key exchange (the *abbreviated handshake*).  The store is an
interface so that a cluster can share one (SSLACC keeps the session table on
every accelerator node); :class:`InMemorySessionStore` is a bounded LRU.

The store holds master secrets: treat it as key material -- unless the
sessions come from a delegated server (:mod:`tls12.delegate`), whose sessions
hold only a key handle and an empty ``master_secret``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Session", "SessionStore", "InMemorySessionStore"]


@dataclass(frozen=True)
class Session:
    session_id: bytes
    master_secret: bytes
    cipher_suite: int
    extended_master_secret: bool
    server_name: str | None = None
    handle: object | None = None
    """For a session made through a :class:`tls12.delegate.SessionDelegate`: the key handle
    that names its master secret inside the delegate (``master_secret`` is then ``b""``)."""

    def __repr__(self) -> str:  # never print the master secret
        return (
            f"Session(session_id={self.session_id.hex()}, cipher_suite=0x{self.cipher_suite:04x}, "
            f"extended_master_secret={self.extended_master_secret})"
        )


@runtime_checkable
class SessionStore(Protocol):
    def get(self, session_id: bytes) -> Session | None: ...

    def put(self, session: Session) -> None: ...

    def remove(self, session_id: bytes) -> None: ...


class InMemorySessionStore:
    """A least-recently-used store bounded by ``max_entries``."""

    def __init__(self, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: bytes) -> Session | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def put(self, session: Session) -> None:
        self._sessions[session.session_id] = session
        self._sessions.move_to_end(session.session_id)
        while len(self._sessions) > self.max_entries:
            self._sessions.popitem(last=False)

    def remove(self, session_id: bytes) -> None:
        self._sessions.pop(session_id, None)

    def snapshot(self) -> list[Session]:
        """Every stored session, least recently used first (e.g. to hand the table on)."""
        return list(self._sessions.values())
