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
received or had acknowledged is reproducible by the mirror.  Each update goes through its
phases (prepared, sent, committed, released) and follows the handshake's order in the tables
of :mod:`sslacc_sim.state`; a step out of order raises
:class:`~sslacc_sim.state.UpdateOrderError`.

**Takeover** (:mod:`sslacc_sim.takeover`).  When the master gives a dead owner's bucket to the mirror, the mirror imports
its last checkpoint into a fresh ``ServerConnection``, installs the clustered TCP state
(:meth:`~sslacc_sim.tcpside.ClusterTcpConnection.take_over`), re-sends the checkpoint's
queued output from where the client's acknowledgements stand and carries on; the client's
TCP retransmits whatever was never acknowledged.  With ``ClusterParams.takeover_resend`` (the
default) the new owner sends the client one ACK as it takes over (section 4.8) and, when its
``takeover`` checkpoint commits, sends its whole unacknowledged queue at once
(:meth:`~sslacc_sim.tcpside.ClusterSendHalf.resend_now`), so the client's next byte comes
the import and one cluster round trip after the takeover; without it the queue waits for
the next expiry of the fixed 1 s TCP retransmission timer.  A mirror with no checkpoint accepts the
connection only if the client's ACK carries the cluster's finger (Figure 3); otherwise the
connection is unknown and is reset after the 2MSL silence.

**Mirror failure.**  A commit waits for the mirror's acknowledgement; when the master
replaces a dead mirror the owner sends the pending checkpoint to the new mirror, so a dead
mirror delays connections by the detection time but does not deadlock them.  A mirror that
is alive but silent for updates is found by the owner instead: after
``ClusterParams.update_timeout`` without an acknowledgement it records a
:class:`~sslacc_sim.updates.MirrorFault` (:meth:`Relay.mirror_faults_frame`) and reports the
mirror to the master (again every ``report_interval`` until the table shows it replaced),
which re-mirrors its buckets; the pending checkpoint goes to the new mirror, and so does an
update the owner was building when the mirror was replaced.  The new mirror also gets the
newest checkpoint of every *idle* connection of the bucket (:mod:`sslacc_sim.handoff`), so
that it can take them over before their next update.  With no other node left the owner
commits unmirrored.  A node that *joins* becomes a busy bucket's mirror only after the owner
has sent it the state (:mod:`sslacc_sim.handoff`).

**Messages and costs.**  Updates travel through :class:`~sslacc_sim.updates.UpdateChannel`
(one message each, or batched with ``ClusterParams.aggregate``); building and parsing one
costs ``ClusterParams.message_cpu(size)``, each message received an interrupt, a takeover
``import_cpu``: all measured on this code (:mod:`sslacc_sim.measure`).

**Records.**  Client bytes are buffered in the server (``receive_data(..., max_records=0)``)
and consumed one whole record at a time (``receive_record()``, which also says what the record
was: the update's label comes from it, :func:`sslacc_sim.state.label_for_record`), so ClientKeyExchange,
ChangeCipherSpec and Finished get the paper's three separate updates (Figure 19) even when
they share a segment, and every checkpoint ends on a record boundary.  After the server's
Finished has reached the client an ``established`` update follows (Figure 20).

**Compact updates** (``ClusterParams.compact_updates``, sections 5.5-5.6).  Until the
handshake ends a checkpoint carries the exported state (~4 KB, mostly the transcript); with
``ClusterParams.delta_updates`` only the first goes whole to a mirror, the next ones as a
delta against the last one sent to it (:mod:`sslacc_sim.delta`, a few hundred bytes to 1 KB).
The ``established`` update carries the keys once (:meth:`tls12.Connection.export_keys`);
from then on an update carries only the 18-byte :class:`tls12.state.Progress` (sequence
numbers and close flags), how many queued records it covers, the plaintext size of each
response record about to be written (the *record-size pre-write*), the origin offset where
their plaintext starts, and the raw bytes of any other queued record (an alert, tens of
bytes).  A new mirror gets the keys again with its first update.  On takeover the mirror
imports the keys, rewinds the write sequence number to the first queued record, re-reads the
origin from ``plain_start`` in the pre-written sizes and re-seals: the records are
byte-identical (tls12 derives CBC IVs from the exported state), so the client can take the
tail of a half-received record from the mirror.  With ``record_size_prewrite`` off the mirror
does not know the sizes and reads the origin in chunks of its own (a quarter piece, as in
Figure 25): a failure mid-record then garbles the client's stream, as section 5.6 says.
Measured by :meth:`Relay.cluster_bytes_frame` (the tests check the ratio): about 37 KB of
cluster messages per 16 KiB response piece with full updates, about 300 bytes compact (most
of it the JSON header line).

**Partial ACKs** (section 5.5).  The owner acknowledges client bytes only at record
boundaries, so a client record larger than the client's window would deadlock (the client
waits for an ACK, the owner for the rest of the record).  With ``ClusterParams.partial_acks``
the owner keeps an exponentially weighted estimate of the packet inter-arrival time; when
part of a record has waited twice that long it sends a ``partial_ack`` update that carries
those bytes themselves (``Checkpoint.partial``: one of the few updates with data), then
acknowledges them.  A mirror taking over buffers them and reads the rest of the record from
the client's retransmission.  Partial ACKs are used after the handshake only (compact mode).

