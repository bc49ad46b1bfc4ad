"""What the HTTPS file server counts: one :class:`ConnectionRecord` per finished connection.

:class:`ServerStats` is wired to :func:`tls12.aio.serve` as its ``on_open`` / ``on_close``
callbacks by :func:`testbed.apps.server.start_server`; the request handler
(:class:`testbed.apps.file_handler.HTTPFileHandler`) adds to ``requests``.  The byte counts are
raw socket bytes -- TLS records, handshake included -- as the experiments need them.  Only the
server's event loop updates the counters; a test reads them after
:meth:`testbed.apps.harness.BackgroundServer.wait_idle`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tls12.aio import TLSStream

__all__ = ["ConnectionRecord", "ServerStats", "peer_label"]


@dataclass(frozen=True)
class ConnectionRecord:
    """What one finished connection cost on the wire."""

    peer: str
    bytes_in: int
    """Raw bytes read from the socket (TLS records of the client)."""
    bytes_out: int
    """Raw bytes written to the socket (TLS records of the server)."""
    requests: int
    cipher_suite: int | None
    resumed: bool
    error: str | None
    """Class name of the error that ended the connection, if any."""
    alerts_received: tuple[int, ...] = ()
    """Descriptions of the alerts the client sent (close_notify is not counted)."""
    server_name: str | None = None
    """The SNI host name the client asked for."""


@dataclass
class ServerStats:
    """Counters of a running server (updated by the server's event loop only)."""

    requests: int = 0
    opened: int = 0
    """Connections accepted so far (``opened - len(finished)`` are still open)."""
    bytes_in: int = 0
    bytes_out: int = 0
    connections: deque[ConnectionRecord] = field(default_factory=lambda: deque(maxlen=10000))
    """The most recent finished connections, oldest first (bounded)."""

    closed: int = 0
    """Connections finished so far."""
    _handshaken: int = 0
    _live: set[TLSStream] = field(default_factory=set, repr=False)
    """The connections accepted and not yet finished (their handshakes are counted live)."""

    @property
    def handshakes(self) -> int:
        """Connections whose handshake completed, finished or still open.

        Per-handshake figures divide by this, not by ``opened``: a readiness probe that connects
        and closes, or a client gone during its handshake, is accepted yet never handshakes.
        """
        return self._handshaken + sum(s.handshake is not None for s in tuple(self._live))

    @property
    def active(self) -> int:
        """Connections accepted and not yet finished."""
        return self.opened - self.closed

    def open(self, stream: TLSStream) -> None:
        """Count an accepted connection (the ``on_open`` callback of :func:`tls12.aio.serve`)."""
        self.opened += 1
        self._live.add(stream)

    def record(self, stream: TLSStream) -> None:
        """Add a finished connection (the ``on_close`` callback of :func:`tls12.aio.serve`)."""
        self.bytes_in += stream.bytes_in
        self.bytes_out += stream.bytes_out
        hs = stream.handshake
        self.connections.append(
            ConnectionRecord(
                peer=peer_label(stream),
                bytes_in=stream.bytes_in,
                bytes_out=stream.bytes_out,
                requests=int(stream.app_data.get("requests", 0)),
                cipher_suite=None if hs is None else int(hs.cipher_suite),
                resumed=False if hs is None else hs.resumed,
                error=None if stream.error is None else type(stream.error).__name__,
                alerts_received=tuple(int(a.description) for a in stream.alerts),
                server_name=None if hs is None else hs.server_name,
            )
        )
        self.closed += 1
        self._handshaken += hs is not None
        self._live.discard(stream)


def peer_label(stream: TLSStream) -> str:
    """``host:port`` of the client of ``stream`` (for log lines and records)."""
    peer = stream.peername
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
