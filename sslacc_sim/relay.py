"""Cluster-then-commit for a TLS server connection, with takeover by the bucket's mirror.

Scenario: a client opens one TCP connection to the cluster's virtual IP and runs a real
:class:`tls12.ClientConnection` over it; the bucket's owner runs the real
:class:`tls12.ServerConnection` and relays the decrypted request to an :class:`Origin` (the
web server behind the accelerator, outside the failure domain) and the origin's response back.

**The First Law (cluster, then commit).**  After every step of the server object -- the
ClientHello read (the "pre-ServerHello" state of Figure 18), each of ClientKeyExchange,
ChangeCipherSpec and Finished (Figures 19-20), every piece of the response -- the owner
exports the connection (:func:`tls12.state.export_connection`) *before* taking its output,
wraps it with the TCP state into a :class:`Checkpoint`, sends the checkpoint's real bytes to
the bucket's mirror over the :class:`~sslacc_sim.cluster.Lan` and waits for the mirror's
acknowledgement.  Only then does it release the bytes to TCP and raise the ACK it gives the
client (``rcv_appack``) to what the checkpoint covers.  So everything the client has ever
received or had acknowledged is reproducible by the mirror.

**Takeover.**  When the master gives a dead owner's bucket to the mirror, the mirror imports
its last checkpoint into a fresh ``ServerConnection``, installs the clustered TCP state
(:meth:`~sslacc_sim.tcpside.ClusterTcpConnection.take_over`), re-sends the checkpoint's
queued output from where the client's acknowledgements stand and carries on; the client's
TCP retransmits whatever was never acknowledged.  A mirror with no checkpoint accepts the
connection only if the client's ACK carries the cluster's finger (Figure 3); otherwise the
connection is unknown and is reset after the 2MSL silence.

**Mirror failure.**  A commit waits for the mirror's acknowledgement; when the master
replaces a dead mirror the owner sends the pending checkpoint to the new mirror, so a dead
mirror delays connections by the detection time but does not deadlock them.

Where the compact export will slot in (issue 11, section 1): today a checkpoint carries the
whole exported state, including the ciphertext queued for sending, so a response piece
costs its own size in cluster bytes.  With byte-identical re-sealing and the compact
post-handshake form, :meth:`Relay._checkpoint` will send keys once and then only sequence
numbers, record sizes and the origin offset (the record-size pre-write of section 5.6); the
mirror will re-read the origin from ``response_offset`` and re-seal.  Client records are
framed here from their 5-byte headers and fed to the server one whole record at a time, so
ClientKeyExchange, ChangeCipherSpec and Finished get the paper's three separate updates
(Figure 19) even when they share a segment; tls12's per-record consumption can replace
:func:`_split_records` when it lands.  After the server's Finished has reached the client an
``established`` update follows (Figure 20).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
import simpy

from netsim.link import Link
from tls12 import (
    ApplicationData,
    ClientConfig,
    ClientConnection,
    ConnectionClosed,
    HandshakeComplete,
    ServerConfig,
    ServerConnection,
    TLSError,
)
from tls12.state import export_connection, import_connection

from .cluster import BucketChange, Cluster, Node
from .tcpside import (
    ClusterTcpConnection,
    FourTuple,
    Gate,
    RstGuard,
    ack_is_fingered,
    bucket_of,
    fingered_isn,
)

__all__ = ["Checkpoint", "Origin", "Relay", "RelayConn", "TlsClient", "CheckpointHook"]

#: ``hook(conn, checkpoint, phase)`` with phase "prepared", "committed" or "released".
CheckpointHook = Callable[["RelayConn", "Checkpoint", str], None]


@dataclass(frozen=True)
class Checkpoint:
    """One cluster update: the TLS state plus the TCP and origin positions it belongs to.

    Offsets count stream bytes (not sequence numbers): ``rcv_appack`` client bytes committed,
    ``out_start`` where the state's queued output starts in the server -> client stream,
    ``request_offset`` / ``response_offset`` bytes handed to / read from the origin.
    """

    conn_id: int
    number: int
    label: str
    rcv_appack: int
    out_start: int
    request_offset: int
    response_offset: int
    tls_state: bytes

    def encode(self) -> bytes:
        """Wire form: a JSON header line, then the exported TLS state."""
        head = {k: v for k, v in asdict(self).items() if k != "tls_state"}
        return json.dumps(head, sort_keys=True).encode() + b"\n" + self.tls_state

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint:
        """Inverse of :meth:`encode`."""
        head, _, blob = data.partition(b"\n")
        return cls(tls_state=blob, **json.loads(head))


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


#: Checkpoint labels by record type (and handshake message type, in clear before CCS).
_LABELS = {
    b"\x16\x01": "client_hello",
    b"\x16\x10": "client_key_exchange",
    b"\x16": "handshake",
    b"\x14": "change_cipher_spec",
    b"\x17": "data",
    b"\x15": "alert_received",
}


def _split_records(buf: bytearray) -> list[bytes]:
    """Remove and return the complete TLS records at the front of ``buf``."""
    records = []
    while len(buf) >= 5:
        n = 5 + int.from_bytes(buf[3:5], "big")
        if len(buf) < n:
            break
        records.append(bytes(buf[:n]))
        del buf[:n]
    return records


def _committed_in(conn: RelayConn) -> int:
    """Client bytes the cluster end acknowledges now (``rcv_appack`` as a stream offset)."""
    st = conn.tcp.a.seq
    limit = st.rcv_nxt if st.ack_limit is None else min(st.rcv_nxt, st.ack_limit)
    return limit - st.isn - 1


class _NodeDied(Exception):
    """Raised inside a node's process when a hook killed that node."""