**Sessions.**  Every node's ``ServerConfig`` may use :meth:`Relay.session_store`, a
:class:`~sslacc_sim.sessions.ClusterSessionStore`, so a session resumes on any node.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import asdict

import pandas as pd
import simpy
from simpy.events import ProcessGenerator

from netsim.link import Link
from tls12 import (
    ApplicationData,
    ServerConfig,
    ServerConnection,
    TLSError,
)
from tls12.errors import LocalProtocolError
from tls12.record import MAX_PLAINTEXT
from tls12.state import export_connection

from .checkpoint import Checkpoint
from .cluster import Cluster, Node
from .delta import DeltaError, DeltaReader, DeltaWriter
from .endpoints import Origin, TlsClient
from .handoff import Handoff
from .relayconn import RelayConn
from .sessions import ClusterSessionStore
from .state import (
    IDLE,
    CheckpointLabel,
    UpdatePhase,
    label_for_record,
    next_phase,
    next_progress,
)
from .takeover import Takeover
from .tcpside import (
    ClusterTcpConnection,
    FourTuple,
    Gate,
    RstGuard,
    bucket_of,
    fingered_isn,
)
from .updates import MirrorFault, UpdateChannel

__all__ = ["Checkpoint", "Origin", "Relay", "RelayConn", "TlsClient", "CheckpointHook"]

#: ``hook(conn, checkpoint, phase)`` with phase (:class:`~sslacc_sim.state.UpdatePhase`)
#: "prepared" (state captured, nothing sent), "sent" (update on the LAN, not acknowledged;
#: only with a mirror; with aggregation it may still wait in an open batch), "committed"
#: (mirror acknowledged, output not released) or "released".
CheckpointHook = Callable[["RelayConn", "Checkpoint", UpdatePhase], None]

_L = CheckpointLabel


def _fragments(n: int) -> tuple[int, ...]:
    """Plaintext sizes of the records ``send_data`` makes of ``n`` bytes."""
    return tuple(min(MAX_PLAINTEXT, n - i) for i in range(0, n, MAX_PLAINTEXT)) or (0,)


def _committed_in(conn: RelayConn) -> int:
    """Client bytes the cluster end acknowledges now (``rcv_appack`` as a stream offset)."""
    st = conn.tcp.a.seq
    limit = st.rcv_nxt if st.ack_limit is None else min(st.rcv_nxt, st.ack_limit)
    return limit - st.isn - 1


class _NodeDied(Exception):
    """Raised inside a node's process when a hook killed that node."""


