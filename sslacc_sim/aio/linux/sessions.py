"""The real cluster's session table: a session made on one node resumes on the node that took over.

"The SSL session cache must be shared across the entire cluster" (SSLACC §4.9). As in the
paper's mirror (§5.2), the buddy derives each entry from the connection updates it already
receives: the update that commits the server's Finished carries the session the handshake
made (:func:`sslacc_sim.sessions.encode_session`, the model's wire form), so the buddy holds
the session *before* the client can learn its ID -- cluster, then commit, for sessions too.
A node that takes over serves new connections with the same store, and hands its whole table
to its own buddy (one ``sessions`` frame, :func:`sessions_frame`) so that a chain
A -> B -> C resumes sessions made on A after both A and B died.

:class:`SharedSessionStore` is a :class:`tls12.session.SessionStore` that many connection
threads of one node may use at once (the LRU of :class:`tls12.session.InMemorySessionStore`
behind a lock). Its entries are master secrets: key material, kept in memory only, sent only
on the cluster links (which carry every connection's keys anyway).
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
from collections.abc import Callable, Iterable

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError
from tls12.session import InMemorySessionStore, Session

from ...sessionwire import encode_session
from .mirror import ACK, MirrorError, read_session, send_frame

__all__ = ["SESSIONS", "SessionGossip", "SharedSessionStore", "read_sessions_frame", "sessions_frame",
           "hand_sessions"]

#: The frame type that hands a whole session table to a node's buddy.
SESSIONS = "sessions"
#: Largest encoded session taken from a frame (an entry is about 200 bytes).
_MAX_ENTRY = 1024


class SharedSessionStore:
    """A bounded LRU session store safe to share between a node's connection threads: a
    :class:`tls12.session.InMemorySessionStore` behind a lock.

    :meth:`put` is how this node's own handshakes store their sessions (``tls12`` calls it), and
    tells :attr:`on_put`, if set (a bucket-layout member passes them on to every other member:
    :class:`SessionGossip`); :meth:`keep` and :meth:`put_all` store the sessions other nodes
    made, and tell no one."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._store = InMemorySessionStore(max_entries)
        self._lock = threading.Lock()
        self.on_put: Callable[[Session], None] | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def get(self, session_id: bytes) -> Session | None:
        with self._lock:
            return self._store.get(session_id)

    def put(self, session: Session) -> None:
        self.keep(session)
        if self.on_put is not None:
            self.on_put(session)

    def keep(self, session: Session) -> None:
        """Store a session another node made (:attr:`on_put` is not told)."""
        if not session.session_id:
            raise ValueError("a session without an ID cannot be resumed")
        with self._lock:
            self._store.put(session)

    def remove(self, session_id: bytes) -> None:
        with self._lock:
            self._store.remove(session_id)

    def put_all(self, sessions: Iterable[Session]) -> int:
        """Store every session (oldest first, so the LRU order follows); returns how many."""
        n = 0
        for session in sessions:
            self.keep(session)
            n += 1
        return n

    def snapshot(self) -> list[Session]:
        """Every stored session, least recently used first."""
        with self._lock:
            return self._store.snapshot()


class SessionGossip:
    """Passes this node's new sessions on to every other node, in the background.

    "The SSL session cache must be shared across the entire cluster" (§4.9): on the bucket
    layout a client's next connection may hash to any member, not only to the mirror that the
    updates already give each session to. :meth:`offer` queues a session (cheap, from the
    handshake's thread); one thread sends what has queued as one ``sessions`` frame to each
    address ``peers()`` names (every other live member's cluster listener, which stores them
    and acknowledges), and counts what it could not deliver. A session that arrives after the
    client's next ClientHello costs only a full handshake, never a connection: sessions are an
    optimisation, so they do not wait for the cluster as the connections' states do."""

    def __init__(self, peers: Callable[[], list[tuple[str, int]]], timeout: float = 2.0) -> None:
        self.peers = peers
        self.timeout = timeout
        self.sent = 0
        self.failed = 0
        self._queue: queue.SimpleQueue[Session] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="session-gossip")

    def start(self) -> SessionGossip:
        self._thread.start()
        return self

    def offer(self, session: Session) -> None:
        """Queue ``session`` for every other node."""
        self._queue.put(session)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            header, blob = sessions_frame(batch)
            for peer in self.peers():
                try:
                    with socket.create_connection(peer, timeout=self.timeout) as link:
                        send_frame(link, header, blob)
                        if link.recv(1) != ACK:
                            raise ConnectionError("no acknowledgement")
                    self.sent += len(batch)
                except OSError:
                    self.failed += len(batch)  # a dead member: its successor has the rest


def sessions_frame(sessions: Iterable[Session]) -> tuple[dict[str, object], bytes]:
    """One ``sessions`` frame (header, blob): each session's wire form behind a 2-byte length."""
    out = Writer()
    count = 0
    for session in sessions:
        data = encode_session(session)
        out.push_uint(len(data), 2)
        out.push_bytes(data)
        count += 1
    return {"type": SESSIONS, "count": count}, out.getvalue()


def read_sessions_frame(header: dict[str, object], blob: bytes) -> list[Session]:
    """Inverse of :func:`sessions_frame`; anything malformed is a :class:`MirrorError`."""
    if header.get("type") != SESSIONS:
        raise MirrorError(f"not a sessions frame: {str(header.get('type'))[:20]!r}")
    count = header.get("count")
    if not isinstance(count, int) or count < 0:
        raise MirrorError("a sessions frame without a valid count")
    buf = Buffer(blob)
    sessions = []
    try:
        for _ in range(count):
            n = buf.pull_uint(2)
            if n > _MAX_ENTRY:
                raise MirrorError(f"a session entry of {n} bytes")
            sessions.append(read_session(buf.pull_bytes(n)))
    except DecodeError:
        raise MirrorError(f"a sessions frame cut short after {len(sessions)} of {count}") from None
    if not buf.eof():
        raise MirrorError("trailing bytes after the sessions")
    return sessions


def hand_sessions(connect: Callable[[], socket.socket], store: SharedSessionStore, to: str
                  ) -> int | None:  # fmt: skip
    """The whole session table on a new link (``connect()``: to a node's new mirror, or the
    next buddy of a chain), acknowledged: how many sessions; ``None`` (said on standard
    error) if the link or the acknowledgement failed -- a session lost costs a full
    handshake, never a connection."""
    try:
        with connect() as link:
            table = store.snapshot()
            send_frame(link, *sessions_frame(table))
            link.settimeout(10.0)
            if link.recv(1) != ACK:
                raise ConnectionError(f"{to} did not acknowledge the sessions")
        return len(table)
    except OSError as exc:
        print(f"ERROR sessions to {to}: {exc!r}", file=sys.stderr, flush=True)
        return None