@dataclass
class RelayConn:
    """The cluster's view of one client connection."""

    id: int
    four_tuple: FourTuple
    bucket: int
    tcp: ClusterTcpConnection
    handler: int
    inbox: simpy.Store
    rx: bytearray = field(default_factory=bytearray)
    ready: bool = True
    tls: ServerConnection | None = None
    request_offset: int = 0
    response_offset: int = 0
    closed: bool = False
    #: (time, label, bytes, node) of every update this connection sent
    checkpoints: list[tuple[float, str, int, int]] = field(default_factory=list)
    mirrored: dict[int, Checkpoint] = field(default_factory=dict)
    pending: tuple[Checkpoint, bytes, simpy.Event] | None = None
    takeovers: list[tuple[float, int, str]] = field(default_factory=list)


class Relay:
    """The SSL relay service on every node of ``cluster`` (see the module docstring)."""

    def __init__(self, env: simpy.Environment, cluster: Cluster, origin: Origin,
                 server_config: Callable[[int, int], ServerConfig], secret: bytes = b"cluster",
                 seed: int = 0) -> None:
        self.env = env
        self.cluster = cluster
        self.params = cluster.params
        self.origin = origin
        self.server_config = server_config
        self.secret = secret
        self.rng = random.Random(seed)
        self.conns: list[RelayConn] = []
        self.guards = {n.id: RstGuard(env, self.params.msl) for n in cluster.nodes}
        self.hook: CheckpointHook | None = None
        self.resets: list[tuple[float, int]] = []
        cluster.subscribe(self._on_change)

    def checkpoints_frame(self) -> pd.DataFrame:
        """Every cluster update sent: time, connection, label, bytes (the real message size),
        and the node that sent it."""
        rows = [(t, c.id, label, size, node) for c in self.conns
                for t, label, size, node in c.checkpoints]
        return pd.DataFrame(rows, columns=["time", "conn", "label", "bytes", "node"])

    # -- connections ----------------------------------------------------------------------
    def connect(self, four_tuple: FourTuple, to_vip: tuple[Link, ...],
                from_vip: tuple[Link, ...]) -> RelayConn:
        """A client's connection arriving at the VIP; routes exclude the cluster's gates."""
        bucket = bucket_of(four_tuple, self.params.buckets)
        isn_b = fingered_isn(self.secret, four_tuple, self.rng.randrange(2**32))
        isn_a = self.rng.randrange(2**32)
        holder: list[RelayConn] = []

        def is_open() -> bool:
            c = holder[0]
            return c.ready and self.cluster.node(c.handler).alive

        gate_in = Gate(self.env, is_open, f"gate-in-{len(self.conns)}")
        gate_out = Gate(self.env, is_open, f"gate-out-{len(self.conns)}")
        tcp = ClusterTcpConnection(self.env, (*to_vip, gate_in), (gate_out, *from_vip),
                                   name=f"conn{len(self.conns)}", isn=(isn_a, isn_b))
        conn = RelayConn(len(self.conns), four_tuple, bucket, tcp,
                         self.cluster.owner[bucket], simpy.Store(self.env))
        holder.append(conn)
        self.conns.append(conn)
        self.cluster.busy_buckets.add(bucket)
        tcp.a.set_ack_limit(tcp.a.seq.rcv_nxt)
        tcp.a.on_data = lambda chunk: conn.inbox.put((chunk, tcp.stream_in()))
        node = self.cluster.node(conn.handler)
        conn.tls = ServerConnection(self.server_config(node.id, conn.id))
        node.spawn(self._serve(conn, node, None))
        return conn

    def _on_change(self, change: BucketChange) -> None:
        for conn in self.conns:
            if conn.bucket != change.bucket or conn.closed:
                continue
            if change.owner != conn.handler:
                new = self.cluster.node(change.owner)
                if new.alive:
                    self._take_over(conn, new)
            elif conn.pending is not None and change.mirror is not None:
                cp, msg, ack = conn.pending        # the mirror changed under a pending commit
                self._send_update(conn, self.cluster.node(conn.handler), change.mirror, cp,
                                  msg, ack)

    # -- the owner's process ---------------------------------------------------------------
    def _serve(self, conn: RelayConn, node: Node, resume: Checkpoint | None):  # type: ignore[no-untyped-def]
        """The owner's loop: one whole client record at a time, one checkpoint per record.

        Bytes of an incomplete record wait in ``conn.rx`` and are neither fed to TLS nor
        acknowledged, so every checkpoint ends on a record boundary and a takeover restarts
        the client's stream there (issue 11 asks tls12 for per-record consumption; framing
        the records here needs only their 5-byte headers).
        """
        tls = conn.tls
        assert tls is not None
        try:
            if resume is not None:
                yield from self._checkpoint(conn, node, "takeover", resume.rcv_appack,
                                            resume.out_start)
                yield from self._respond(conn, node)
            while True:
                chunk, end = yield conn.inbox.get()
                if not chunk:                        # the client's FIN
                    yield from self._step(conn, node, b"", end)
                    break
                conn.rx += chunk
                records = _split_records(conn.rx)
                at = end - len(conn.rx) - sum(len(r) for r in records)
                for record in records:
                    at += len(record)                # stream offset of this record's end
                    ok = yield from self._step(conn, node, record, at)
                    if not ok:
                        break
                if conn.closed:
                    break
        except (simpy.Interrupt, _NodeDied):
            return

    def _step(self, conn: RelayConn, node: Node, record: bytes, appack: int):  # type: ignore[no-untyped-def]
        """Feed one record (or the end of stream), cluster, commit; False once closed."""
        p = self.params
        tls = conn.tls
        assert tls is not None
        with node.cpu.request() as req:
            yield req
            yield self.env.timeout(p.msg_cpu)
        if len(record) > 5 and record[0] == 0x16 and record[5] == 0x10:
            with node.card.request() as req:        # ClientKeyExchange: one RSA operation
                yield req
                yield self.env.timeout(p.rsa_time)
        label = _LABELS.get(record[:1] + record[5:6], _LABELS.get(record[:1], "eof"))
        try:
            events = tls.receive_data(record)
        except TLSError:
            events, label = [], "alert"
        for ev in events:
            if isinstance(ev, ApplicationData):
                self.origin.deliver(conn.id, conn.request_offset, ev.data)
                conn.request_offset += len(ev.data)
            elif isinstance(ev, HandshakeComplete):
                label = "finished"
        done = yield from self._checkpoint(conn, node, label, appack, conn.tcp.stream_out())
        if label == "finished" and done is not None:
            yield done                               # Figure 20: the server Finished arrived
            yield from self._checkpoint(conn, node, "established", appack,
                                        conn.tcp.stream_out())
        if label in ("alert", "eof"):
            conn.closed = True
            if not conn.tcp.b.seq.fin_sent:
                conn.tcp.b.close()
            return False
        yield from self._respond(conn, node)
        return True

    def _respond(self, conn: RelayConn, node: Node):  # type: ignore[no-untyped-def]
        """Read the origin's response piece by piece, one checkpoint per piece."""
        tls = conn.tls
        assert tls is not None
        total = len(self.origin.response)
        while self.origin.answered(conn.id) and conn.response_offset < total:
            piece = self.origin.read(conn.response_offset, self.params.response_piece)
            tls.send_data(piece)
            conn.response_offset += len(piece)
            if conn.response_offset == total:
                tls.close()
            start = conn.tcp.stream_out()
            done = yield from self._checkpoint(conn, node, "response", _committed_in(conn),
                                               start)
            if done is not None:
                yield done
        if conn.response_offset == total and not conn.tcp.b.seq.fin_sent:
            conn.tcp.b.close()

    # -- cluster, then commit -------------------------------------------------------------
    def _checkpoint(self, conn: RelayConn, node: Node, label: str, appack: int,
                    out_start: int):  # type: ignore[no-untyped-def]
        tls = conn.tls
        assert tls is not None
        cp = Checkpoint(conn.id, len(conn.checkpoints), label, appack, out_start,
                        conn.request_offset, conn.response_offset, export_connection(tls))
        msg = cp.encode()
        conn.checkpoints.append((self.env.now, label, len(msg), node.id))
        self._fire(conn, cp, "prepared", node)
        mirror = self.cluster.mirror[conn.bucket]
        ack = self.env.event()
        with node.cpu.request() as req:
            yield req
            yield self.env.timeout(self.params.msg_cpu)
        if mirror is None:
            ack.succeed()
        else:
            conn.pending = (cp, msg, ack)
            self._send_update(conn, node, mirror, cp, msg, ack)
        if self.params.cluster_then_commit:
            yield ack
            self._fire(conn, cp, "committed", node)
        conn.pending = None
        done = self._release(conn, cp)
        self._fire(conn, cp, "released", node)
        return done

    def _send_update(self, conn: RelayConn, node: Node, mirror_id: int, cp: Checkpoint,
                     msg: bytes, ack: simpy.Event) -> None:
        lan = self.cluster.lan
        mirror = self.cluster.node(mirror_id)

        def at_mirror(data: bytes) -> None:
            conn.mirrored[mirror_id] = Checkpoint.decode(data)
            mirror.spawn(mirror_work())

        def mirror_work():  # type: ignore[no-untyped-def]
            try:
                with mirror.cpu.request() as req:
                    yield req
                    yield self.env.timeout(self.params.interrupt_cpu + self.params.msg_cpu)
                lan.send(mirror, node, 16, acked)
            except simpy.Interrupt:
                return

        def acked(_: Any) -> None:
            if not ack.triggered:
                ack.succeed()

        lan.send(node, mirror, len(msg), at_mirror, msg)

    def _release(self, conn: RelayConn, cp: Checkpoint) -> simpy.Event | None:
        """Commit: put the state's output on the wire, acknowledge what it covers."""
        tls = conn.tls
        assert tls is not None
        out = tls.data_to_send()
        tcp = conn.tcp
        skip = tcp.stream_out() - cp.out_start
        done = tcp.b.send(out[skip:]) if len(out) > skip else None
        tcp.a.set_ack_limit(tcp.a.seq.isn + 1 + cp.rcv_appack)
        return done

    def _fire(self, conn: RelayConn, cp: Checkpoint, phase: str, node: Node) -> None:
        if self.hook is not None:
            self.hook(conn, cp, phase)
        if not node.alive:
            raise _NodeDied

    # -- takeover ---------------------------------------------------------------------------
    def _take_over(self, conn: RelayConn, node: Node) -> None:
        cp = conn.mirrored.get(node.id)
        conn.handler = node.id
        conn.inbox = simpy.Store(self.env)
        conn.rx = bytearray()                    # the dead node's partial record is gone
        guard = self.guards.setdefault(node.id, RstGuard(self.env, self.params.msl))
        guard.took_over(conn.bucket)
        tls = ServerConnection(self.server_config(node.id, conn.id))
        if cp is not None:
            import_connection(tls, cp.tls_state)
            conn.request_offset, conn.response_offset = cp.request_offset, cp.response_offset
            conn.tcp.take_over(cp.rcv_appack, cp.out_start)
            how = f"checkpoint {cp.number} ({cp.label})"
        elif ack_is_fingered(self.secret, conn.four_tuple, conn.tcp.client_ack):
            conn.request_offset = conn.response_offset = 0
            conn.tcp.take_over(0, 0)
            cp = Checkpoint(conn.id, -1, "fingered", 0, 0, 0, 0, b"")
            how = "fingered ACK"
        else:
            conn.takeovers.append((self.env.now, node.id, "unknown connection"))
            conn.ready = True
            node.spawn(self._reset_later(conn, node, guard))
            return
        conn.tls = tls
        conn.ready = True
        conn.takeovers.append((self.env.now, node.id, how))
        node.spawn(self._serve(conn, node, cp))

    def _reset_later(self, conn: RelayConn, node: Node, guard: RstGuard):  # type: ignore[no-untyped-def]
        """An unknown connection: silent for 2MSL after the takeover, then a RST."""
        try:
            while not guard.may_reset(conn.bucket):
                yield self.env.timeout(2 * self.params.msl)
            conn.closed = True
            self.resets.append((self.env.now, conn.id))
            conn.tcp.b.abort()
        except simpy.Interrupt:
            return