class Relay(Takeover, Handoff):
    """The SSL relay service on every node of ``cluster`` (see the module docstring).

    What happens when a bucket changes hands (takeover, a new mirror) is
    :class:`~sslacc_sim.takeover.Takeover`; what happens when a node joins,
    :class:`~sslacc_sim.handoff.Handoff`."""

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
        self.session_stores: dict[int, ClusterSessionStore] = {}
        #: the owner -> mirror update channel (messages, batching, acknowledgements)
        self.updates = UpdateChannel(env, cluster)
        #: mirrors that did not acknowledge an update in time, as their owners reported them
        self.mirror_faults: list[MirrorFault] = []
        self.frozen: dict[int, tuple[int, simpy.Event]] = {}    #: buckets under a handoff
        #: buckets whose states go to a new mirror that replaced a dead or unfit one (handoff.py)
        self.resending: dict[int, tuple[int, int, simpy.Event]] = {}
        for n in cluster.nodes:
            self.session_store(n.id)
        cluster.subscribe(self._on_change)

    def session_store(self, node_id: int) -> ClusterSessionStore:
        """Node ``node_id``'s copy of the cluster's session table (for its ``ServerConfig``)."""
        store = self.session_stores.get(node_id)
        if store is None:
            store = ClusterSessionStore(self.cluster, node_id, self.session_stores,
                                        replicate=self.params.replicate_sessions)
        return store

    def checkpoints_frame(self) -> pd.DataFrame:
        """Every cluster update sent: time, connection, label, bytes (the real message size),
        and the node that sent it."""
        rows = [(t, c.id, str(label), size, node) for c in self.conns
                for t, label, size, node in c.checkpoints]
        return pd.DataFrame(rows, columns=["time", "conn", "label", "bytes", "node"])

    def cluster_bytes_frame(self) -> pd.DataFrame:
        """Per connection: cluster-update bytes in all, during the handshake, and per 16 KiB
        of response (``response`` updates only), with the number of updates; ``messages``
        and ``wire_bytes``: the update and acknowledgement messages on the LAN (headers
        included), a batch shared evenly by the updates it carries (with
        ``ClusterParams.aggregate`` a connection's share of a message is a fraction)."""
        f = self.checkpoints_frame()
        shares = self.updates.per_connection()
        rows = []
        for conn in self.conns:
            mine = f[f["conn"] == conn.id]
            resp = mine[mine["label"] == _L.RESPONSE]
            hs = mine[mine["label"].isin([_L.CLIENT_HELLO, _L.CLIENT_KEY_EXCHANGE,
                                          _L.CHANGE_CIPHER_SPEC, _L.FINISHED])]
            body = max(1, len(self.origin.response))
            messages, wire = shares.get(conn.id, (0.0, 0.0))
            rows.append((conn.id, len(mine), int(mine["bytes"].sum()), int(hs["bytes"].sum()),
                         float(resp["bytes"].sum()) * 16384 / body, messages, wire))
        return pd.DataFrame(rows, columns=["conn", "updates", "bytes", "handshake_bytes",
                                           "bytes_per_16k_response", "messages", "wire_bytes"])

    def mirror_faults_frame(self) -> pd.DataFrame:
        """Every :class:`~sslacc_sim.updates.MirrorFault` reported: a mirror that did not
        acknowledge an update within ``update_timeout`` (time, conn, label, mirror, owner,
        waited)."""
        return pd.DataFrame([dataclasses.astuple(f) for f in self.mirror_faults],
                            columns=[f.name for f in dataclasses.fields(MirrorFault)])

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
                         self.cluster.owner[bucket], simpy.Store(self.env),
                         iat=self.params.iat_initial)
        holder.append(conn)
        self.conns.append(conn)
        self.cluster.busy_buckets.add(bucket)
        tcp.a.set_ack_limit(tcp.a.seq.rcv_nxt)
        tcp.a.on_data = lambda chunk: conn.inbox.put((chunk, tcp.stream_in()))
        node = self.cluster.node(conn.handler)
        conn.tls = ServerConnection(self.server_config(node.id, conn.id))
        node.spawn(self._serve(conn, node, None))
        return conn

    # -- the owner's process ---------------------------------------------------------------
    def _serve(self, conn: RelayConn, node: Node, resume: Checkpoint | None) -> ProcessGenerator:
        """The owner's loop: one whole client record at a time, one checkpoint per record.

        Client bytes are only buffered in the server (and copied in ``conn.rx``) until
        ``receive_record()`` reads one whole record and reports where it ended and what it
        was (:class:`tls12.connection.ReceivedRecord`); bytes of an incomplete record are not
        acknowledged, so every checkpoint ends on a record boundary and a takeover restarts
        the client's stream there.
        """
        tls = conn.tls
        assert tls is not None
        try:
            if resume is not None:
                with node.cpu.request() as req:      # import the clustered state
                    yield req
                    yield self.env.timeout(self.params.import_cpu)
                done = yield from self._checkpoint(conn, node, _L.TAKEOVER, resume.rcv_appack,
                                                   resume.out_start)
                if done is not None:
                    yield done
                yield from self._respond(conn, node)
            while True:
                chunk, end = yield from self._next_chunk(conn, node)
                if not chunk:                        # the client's FIN
                    yield from self._step(conn, node, end)
                    break
                conn.rx += chunk
                skip = min(conn.skip_in, len(chunk))
                conn.skip_in -= skip
                if len(chunk) > skip:
                    tls.receive_data(chunk[skip:], max_records=0)   # buffer only
                while not conn.closed:
                    ok = yield from self._step(conn, node, None)
                    if not ok:
                        break
                if conn.closed:
                    break
        except (simpy.Interrupt, _NodeDied):
            return

    def _next_chunk(self, conn: RelayConn, node: Node) -> ProcessGenerator:
        """The next (chunk, stream end) from the client, with partial ACKs (section 5.5).

        While part of a record waits in ``conn.rx`` (compact mode, nothing acknowledged of
        it yet beyond what a partial ACK covered) the owner waits at most twice the estimated
        packet inter-arrival time; then it clusters the partial record and acknowledges it,
        so a client whose window is smaller than the record can send the rest.
        """
        p = self.params
        while True:
            get = conn.inbox.get()
            waiting = len(conn.rx) > _committed_in(conn) - conn.consumed
            if not (p.partial_acks and conn.keys is not None and waiting):
                item = yield get
                break
            got = yield get | self.env.timeout(2 * conn.iat)
            if get in got:
                item = got[get]
                break
            get.cancel()
            conn.partial_acks += 1
            done = yield from self._checkpoint(conn, node, _L.PARTIAL_ACK,
                                               conn.consumed + len(conn.rx),
                                               conn.tcp.stream_out())
            if done is not None:
                yield done
        now = self.env.now
        if conn.last_arrival is not None:
            conn.iat += p.iat_gain * ((now - conn.last_arrival) - conn.iat)
        conn.last_arrival = now
        return item

    def _step(self, conn: RelayConn, node: Node, eof_at: int | None) -> ProcessGenerator:
        """Read one buffered record (or the end of stream at ``eof_at``), cluster, commit.

        False when no whole record is buffered or the connection is closed."""
        p = self.params
        tls = conn.tls
        assert tls is not None
        try:
            if eof_at is not None:
                events, label, appack = tls.receive_data(b""), _L.EOF, eof_at
            else:
                got = tls.receive_record()
                if got is None:
                    return False
                events = got.events
                del conn.rx[:got.wire_length]
                conn.consumed += got.wire_length
                label = label_for_record(got)        # what the core says the record was
                appack = conn.consumed
        except TLSError:
            events, label, appack = [], _L.ALERT, conn.consumed
        with node.cpu.request() as req:              # one client record read: the fixed
            yield req                                # part of a message's cost (the TLS
            yield self.env.timeout(p.msg_cpu)        # record work itself is not charged)
        if label is _L.CLIENT_KEY_EXCHANGE:
            with node.card.request() as req:        # ClientKeyExchange: one RSA operation
                yield req
                yield self.env.timeout(p.rsa_time)
        for ev in events:
            if isinstance(ev, ApplicationData):
                self.origin.deliver(conn.id, conn.request_offset, ev.data)
                conn.request_offset += len(ev.data)
        done = yield from self._checkpoint(conn, node, label, appack, conn.tcp.stream_out())
        if label is _L.FINISHED and done is not None:
            yield done                               # Figure 20: the server Finished arrived
            yield from self._checkpoint(conn, node, _L.ESTABLISHED, appack,
                                        conn.tcp.stream_out())
        if label in (_L.ALERT, _L.EOF):
            conn.closed = True
            if not conn.tcp.b.seq.fin_sent:
                conn.tcp.b.close()
            return False
        yield from self._respond(conn, node)
        return True

    def _respond(self, conn: RelayConn, node: Node) -> ProcessGenerator:
        """Read the origin's response piece by piece, one checkpoint per piece."""
        tls = conn.tls
        assert tls is not None
        total = len(self.origin.response)
        while self.origin.answered(conn.id) and conn.response_offset < total:
            piece = self.origin.read(conn.response_offset, self.params.response_piece)
            conn.piece = (conn.response_offset, _fragments(len(piece)))
            tls.send_data(piece)
            conn.response_offset += len(piece)
            if conn.response_offset == total:
                tls.close()
            start = conn.tcp.stream_out()
            done = yield from self._checkpoint(conn, node, _L.RESPONSE, _committed_in(conn),
                                               start)
            if done is not None:
                yield done
        if conn.response_offset == total and not conn.tcp.b.seq.fin_sent:
            conn.tcp.b.close()

    # -- cluster, then commit -------------------------------------------------------------
    def _checkpoint(self, conn: RelayConn, node: Node, label: CheckpointLabel, appack: int,
                    out_start: int) -> ProcessGenerator:
        yield from self._handoff_gate(conn)          # a join's handoff (sslacc_sim.handoff)
        conn.progress = next_progress(conn.progress, label)
        cp, out = self._capture(conn, label, appack, out_start)
        conn.latest = cp
        conn.progress_at[cp.number] = conn.progress
        mirror = self.cluster.mirror[conn.bucket]
        msg, delta = self._message(conn, mirror, cp)
        conn.checkpoints.append((self.env.now, label, len(msg), node.id))
        self._fire(conn, cp, UpdatePhase.PREPARED, node)
        ack = self.env.event()
        p = self.params
        with node.cpu.request() as req:              # build: export, (delta,) encode, MAC
            yield req
            yield self.env.timeout(p.message_cpu(len(msg)) + (p.delta_make_cpu if delta else 0))
        if mirror != self.cluster.mirror[conn.bucket]:   # the mirror was replaced meanwhile:
            mirror = self.cluster.mirror[conn.bucket]    # the update goes to the new one
            msg, delta = self._message(conn, mirror, cp)
        if mirror is None:
            ack.succeed()
        else:
            conn.pending = (cp, out, ack)
            self._send_update(conn, node, mirror, cp, msg, ack,
                              p.delta_apply_cpu if delta else 0.0)
            self._fire(conn, cp, UpdatePhase.SENT, node)
        if self.params.cluster_then_commit:
            yield from self._await_ack(conn, node, cp, ack)
            self._fire(conn, cp, UpdatePhase.COMMITTED, node)
        conn.pending = conn.pending_to = None
        done = self._release(conn, cp, out)
        self._fire(conn, cp, UpdatePhase.RELEASED, node)
        return done

    def _capture(self, conn: RelayConn, label: CheckpointLabel, appack: int,
                 out_start: int) -> tuple[Checkpoint, bytes]:
        """The update for the connection's state now, and the output it covers (taken)."""
        tls = conn.tls
        assert tls is not None
        base = (conn.id, len(conn.checkpoints), label, appack, out_start, conn.request_offset,
                conn.response_offset)
        if self.params.compact_updates and conn.keys is None and label is _L.ESTABLISHED:
            try:
                conn.keys = tls.export_keys()
            except LocalProtocolError:
                pass                                 # not quiet yet: stay with full updates
        if not self.params.compact_updates or conn.keys is None:
            cp = Checkpoint(*base, export_connection(tls), buffered=len(conn.rx))
            conn.piece = None
            return cp, tls.data_to_send()
        records = tls.data_to_send_records()
        plain_start, sizes = conn.piece if conn.piece is not None else (conn.response_offset, ())
        conn.piece = None
        resealed = len(sizes)
        raw_records = len(records) - resealed + sum(n for _, n in conn.carry)
        raw = b"".join(records[resealed:]) + b"".join(r for r, _ in conn.carry)
        conn.carry = []
        partial = bytes(conn.rx[:max(0, appack - conn.consumed)])
        cp = Checkpoint(*base, b"", progress=tls.export_progress().to_bytes(), partial=partial,
                        rewind=resealed, raw_records=raw_records,
                        sizes=sizes if self.params.record_size_prewrite else None,
                        plain_start=plain_start, raw=raw)
        return cp, b"".join(records[:resealed]) + raw

    def _message(self, conn: RelayConn, mirror: int | None,
                 cp: Checkpoint) -> tuple[bytes, bool]:
        """The update's wire form for ``mirror``, and whether it carries a delta: keys ride
        along if the mirror has not had them; a full state goes as a delta against the last
        full state sent to this mirror when there is one (``ClusterParams.delta_updates``)."""
        if cp.compact and mirror is not None and mirror not in conn.keys_at:
            assert conn.keys is not None
            conn.keys_at.add(mirror)
            cp = Checkpoint(**{**asdict(cp), "keys": conn.keys,
                               "sizes": cp.sizes})
        if cp.compact or mirror is None:
            return cp.encode(), False
        if not self.params.delta_updates:
            return cp.encode(), False
        held = conn.sent_full.pop(mirror, None)
        if held is not None:
            try:
                delta = held[1].delta(cp.tls_state)
            except DeltaError:                   # not a document the codec rebuilds: whole
                return cp.encode(), False
            conn.sent_full[mirror] = (cp.number, held[1])
            if len(delta) < len(cp.tls_state):
                return dataclasses.replace(cp, tls_state=delta, base=held[0]).encode(), True
        else:
            conn.sent_full[mirror] = (cp.number, DeltaWriter(cp.tls_state))
        return cp.encode(), False

    def _send_update(self, conn: RelayConn, node: Node, mirror_id: int, cp: Checkpoint,
                     msg: bytes, ack: simpy.Event, extra_cpu: float = 0.0) -> None:
        """Hand the update to the channel; at the mirror it becomes the mirrored state (a
        delta is applied to the full state the mirror holds under its ``base`` number)."""

        def at_mirror(data: bytes) -> None:
            got = Checkpoint.decode(data)
            if got.keys:
                conn.mirror_keys[mirror_id] = got.keys
            if got.delta:
                reader = conn.readers.get(mirror_id)
                if reader is None:               # the owner keeps a mirror's base
                    raise DeltaError(f"mirror {mirror_id} holds no base for a delta of "
                                     f"connection {conn.id}")
                got = dataclasses.replace(got, tls_state=reader.apply(got.tls_state), base=-1)
            elif got.compact:
                conn.readers.pop(mirror_id, None)  # no more full states: no base needed
            else:
                conn.readers[mirror_id] = DeltaReader(got.tls_state)
            conn.mirrored[mirror_id] = got

        conn.pending_to = mirror_id
        self.updates.send(node, mirror_id, conn.id, msg, at_mirror, ack, extra_cpu)

    def _await_ack(self, conn: RelayConn, node: Node, cp: Checkpoint,
                   ack: simpy.Event) -> ProcessGenerator:
        """Wait for the mirror's acknowledgement; every ``update_timeout`` without one, report
        the mirror the update went to (once) to the master, which re-mirrors the bucket."""
        reported: set[int] = set()
        while not ack.triggered:
            since = self.env.now
            yield ack | self.env.timeout(self.params.update_timeout)
            silent = conn.pending_to
            if ack.triggered or silent is None or silent in reported:
                continue
            reported.add(silent)
            self.mirror_faults.append(MirrorFault(self.env.now, conn.id, cp.label, silent,
                                                  node.id, self.env.now - since))
            self.cluster.report_unfit_mirror(silent, node.id)

    def _release(self, conn: RelayConn, cp: Checkpoint, out: bytes) -> simpy.Event | None:
        """Commit: put the state's output on the wire, acknowledge what it covers."""
        tcp = conn.tcp
        skip = tcp.stream_out() - cp.out_start
        done = tcp.b.send(out[skip:]) if len(out) > skip else None
        tcp.a.set_ack_limit(tcp.a.seq.isn + 1 + cp.rcv_appack)
        if cp.label is _L.TAKEOVER and self.params.takeover_resend:
            tcp.b.resend_now()                       # do not wait for the dead node's timer
        return done

    def _fire(self, conn: RelayConn, cp: Checkpoint, phase: UpdatePhase, node: Node) -> None:
        """Enter ``phase`` (in the table's order, else :class:`~sslacc_sim.state.UpdateOrderError`),
        tell the hook, and stop here if the hook killed the node."""
        conn.phases[node.id] = next_phase(conn.phases.get(node.id, IDLE), phase)
        if self.hook is not None:
            self.hook(conn, cp, phase)
        if not node.alive:
            raise _NodeDied
