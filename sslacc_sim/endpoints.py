"""The two ends outside the cluster: the origin web server and the test client.

:class:`Origin` is the web server behind the accelerator (outside the failure domain): it
takes client bytes by stream offset, so a retransmission after a takeover is never a second
request, and records every request it saw.  :class:`TlsClient` is an unmodified
:class:`tls12.ClientConnection` on the client end of a
:class:`~sslacc_sim.tcpside.ClusterTcpConnection`: it fetches one URL and reports what it
received, when, and the first failure it saw.
"""

from __future__ import annotations

import simpy
from simpy.events import ProcessGenerator

from tls12 import (
    ApplicationData,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    HandshakeComplete,
    TLSError,
)

from .tcpside import ClusterTcpConnection

__all__ = ["Origin", "TlsClient"]


class Origin:
    """The web server behind the cluster: one HTTP/1.0 response per connection.

    Client bytes arrive with their stream offset, as over TCP: bytes already received are
    dropped, so a retransmission after a takeover is not a second request.  ``requests``
    lists every request the application saw (the test checks "exactly once").
    """

    def __init__(self, body: bytes) -> None:
        self.response = (b"HTTP/1.0 200 OK\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\n\r\n" + body)
        self.requests: list[tuple[int, bytes]] = []
        self._received: dict[int, bytearray] = {}

    def deliver(self, conn_id: int, offset: int, data: bytes) -> None:
        """Bytes ``data`` of connection ``conn_id`` starting at stream ``offset``."""
        buf = self._received.setdefault(conn_id, bytearray())
        if offset > len(buf):
            raise ValueError(f"gap in connection {conn_id}: {offset} > {len(buf)}")
        was_complete = b"\r\n\r\n" in buf
        buf += data[len(buf) - offset:]
        if not was_complete and b"\r\n\r\n" in buf:
            self.requests.append((conn_id, bytes(buf)))

    def answered(self, conn_id: int) -> bool:
        """Whether the request of ``conn_id`` is complete (the response can be read)."""
        return b"\r\n\r\n" in self._received.get(conn_id, b"")

    def read(self, offset: int, n: int) -> bytes:
        """Response bytes ``[offset, offset + n)``."""
        return self.response[offset:offset + n]


class TlsClient:
    """A real :class:`tls12.ClientConnection` on the client end of a connection: one GET.

    ``write_per_record``: each TLS record is its own TCP write (otherwise one write per
    flight).  ``body``: send a POST with this body instead of a GET (one request, so a body
    up to 16 KiB minus the header is one record).  ``response`` collects the decrypted bytes; ``error`` is the first failure (a TLS error,
    a RST, or no close from the server within ``timeout`` seconds, as a client program's
    timeout would); ``done_at`` the time the server's close arrived.
    """

    def __init__(self, env: simpy.Environment, tcp: ClusterTcpConnection, config: ClientConfig,
                 path: str = "/", timeout: float | None = None,
                 write_per_record: bool = True, body: bytes = b"") -> None:
        self.env = env
        self.tcp = tcp
        self.tls = ClientConnection(config)
        self.write_per_record = write_per_record
        if body:
            head = f"POST {path} HTTP/1.0\r\nHost: cluster\r\nContent-Length: {len(body)}"
            self.request = head.encode() + b"\r\n\r\n" + body
        else:
            self.request = f"GET {path} HTTP/1.0\r\nHost: cluster\r\n\r\n".encode()
        self.response = bytearray()
        self.error: str | None = None
        self.handshake_at: float | None = None
        self.done_at: float | None = None
        tcp.b.on_data = self._on_data
        tcp.b.on_reset = self._on_reset
        env.process(self._start())
        if timeout is not None:
            env.process(self._deadline(timeout))

    def _deadline(self, timeout: float) -> ProcessGenerator:
        yield self.env.timeout(timeout)
        if self.done_at is None and self.error is None:
            self.error = "timed out"
            self.tcp.a.abort()

    def _start(self) -> ProcessGenerator:
        yield self.tcp.open()
        self._flush()

    def _flush(self) -> None:
        # one write (so one or more segments of its own) per record, as a client that
        # writes each handshake message separately (the case of the paper's Figure 19);
        # it also keeps go-back-N from resending acknowledged records of a shared segment
        if self.write_per_record:
            writes = self.tls.data_to_send_records()
        else:
            out = self.tls.data_to_send()
            writes = [out] if out else []
        if self.tcp.a.seq.reset:
            return
        for record in writes:
            self.tcp.a.send(record)

    def _on_reset(self) -> None:
        self.error = self.error or "connection reset"

    def _on_data(self, chunk: bytes) -> None:
        if self.error is not None:
            return
        try:
            events = self.tls.receive_data(chunk)
        except TLSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self._flush()
            return
        for ev in events:
            if isinstance(ev, HandshakeComplete):
                self.handshake_at = self.env.now
                self.tls.send_data(self.request)
            elif isinstance(ev, ApplicationData):
                self.response += ev.data
            elif isinstance(ev, ConnectionClosed):
                self.done_at = self.env.now
        self._flush()
        if self.done_at is not None and not self.tcp.a.seq.fin_sent:
            self.tcp.a.close()
