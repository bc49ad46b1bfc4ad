"""The buddy: mirrors every connection of the owner, declares it dead, takes everything over.

``python -m sslacc_sim.aio.linux.node backup`` runs :class:`Backup`. It accepts the owner's
cluster links (:mod:`~sslacc_sim.aio.linux.primary`): one for keepalives, one per connection.
It keeps each connection's :class:`~sslacc_sim.aio.linux.mirror.MirrorState` and, from the
flooding bridge, what every client sent (:mod:`~sslacc_sim.aio.linux.sniff`).

**Any error on a cluster link is a death**: end of file without ``done``, a reset, a frame cut
short or malformed, and no keepalive for :data:`~sslacc_sim.aio.linux.primary.DEAD_AFTER_S`
(a hung node). Then, in this order (:meth:`Backup.take_over`):

1. *fence* the old owner: its switch port goes down (one ioctl, armed at start:
   :mod:`~sslacc_sim.aio.linux.claim`), so that nothing it sends after it wakes (a
   retransmission, a reset) reaches a client;
2. copy what the LAN record holds (the sniffer keeps listening);
3. *restore* every connection in repair mode: mirrored ones at the mirrored state, with the
   client bytes the owner had not consumed back in the receive queue; ones the owner's kernel
   had established but its server had not mirrored yet, from the SYN exchange heard;
4. only then *claim* the virtual IP (held on standby from the start, so new SYNs find a
   listener) and announce it with gratuitous ARP;
5. stop the sniffer and put the client bytes heard since step 2 into the receive queues (a
   segment that crossed the takeover would otherwise wait for the client's own timer);
6. leave repair mode (each socket sends a window probe) and replay into this node's own
   stack the SYNs the owner never answered (:func:`~sslacc_sim.aio.linux.takeover.replay_syns`:
   its listener answers them at once, where the clients would wait 1 s for their SYN timer);
7. read every client's answer to the probes in one loop
   (:func:`~sslacc_sim.aio.linux.takeover.resume_all`), no reset leaving for a connection
   meanwhile (:class:`~sslacc_sim.aio.linux.claim.ResetHold`); serve each on in its own thread.

Negative controls (flags of the program, for the campaign's tests): ``--only-eof-is-death``
(a reset on a link crashes the buddy, as before), ``--no-fence``, ``--no-sniff-data`` (client
bytes the owner had not consumed are forgotten), ``--no-sniff-unaccepted`` (connections
the owner had not mirrored are not restored) and ``--no-syn-replay``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from tls12 import ServerConfig, ServerConnection

from . import repair
from .buckets import LibNft
from .claim import PortFence, ResetHold, StandbyAddress
from .docroot import Docroot
from .mirror import (
    ACK,
    DEAD,
    JOIN_FRAMES,
    MOVED,
    RELEASE,
    MirrorError,
    MirrorState,
    read_dead_frame,
    recv_frame,
    send_frame,
)
from .primary import DEAD_AFTER_S, Primary
from .report import say
from .service import ALONE_WAIT_S, LeaseExpired, Service, write_leased
from .sessions import SESSIONS, SharedSessionStore, hand_sessions, read_sessions_frame
from .sniff import Flow, FlowTracker, Sniffer, packet_socket
from .takeover import Restored, replay_syns, restore_flow, resume_all, send_now, serve_quietly, tail
from .threads import normal_thread, realtime_thread, spawn

__all__ = ["Controls", "Backup"]


@dataclass(frozen=True)
class Controls:
    """Mechanisms a negative control turns off (all on by default)."""

    any_error_is_death: bool = True
    keepalive: bool = True
    fence: bool = True
    sniff_data: bool = True
    sniff_unaccepted: bool = True
    share_sessions: bool = True
    """Keep the sessions the updates carry (off: a resumption after a takeover is a full one)."""
    replay_syns: bool = True
    """Replay the SYNs nobody answered into this node's listener after the claim (off: such
    clients wait for their own SYN timer, 1 s)."""


@dataclass
class Backup:
    """The buddy program (module docstring)."""

    vip: str
    port: int
    listen_on: tuple[str, int]
    dev: str
    docroot: Docroot
    config: ServerConfig | None
    fence_port: tuple[str, str] | None = None
    """The switch's namespace and the owner's port there, taken down by the fence."""
    controls: Controls = Controls()
    resume_at_ack: bool = True
    next_buddy: tuple[str, int] | None = None
    """This node's own buddy once it owns the address (a chain: A -> B -> C). ``None``: after a
    takeover it serves alone."""
    chain: Primary | None = None
    states: dict[tuple[str, int], MirrorState] = field(default_factory=dict)
    tracker: FlowTracker | None = None
    death: threading.Event = field(default_factory=threading.Event)
    reason: str = ""
    beaten: threading.Event = field(default_factory=threading.Event)
    """Set when the owner's keepalive link arrives: until then its death is seen by no link."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _fence: PortFence | None = None  # armed by run() (claim module)
    _standby: StandbyAddress | None = None
    _hold: ResetHold | None = None  # the chain layout's (the bucket layout's filter holds them all)
    _adopted: dict[tuple[str, int], socket.socket] | None = None
    """The links of the connections handed to this node's mirror during the takeover."""
    claim: Callable[[], None] | None = None
    """How this node starts receiving the dead owner's connections; ``None``: claim the
    virtual IP (the chain layout). A bucket-layout member adds the dead member's buckets to its
    filter instead (:mod:`~sslacc_sim.aio.linux.member`)."""
    stall: float = 0.0
    """Seconds to wait before each read of a connection taken over (a loaded node)."""
    on_dead: Callable[[int], None] | None = None
    """Called with the member a ``dead`` frame names: another member judged it dead (the
    bucket layout's notice, :meth:`Member._told_dead
    <sslacc_sim.aio.linux.member.Member._told_dead>`)."""
    on_mirrored: Callable[[tuple[str, int]], None] | None = None
    """Called with each connection's client as its first frame arrives (before an ``adopt``
    is acknowledged): how a bucket-layout member learns that a neighbour took a connection
    over from a member it does not know dead yet."""
    on_join: Callable[[dict[str, Any], socket.socket], tuple[dict[str, Any], bytes]] | None = None
    """The answer to a join's frame from a member, asked on a link (:mod:`~sslacc_sim.aio.linux.join`)."""
    on_release: Callable[[], None] | None = None
    """Called, and no death, when the owner mirrors elsewhere now (``release``: a join)."""
    _server: socket.socket | None = None
    _fenced: tuple[float, float, str | None] | None = None  # began, ended, error (fence())

    # -- mirroring --

    def die(self, reason: str) -> None:
        """The owner is dead (the first reason is kept)."""
        with self._lock:
            if not self.death.is_set():
                self.reason = reason
                self.death.set()

    def _link(self, link: socket.socket) -> None:
        try:
            self._read_link(link)
        except (OSError, MirrorError) as exc:
            if isinstance(exc, TimeoutError):
                exc = TimeoutError(f"no keepalive for {DEAD_AFTER_S} s")
            if not self.controls.any_error_is_death:
                # the negative control: the old rule, under which only a clean end of file
                # meant death and anything else ended the buddy itself
                traceback.print_exc()
                os._exit(1)
            self.die(f"cluster link: {exc!r}")
        finally:
            link.close()

    def _read_link(self, link: socket.socket) -> None:
        first = recv_frame(link)
        if first is None:
            return  # a link that never carried anything
        if first[0]["type"] == "control":
            self._control(link)
            return
        if first[0]["type"] in (SESSIONS, DEAD) or first[0]["type"] in JOIN_FRAMES:
            self._peer_frame(link, *first)
            return
        state = MirrorState()
        state.apply(*first)
        # a JSON list after apply() (the field says tuple): tuple() makes it a hashable key
        key = (cast("tuple[str, int]", tuple(state.tcp.remote)) if state.tcp is not None
               else None)
        if key is None:
            raise MirrorError("a connection link must start with its tcp frame")
        self._keep_session(state)
        if self.tracker is not None:
            # kept by the LAN record from now on, chosen or not: a connection a neighbour took
            # over from a member that died just before, with the bytes it holds unread
            self.tracker.hold(key, state.tcp.rcv_nxt, state.rcv_pos, state.unread)  # type: ignore[union-attr]  # key is None without tcp
            state.unread = b""
        if self.on_mirrored is not None:
            self.on_mirrored(key)
        with self._lock:
            self.states[key] = state  # before the acknowledgement: a takeover finds it then
        if first[0]["type"] == "adopt":
            link.sendall(ACK)  # the new owner writes nothing before this
        while (frame := recv_frame(link)) is not None:
            with self._lock:
                if self.death.is_set():
                    return  # frozen: the takeover works from what was acknowledged
                if frame[0]["type"] == MOVED:  # handed to a new mirror: forget it, no death
                    if self.states.get(key) is state:  # not a newer link's copy of it
                        del self.states[key]
                        if self.tracker is not None:
                            self.tracker.forget(key)
                    return
                state.apply(*frame)
                self._keep_session(state)
                if frame[0]["type"] == "update":
                    link.sendall(ACK)
            if self.tracker is not None and state.tcp is not None and frame[0]["type"] == "update":
                # what the owner consumed and mirrored, the LAN record may forget: an upload
                # is kept only as far as the owner lags behind it
                self.tracker.consumed(key, repair.seq_add(state.tcp.rcv_nxt, state.rcv_pos))
            if state.done:
                with self._lock:
                    self.states.pop(key, None)
                if self.tracker is not None:
                    self.tracker.forget(key)
                return
        self.die("cluster link closed without done")

    def _peer_frame(self, link: socket.socket, header: dict[str, Any], blob: bytes) -> None:
        """A frame another member sends (a session table, a death it judged), acknowledged
        once applied. Its error ends this link only: it says nothing of the owner's life."""
        try:
            if header["type"] in JOIN_FRAMES:
                if self.on_join is None:
                    raise MirrorError(f"a {header['type']} frame, and this node takes no joins")
                send_frame(link, *self.on_join(header, link))
                return
            if header["type"] == DEAD:
                dead = read_dead_frame(header)
                if self.on_dead is not None:
                    self.on_dead(dead)
            else:
                sessions = read_sessions_frame(header, blob)
                if self.controls.share_sessions and self.sessions is not None:
                    self.sessions.put_all(sessions)
            link.sendall(ACK)
        except (MirrorError, OSError, ValueError) as exc:  # ValueError: a JoinError
            print(f"ERROR a {str(header['type'])[:20]} frame from a member: {exc!r}"[:300],
                  file=sys.stderr, flush=True)  # fmt: skip

    @property
    def sessions(self) -> SharedSessionStore | None:
        """This node's session table (the one its connections resume from), if it keeps one."""
        store = self.config.session_store if self.config is not None else None
        return store if isinstance(store, SharedSessionStore) else None

    def _keep_session(self, state: MirrorState) -> None:
        """Store the session the frame just applied carried (before it is acknowledged)."""
        if state.new_session and state.session is not None and self.controls.share_sessions:
            if self.sessions is not None:
                self.sessions.keep(state.session)

    def _hand_sessions(self) -> None:
        """The whole session table to this node's own buddy, once it owns the address."""
        assert self.chain is not None and self.sessions is not None
        if (n := hand_sessions(self.chain.link, self.sessions, "the next buddy")) is not None:
            say(f"SESSIONS {n} handed to the next buddy")

    def _control(self, link: socket.socket) -> None:
        realtime_thread()  # answers keep the owner's lease: never starved
        self.beaten.set()
        if self.controls.keepalive:
            link.settimeout(DEAD_AFTER_S)
        while True:
            frame = recv_frame(link)  # a timeout raises: an error like any other (_link)
            if frame is None:
                self.die("control link closed")
                return
            if frame[0]["type"] == RELEASE:  # the owner mirrors elsewhere now: no death
                link.sendall(ACK)
                if self.on_release is not None:
                    self.on_release()
                return
            if frame[0]["type"] != "beat":
                raise MirrorError(f"unexpected {frame[0]['type']!r} on the control link")
            link.sendall(ACK)

    def _accept_links(self, server: socket.socket) -> None:
        while True:
            try:
                link, _ = server.accept()
            except OSError:
                if self._server is None:
                    return  # stop_links()
                raise
            link.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            spawn(self._link, link)

    # -- takeover --

    def fence(self) -> None:
        """Take the dead owner's switch port down, once: the takeover's first step, or before
        it (a member fences before any wait, so that a live owner judged dead finds its port
        down before it could judge its own mirror dead)."""
        if self._fenced is None:
            began, error = time.monotonic(), None
            if self._fence is not None:
                try:
                    self._fence.fire()
                except OSError as exc:
                    error = repr(exc)
            self._fenced = (began, time.monotonic(), error)

    def take_over(self, sniffer: Sniffer | None) -> tuple[list[Restored], dict[str, Any]]:
        """Fence, read the LAN's queue, restore, claim, announce (module docstring)."""
        self.fence()
        assert self._fenced is not None
        t0, t_fenced, fence_error = self._fenced
        with self._lock:
            states = dict(self.states)
        # the sniffer goes on listening: a client segment that arrives while the sockets are
        # restored reaches no socket (it carries the old owner's MAC); it is caught up below
        if sniffer is not None:
            sniffer.sync()  # the record is complete up to now: after the owner's last frame
        flows = self.tracker.copy_flows() if self.tracker is not None else {}
        t_drained = time.monotonic()
        restored, failed = self._restore_all(states, flows)
        t_restored = time.monotonic()
        if self.chain is not None:
            # a member's own mirror is known before the takeover: every restored connection
            # goes there before this node receives a byte of it (the claim), so that a second
            # death from now on finds each one held twice
            restored, links = self._adopt_all(restored)
            self._adopted = links
        t_adopted = time.monotonic()
        if self.claim is not None:
            self.claim()
        else:
            assert self._standby is not None, "run() arms the standby address"
            self._standby.claim()
        caught_up = 0
        if sniffer is not None:
            sniffer.stop()  # now everything the clients sent before the claim has been heard
            if self.controls.sniff_data:
                caught_up = self._catch_up(restored)
        for r in restored:
            repair.leave_repair(r.sock)
        replayed = 0
        if self.controls.replay_syns and self.tracker is not None:
            with self.tracker.lock:  # the sniffer stopped: the record is final
                replayed = replay_syns(self.tracker.flows, {r.key for r in restored})
        t_claimed = time.monotonic()
        report = {"reason": self.reason, "detected": t0, "fenced": t_fenced,
                  "drained": t_drained, "restored": t_restored, "adopted": t_adopted, "claimed": t_claimed, "connections": len(restored),
                  "from_sniff": sum(r.from_sniff for r in restored), "failed": failed, "fence_error": fence_error,
                  "resent_bytes": sum(len(r.queued) for r in restored),
                  "caught_up_bytes": caught_up, "replayed_syns": replayed,
                  "updates": sum(r.state.updates for r in restored),
                  "client_lacked": (None if any(r.lacked is None for r in restored)
                                    else sum(r.lacked or 0 for r in restored)),
                  "lan_frames": self.tracker.frames if self.tracker else 0}  # fmt: skip
        return restored, report

    def _restore_all(self, states: dict[tuple[str, int], MirrorState], flows: dict[tuple[str, int], Flow]
                     ) -> tuple[list[Restored], list[str]]:  # fmt: skip
        """Every connection known, mirrored or heard, in repair mode; and why the others could
        not be restored."""
        restored, failed = [], []
        for key in sorted(set(states) | set(flows)):
            try:
                r = restore_flow(states.get(key), flows.get(key), self.docroot, self.config,
                                 self.vip, self.port, sniff_data=self.controls.sniff_data,
                                 sniff_unaccepted=self.controls.sniff_unaccepted,
                                 at_ack=self.resume_at_ack)  # fmt: skip
            except (OSError, ValueError, RuntimeError) as exc:
                failed.append(f"{key}: {exc!r}")
                continue
            if r is not None:
                restored.append(r)
        return restored, failed

    def _catch_up(self, restored: list[Restored]) -> int:
        """Client bytes heard after the flows were copied go into the restored sockets'
        receive queues (still in repair mode), from each socket's own ``rcv_nxt`` on; returns
        how many. Without this a client whose segment crossed the takeover would resend it
        only after its own timer (a lone segment: 200 ms)."""
        assert self.tracker is not None
        total = 0
        for r in restored:
            flow = self.tracker.flows.get(r.key)
            if flow is None:
                continue
            try:
                rel = (repair.received_up_to(r.sock) - flow.rcv_base) & 0xFFFFFFFF
                extra = flow.data_from(rel) if flow.base <= rel < flow.end else b""
                repair.append_received(r.sock, extra)
            except OSError as exc:
                print(f"ERROR catch up {r.key}: {exc!r}", file=sys.stderr, flush=True)
                continue
            r.unread += len(extra)
            r.received += extra
            total += len(extra)
        return total

    def _adopt_all(self, restored: list[Restored]) -> tuple[list[Restored], dict[tuple[str, int], socket.socket]]:  # fmt: skip
        """Hand every restored connection to this node's own buddy before a byte of it leaves:
        all ``adopt`` frames first, then their acknowledgements. Returns the connections that
        may go on and their links; one the next buddy did not take is closed (lost)."""
        if self.chain is None:
            return restored, {}
        links: dict[tuple[str, int], socket.socket] = {}
        for r in restored:
            try:
                link = self.chain.link()
                send_frame(link, *r.state.adopt_frame(r.received))
                links[r.key] = link
            except OSError as exc:
                print(f"ERROR adopt {r.key}: {exc!r}", file=sys.stderr, flush=True)
        kept = []
        for r in restored:
            buddy = links.get(r.key)
            try:
                if buddy is None or buddy.recv(1) != ACK:
                    raise ConnectionError("the next buddy did not acknowledge it")
                kept.append(r)
            except OSError as exc:
                links.pop(r.key, None)
                if self._mirror_dead_too():
                    kept.append(r)  # a member's mirror died as well: it goes on alone
                    continue
                print(f"ERROR adopt {r.key}: {exc!r}", file=sys.stderr, flush=True)
                r.sock.close()
        return kept, links

    def _mirror_dead_too(self) -> bool:
        """Whether this node's own mirror is declared dead (now or within the wait for the
        verdict): a bucket-layout member whose predecessor and mirror died close together."""
        alone = self.chain.alone if self.chain is not None else None
        return alone is not None and alone.wait(ALONE_WAIT_S)

    def _serve_restored(self, r: Restored, sock: socket.socket, mirror: socket.socket | None,
                        sent: int, go: threading.Event) -> None:  # fmt: skip
        """Serve one resumed connection on: the rest of what the client lacks (``sent`` bytes
        of ``r.resend`` are out already), the never-sent tail, then the service."""
        go.wait()  # every connection is resumed first (resume_all)
        lease = self.chain.lease if self.chain else None
        try:
            for piece in tail(r, self.docroot, self.config, sent):
                write_leased(sock, piece, lease)
            conn = None
            if self.config is not None:
                conn = (ServerConnection.import_state(self.config, r.state.tls_full)
                        if r.state.tls_full is not None else ServerConnection(self.config))
                if r.state.progress is not None:
                    conn.import_progress(r.state.progress)
            if self.chain is not None:
                self.chain.hold(sock)
            # done on every end of the connection, as on the first owner: a link to the next
            # buddy closed without it would make that buddy take this whole node over (the
            # full campaign saw it: a false takeover of a healthy new owner)
            # a bucket-layout member's chain is its own Primary: when that mirror dies too,
            # the connection goes on alone or is handed to the next mirror, as its own are
            chain = self.chain if mirror is not None else None
            readopt = chain is not None and chain.readopt
            service = Service(sock, self.docroot, conn, snd_pos=r.state.snd_pos,
                              rcv_pos=r.state.rcv_pos,
                              app=dict(r.state.app) or {"phase": "request", "offset": 0},
                              keys_sent=r.state.tls_keys is not None, mirror=mirror, lease=lease,
                              alone=chain.alone if chain is not None else None,
                              shadow=r.state if readopt else None, stall=self.stall)  # fmt: skip
            if chain is not None and readopt:
                chain.register(service)
            try:
                service.serve_to_end()
            finally:
                if chain is not None:
                    chain.unregister(service)
            if service.mirror is not None:
                service.mirror.settimeout(10.0)
                recv_frame(service.mirror)  # the buddy closes the link once it has read done
                if service.mirror is not mirror:
                    service.mirror.close()
        except LeaseExpired:
            assert self.chain is not None
            self.chain.fence_self("the lease ran out during a write")
        except Exception as exc:  # noqa: BLE001 - one connection's error ends it alone
            print(f"ERROR restored {r.key}: {exc!r}", file=sys.stderr, flush=True)
        finally:
            if mirror is not None:
                mirror.close()

    def _serve_new(self, listener: socket.socket) -> None:
        while True:
            sock, _ = listener.accept()
            if self.chain is not None:
                spawn(self.chain.serve_one, sock)
                continue
            spawn(serve_quietly, sock, self.docroot, self.config)

    def start_links(self) -> None:
        """Listen on :attr:`listen_on` and take the owner's cluster links (each in its own
        thread) from now on: connection states, sessions, keepalives. A link's error or a
        missed keepalive sets :attr:`death`."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(self.listen_on)
        server.listen(256)
        self._server = server
        spawn(self._accept_links, server)

    def stop_links(self) -> None:
        """Take no more links (a retired watch: its owner mirrors elsewhere). The links open
        now go on to their ends."""
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(OSError):  # wakes the accept (a close alone would not)
                server.shutdown(socket.SHUT_RDWR)
            server.close()

    def run(self) -> int:
        """Mirror until the owner dies, take over, then serve every connection on."""
        # bound now, listening for the virtual IP before this node has it (no SYN meets a
        # node without a listener once the address moves)
        vip_listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        vip_listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        vip_listener.setsockopt(socket.IPPROTO_IP, 15, 1)  # IP_FREEBIND
        vip_listener.bind((self.vip, self.port))
        vip_listener.listen(256)
        self._standby = StandbyAddress(self.vip, self.dev)
        self._hold = ResetHold(LibNft(), self.vip, self.port)
        self.arm_fence()
        sniffer = None
        if self.controls.sniff_data or self.controls.sniff_unaccepted:
            self.tracker = tracker = FlowTracker((self.vip, self.port))
            sniffer = Sniffer(packet_socket(self.dev, service=tracker.service), tracker).start()
        self.start_links()
        say("ready")
        realtime_thread()  # the takeover runs first when the death comes (undone below)
        self.death.wait()
        # no garbage collection pause (tens of ms with every connection's state in memory)
        # between the death and the last connection's resume
        gc.disable()
        restored, report = self.take_over(sniffer)
        self.serve_taken_over(vip_listener, restored, report)
        return 0

    def arm_fence(self) -> None:
        """Open the fence of the owner's switch port now (one ioctl when it fires)."""
        if self.controls.fence and self.fence_port is not None:
            self._fence = PortFence(*self.fence_port)

    def serve_taken_over(self, vip_listener: socket.socket | None, restored: list[Restored],
                          report: dict[str, Any]) -> None:  # fmt: skip
        """After the takeover: the own buddy, the report, every connection resumed and served
        on, then new connections (forever; ``vip_listener`` ``None``: another part of this
        node accepts them, as a member's own listener does)."""
        if self.next_buddy is not None:
            # the new owner's own buddy, keepalives and lease first: nothing is written
            # before the adopted connections are there
            self.chain = Primary(self.vip, self.port, self.next_buddy, self.docroot, self.config,
                                 lan_dev=self.dev)  # fmt: skip
            spawn(self.chain.heartbeat, self.chain.link(), name="heartbeat")
        say("RESTORED " + json.dumps(report))
        if self._adopted is None:  # the chain layout: its own buddy is new
            restored, mirrors = self._adopt_all(restored)
        else:
            mirrors = self._adopted
        if self.chain is not None and self.sessions is not None and self.controls.share_sessions:
            spawn(self._hand_sessions, name="sessions")
        resumed: list[dict[str, Any]] = []
        threads: list[threading.Thread] = []
        go = threading.Event()

        def on_resumed(r: Restored, sock: socket.socket, how: str) -> None:
            resumed.append({"client": list(r.key), "resume": how, "queued": len(r.queued),
                            "lacked": r.lacked, "unread": r.unread, "from_sniff": r.from_sniff,
                            "at": time.monotonic()})  # fmt: skip
            if how == "failed":
                print(f"ERROR resume {r.key}: the rebase failed", file=sys.stderr, flush=True)
                return
            # the first bytes the client lacks leave now; a thread writes what did not fit
            # served under the default policy, as every connection (the resumption ran first)
            threads.append(spawn(self._serve_restored, r, sock, mirrors.get(r.key),
                                 send_now(sock, r.resend), go))  # fmt: skip

        resume_all(restored, on_resumed, self.resume_at_ack, self._hold)
        gc.enable()
        normal_thread()
        go.set()
        say("RESUMED " + json.dumps({
            "resumed_at_ack": sum(c["resume"] == "rebased" for c in resumed),
            "reset_held": self._hold.clients_held if self._hold else None,
            "connections": resumed}))  # fmt: skip
        if vip_listener is not None:
            spawn(self._serve_new, vip_listener)
        for t in threads:
            t.join()
        say("SERVED")
        threading.Event().wait()  # keep serving new connections until stopped

