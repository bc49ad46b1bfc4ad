"""The owner of the virtual IP: many concurrent connections, each mirrored to the buddy.

``python -m sslacc_sim.aio.linux.node primary`` runs :func:`run_primary`: it listens on the
virtual IP and serves every accepted connection in its own thread
(:class:`~sslacc_sim.aio.linux.service.Service`), each with its own cluster link to the buddy:
the link's first frame is the connection's ``tcp`` snapshot (:mod:`~sslacc_sim.aio.linux.repair`,
taken right after ``accept``), then updates, each acknowledged before the bytes it describes
are written, and ``done`` when the client has acknowledged everything.

One more link carries keepalives (``beat`` every :data:`BEAT_S`); the buddy answers each, and
each answer renews the node's :class:`~sslacc_sim.aio.linux.service.Lease`. A node whose lease
ran out (it was stopped, its link was cut) *fences itself*: it puts every client socket into
repair mode, where closing sends nothing (no FIN, no reset, no retransmission), and exits. The
buddy declares the node dead only after :data:`DEAD_AFTER_S` without a keepalive, later than the
lease ends, and fences the node's switch port as well before it takes over.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tls12 import ServerConfig, ServerConnection

from . import repair
from .claim import link_down
from .docroot import Docroot
from .mirror import ACK, RELEASE, MirrorState, recv_frame, send_frame
from .report import say
from .service import ALONE_WAIT_S, DiePoint, Lease, LeaseExpired, Service
from .threads import realtime_thread, spawn

__all__ = [
    "BEAT_S", "LEASE_S", "DEAD_AFTER_S", "STOP_GAP_S", "SNDBUF", "Primary", "run_primary"]

#: A keepalive this often.
BEAT_S = 0.05
#: The lease a keepalive's answer grants, counted from the keepalive's sending.
LEASE_S = 0.15
#: The buddy takes over after this long without a keepalive (> :data:`LEASE_S`).
DEAD_AFTER_S = 0.2
#: A heartbeat round that begins this long after the one before shows the node (or its
#: keepalive thread) was stopped or starved meanwhile, long enough to be judged dead by a
#: mirror that counts :data:`DEAD_AFTER_S` from the last keepalive it received
#: (:meth:`Primary.ran_through`); a margin of one beat.
STOP_GAP_S = DEAD_AFTER_S - BEAT_S
#: Keepalives left unanswered on a link still open before it counts as failed (a minute's).
_MAX_UNANSWERED = int(60 / BEAT_S)
#: Send buffer of a client socket: bounds what the client can lack, and so what a takeover
#: sends again.
SNDBUF = 1 << 18
_LINK_TIMEOUT_S = 10.0
_SELF_FENCE_EXIT = 75


@dataclass
class Primary:
    """The node program's state: the lease and the client sockets it would fence."""

    vip: str
    port: int
    buddy: tuple[str, int] | None
    """The buddy's cluster-link address; ``None``: a standalone server (no mirroring, no
    keepalive, no lease), the reference the cluster benchmark compares with."""
    docroot: Docroot
    config: ServerConfig | None
    die: DiePoint | None = None
    keepalive: bool = True
    self_fence: bool = True
    """Off only as a negative control: a woken node then writes on as if it still owned."""
    stall: float = 0.0
    """Seconds to wait before each accept and each read (a loaded server)."""
    lease: Lease = field(default_factory=lambda: Lease(LEASE_S))
    lan_dev: str | None = None
    """The LAN interface :meth:`fence_self` takes down first (``None``: left up)."""
    stand_down: Callable[[], bool] | None = None
    """Asked when the lease has run out: fence now (``True``) or wait for the cluster's verdict
    (``False``: writes wait meanwhile, :attr:`Lease.grace
    <sslacc_sim.aio.linux.service.Lease.grace>`). ``None``: fence at once (the chain layout)."""
    alone: threading.Event | None = None
    """The bucket layout's member sets it when the cluster declares this node's mirror dead
    (:meth:`go_alone`); ``None`` in the chain layout, where losing the buddy means the lease
    runs out."""
    readopt: bool = False
    """A bucket-layout member whose ring re-forms: each connection keeps the mirror's view of
    itself (:attr:`Service.shadow <sslacc_sim.aio.linux.service.Service.shadow>`), and
    :meth:`retarget` hands every running one to the new mirror (:meth:`Service.readopt
    <sslacc_sim.aio.linux.service.Service.readopt>`) instead of leaving it alone to its end."""
    _services: set[Service] = field(default_factory=set)
    answered_at: float = 0.0
    """When the last keepalive the mirror answered was sent (``time.monotonic``)."""
    beat_at: float = 0.0
    """When the heartbeat's current round began (``time.monotonic``)."""
    paused_at: float = 0.0
    """When the heartbeat last began a round more than :data:`STOP_GAP_S` after the one before
    (its first round counts as one: nothing is known of the time before it)."""
    _control: socket.socket | None = None
    """The keepalive link :meth:`heartbeat` beats on; another (or ``None``) ends it."""
    _socks: set[socket.socket] = field(default_factory=set)
    _links: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def link(self, to: tuple[str, int] | None = None) -> socket.socket:
        """A new cluster link to the buddy (or to ``to``)."""
        to = to or self.buddy
        assert to is not None
        s = socket.create_connection(to, timeout=_LINK_TIMEOUT_S)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def go_alone(self) -> None:
        """The mirror is dead, declared so by the cluster: keep the lease for good, serve new
        connections unmirrored, and let the running ones go on without their links
        (:attr:`Service.alone <sslacc_sim.aio.linux.service.Service.alone>`)."""
        assert self.alone is not None, "only a member may go on alone"
        self.lease.forever()
        self.alone.set()
        with self._lock:
            links = list(self._links)
        for link in links:  # a thread waiting for a hung mirror's acknowledgement wakes now
            try:
                link.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def hold(self, sock: socket.socket) -> None:
        """Count ``sock`` among the client sockets :meth:`fence_self` silences."""
        with self._lock:
            self._socks.add(sock)

    def fence_self(self, why: str, *, leaving: bool = False) -> None:
        """Cut this node off its LAN, silence every client socket (repair mode: closing sends
        nothing) and exit: the buddy may own the connections by now, and a reset from this
        node (for a connection in its accept queue, say) would end one of them. ``leaving``:
        the node leaves on purpose (``LEFT``, exit status 0), and its buddy takes its
        connections over as after a death (its links end with this process)."""
        if self.lan_dev is not None:
            try:
                link_down(self.lan_dev)
            except OSError as exc:
                print(f"FENCE could not take {self.lan_dev} down: {exc!r}", file=sys.stderr,
                      flush=True)  # fmt: skip
        with self._lock:
            for s in self._socks:
                try:
                    s.setsockopt(socket.IPPROTO_TCP, repair.TCP_REPAIR, 1)
                except OSError:
                    pass
        say(f"{'LEFT' if leaving else 'FENCED'} {why}")
        os._exit(0 if leaving else _SELF_FENCE_EXIT)

    def heartbeat(self, link: socket.socket, on_silent: Callable[[str], bool] | None = None) -> None:
        """Send keepalives on ``link``; renew the lease with each answer; fence on expiry.

        ``on_silent`` (a bucket-layout member of three or more): called once the mirror has
        not answered for :data:`DEAD_AFTER_S`, or its link fails, with the reason; ``True``: the
        member has dealt with it (the mirror is declared dead, :meth:`retarget`), the
        heartbeat ends; ``False``: go on as without it."""
        try:
            send_frame(link, {"type": "control"})
        except OSError as exc:  # the mirror died between the link and its first frame
            if on_silent is not None:
                on_silent(f"keepalive link: {exc!r}")
            return  # as when the link fails later: no lease without a mirror
        link.settimeout(BEAT_S)
        realtime_thread()
        answered = time.monotonic()
        # when each keepalive not answered yet was sent, oldest first: the mirror answers each
        # with one ACK, in order, so an answer that came after its round gave up renews the
        # lease from its own keepalive's time, never from a later one's
        unanswered: deque[float] = deque()
        self._control = link
        while self._control is link:
            sent = time.monotonic()
            if sent - self.beat_at > STOP_GAP_S:
                self.paused_at = sent
            self.beat_at = sent
            failed = ""
            try:
                send_frame(link, {"type": "beat"})
                unanswered.append(sent)
                answers = link.recv(64)
                for _ in range(min(answers.count(ACK), len(unanswered))):
                    answered = self.answered_at = unanswered.popleft()
                    self.lease.renew(answered)
                if not answers:
                    failed = "keepalive link: closed by the mirror"
                elif len(unanswered) > _MAX_UNANSWERED:
                    failed = f"keepalive link: {len(unanswered)} keepalives unanswered"
            except TimeoutError:
                pass
            except OSError as exc:
                failed = f"keepalive link: {exc!r}"
            if not failed and time.monotonic() - answered > DEAD_AFTER_S:
                failed = f"no answer to a keepalive for {DEAD_AFTER_S} s"
            if failed and on_silent is not None and on_silent(failed):
                return
            if failed.startswith("keepalive link"):
                return  # the buddy is gone: nothing left to renew the lease; it runs out
            if self.alone is not None and self.alone.is_set():
                return  # no mirror left to beat for (go_alone)
            if self.self_fence and not self.lease.valid() and (
                    self.stand_down is None or self.stand_down()):
                self.fence_self("the lease ran out")
            time.sleep(max(0.0, BEAT_S - (time.monotonic() - sent)))
        if self._control is not None:  # another keepalive link took over: a join's retarget
            _release(link)

    def ran_through(self, window: float) -> bool:
        """Whether this node's heartbeat has run on time for the last ``window`` s: no round
        began more than :data:`STOP_GAP_S` after the one before, and the current one is not
        older than that. A node stopped (``SIGSTOP``) or starved for longer shows a gap; one
        that ran through sent its keepalives on time, so a live mirror did not judge it dead
        for their lack."""
        now = time.monotonic()
        return now - self.beat_at <= STOP_GAP_S and now - self.paused_at > window

    def stop_heartbeat(self) -> None:
        """End :meth:`heartbeat` (the mirror it beats for was declared dead)."""
        self._control = None

    def register(self, service: Service) -> None:
        """Count ``service`` among the running connections :meth:`retarget` hands over."""
        with self._lock:
            self._services.add(service)

    def unregister(self, service: Service) -> None:
        with self._lock:
            self._services.discard(service)

    def retarget(self, buddy: tuple[str, int], *, old_lives: bool = False) -> socket.socket:
        """Mirror to ``buddy`` from now on (a bucket-layout member whose mirror died, the ring
        re-formed): the first link to it (its keepalive link, for :meth:`heartbeat`), a fresh
        lease and a fresh :attr:`alone` for the connections accepted from now on, and every
        running connection handed to it (:attr:`readopt`), each on a link of its own: those
        it does not take go on alone to their end. ``old_lives``: the old mirror lives (a
        join put ``buddy`` before it): each connection's old link ends with ``moved``, and
        the old keepalive link, once :meth:`heartbeat` beats on the new one, with
        ``release``, so that the old mirror sees no death. If the old mirror dies all the
        same (the master, at a join: it is the newcomer's successor), a connection whose update
        to it fails from now on goes on alone until its hand-over here, instead of waiting for
        a verdict on it that this member never gives (the old mirror is not its mirror any
        more: :meth:`Member._mirror_silent
        <sslacc_sim.aio.linux.member.Member._mirror_silent>`)."""
        assert self.alone is not None, "only a member re-forms its ring"
        link = self.link(buddy)  # first: until the new mirror listens, new ones go to the old
        self.buddy = buddy
        lease = Lease(self.lease.duration, grace=self.lease.grace)
        alone = threading.Event()
        self.lease.successor = lease  # a write begun under the old one goes on under this
        old_alone, self.lease, self.alone = self.alone, lease, alone
        if old_lives:
            old_alone.set()  # read only by connections whose link to the old mirror failed
        with self._lock:
            running = list(self._services)
        for service in running:
            try:
                relink = self.link()
            except OSError:
                break  # the new mirror is gone too: the rest go on alone
            with self._lock:
                self._links.add(relink)
            service.readopt(relink, lease, alone, tell_old=old_lives)
        return link

    def _caught_by_retarget(self, service: Service, target: tuple[str, int] | None) -> None:
        """``service`` linked to ``target`` just as :meth:`retarget` moved to another mirror
        (after its list of running connections was taken): hand it over too."""
        if self.buddy != target and self.alone is not None:
            try:
                service.readopt(self.link(), self.lease, self.alone, tell_old=True)
            except OSError:
                pass  # the new mirror is gone too: it goes on as the others do

    def serve_one(self, sock: socket.socket) -> None:
        """One accepted connection, mirrored on its own link, from snapshot to ``done``."""
        self.hold(sock)
        try:
            if self.buddy is None or (self.alone is not None and self.alone.is_set()):
                conn = ServerConnection(self.config) if self.config is not None else None
                Service(sock, self.docroot, conn, stall=self.stall).serve()
                return
            snap = repair.snapshot(sock)
            conn = ServerConnection(self.config) if self.config is not None else None
            lease = self.lease if self.keepalive and self.self_fence else None
            alone = self.alone
            first = {"type": "tcp", "tcp": snap.to_json()}
            shadow = MirrorState() if self.readopt else None
            if shadow is not None:
                shadow.apply(first, b"")
            target = self.buddy
            try:
                mirror = self.link(target)
                with self._lock:
                    self._links.add(mirror)
                send_frame(mirror, first)
            except OSError:
                if alone is None or not alone.wait(ALONE_WAIT_S):
                    raise
                Service(sock, self.docroot, conn, stall=self.stall).serve()  # the mirror is dead
                return
            service = Service(sock, self.docroot, conn, mirror=mirror, die=self.die, lease=lease,
                              stall=self.stall, alone=alone, shadow=shadow)  # fmt: skip
            if shadow is not None:
                self.register(service)
                self._caught_by_retarget(service, target)
            try:
                service.serve_to_end()
                if service.mirror is not None:
                    # wait for the buddy to close: it has read ``done`` then
                    service.mirror.settimeout(_LINK_TIMEOUT_S)
                    recv_frame(service.mirror)
            finally:
                self.unregister(service)
                mirror.close()
                if service.mirror is not None and service.mirror is not mirror:
                    service.mirror.close()
        except LeaseExpired:
            self.fence_self("the lease ran out during a write")
        except Exception as exc:  # noqa: BLE001 - one connection's error ends it alone
            print(f"ERROR connection {sock.fileno()}: {exc!r}", file=sys.stderr, flush=True)
        finally:
            with self._lock:
                self._socks.discard(sock)
                self._links = {link for link in self._links if link.fileno() != -1}
            sock.close()

    def listen(self) -> socket.socket:
        """The listening socket on the virtual IP."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
        listener.bind((self.vip, self.port))
        listener.listen(256)
        return listener


def _release(link: socket.socket) -> None:
    """Tell the old mirror on its keepalive link that this node mirrors elsewhere now, and
    read to its end of file: a late answer to a keepalive left unread would make the close a
    reset, which the mirror, still reading keepalives, would take for a death."""
    try:
        send_frame(link, {"type": RELEASE})
        link.settimeout(_LINK_TIMEOUT_S)
        while link.recv(64):  # answers, the acknowledgement, then the mirror's close
            pass
    except OSError:
        pass  # a mirror gone meanwhile: its watch ends anyway
    finally:
        link.close()


def run_primary(node: Primary) -> int:
    """Serve until killed; print ``ready`` once listening."""
    control = node.link() if node.buddy else None  # the buddy first: a refusal is one clear error
    listener = node.listen()
    if control is not None and node.keepalive:
        spawn(node.heartbeat, control, name="heartbeat")
    elif control is not None:
        control.close()
    say("ready")
    while True:
        if node.stall:
            time.sleep(node.stall)  # the next connection waits in the accept queue meanwhile
        sock, _ = listener.accept()
        spawn(node.serve_one, sock)