class TlsClient:
    """A real :class:`tls12.ClientConnection` on the client end of a connection: one GET.

    ``write_per_record``: each TLS record is its own TCP write (otherwise one write per
    flight).  ``response`` collects the decrypted bytes; ``error`` is the first failure (a TLS error,
    a RST, or no close from the server within ``timeout`` seconds, as a client program's
    timeout would); ``done_at`` the time the server's close arrived.
    """

    def __init__(self, env: simpy.Environment, tcp: ClusterTcpConnection, config: ClientConfig,
                 path: str = "/", timeout: float | None = None,
                 write_per_record: bool = True) -> None:
        self.env = env
        self.tcp = tcp
        self.tls = ClientConnection(config)
        self.write_per_record = write_per_record
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

    def _deadline(self, timeout: float):  # type: ignore[no-untyped-def]
        yield self.env.timeout(timeout)
        if self.done_at is None and self.error is None:
            self.error = "timed out"
            self.tcp.a.abort()

    def _start(self):  # type: ignore[no-untyped-def]
        yield self.tcp.open()
        self._flush()

    def _flush(self) -> None:
        out = bytearray(self.tls.data_to_send())
        if not out or self.tcp.a.seq.reset:
            return
        # one write (so one or more segments of its own) per record, as a client that
        # writes each handshake message separately (the case of the paper's Figure 19);
        # it also keeps go-back-N from resending acknowledged records of a shared segment
        records = _split_records(out) if self.write_per_record else [bytes(out)]
        for record in records + ([bytes(out)] if out and self.write_per_record else []):
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
