"""A member of the bucket layout: every node serves the buckets it owns, mirrored to the next.

SSLACC spreads connections over all its nodes (§4): each connection's client address and port
hash into one of ``B`` buckets, and each bucket has an owner, which serves it, and a mirror,
which holds the copy cluster-then-commit keeps. The table of owners and mirrors is
:class:`sslacc_sim.buckets.BucketTable` (bucket ``b`` starts on member ``b mod n``; its mirror
is the next member round the ring), the dispatch on Linux is
:class:`~sslacc_sim.aio.linux.buckets.BucketFilter` (every node holds the virtual IP and one
MAC, and one nftables rule drops what the node does not own). A :class:`Member` puts them to
work, one process per node (``python -m sslacc_sim.aio.linux.node member``):

* it installs its filter with the buckets the table gives it;
* as **owner**, it serves every connection that reaches its listener on the virtual IP (only
  its buckets do), each mirrored before any byte that depends on it leaves, on the cluster LAN
  to the mirror of its buckets -- the next member, so that one
  :class:`~sslacc_sim.aio.linux.primary.Primary` does it, with its keepalives and lease;
* as **mirror** of the previous member's buckets, it keeps their connections' states
  (:class:`~sslacc_sim.aio.linux.backup.Backup`'s links: updates acknowledged, sessions kept,
  keepalives answered).

With one member there is no mirror: it owns every bucket and serves unmirrored (the reference
of the scaling benchmark, ``benchmarks/bench_sslacc_cluster.py``).

**A death with two members.** Each member is the other's mirror. When one dies (any error of a
cluster link or 200 ms without a keepalive: :class:`~sslacc_sim.aio.linux.backup.Backup`'s
rule), the survivor first goes on *alone* (:meth:`Primary.go_alone
<sslacc_sim.aio.linux.primary.Primary.go_alone>`: its lease holds for good, its running
connections drop their dead mirror links and go on, new ones are not mirrored -- there is no
one left to mirror to), then takes the dead member's buckets over as the chain's buddy takes
over the owner: it fences the dead member's switch port, restores every connection it mirrored
(and those it heard on the LAN that were never mirrored) in repair mode, adds the dead member's
buckets to its filter -- its *claim*, instead of the address -- replays the SYNs nobody
answered, and serves on. The LAN record (the sniffer) keeps only the connections of the
buckets the member mirrors.

**A death with three members** (``--ring``: every member's cluster address, and the switch
port of each). Every member keeps its own copy of the bucket table and applies a death to it
as the table's rule says (:meth:`BucketTable.remove <sslacc_sim.buckets.BucketTable.remove>`:
the dead member's buckets go to its mirror, the next member), so the ring re-forms without a
message: the dead member's *successor* learns of the death from its links (as above) and
takes the dead member's buckets and connections over, each restored connection handed to its
own mirror (``adopt``) before a byte of it leaves; the dead member's *predecessor* learns of it
from its keepalives (no answer for :data:`~sslacc_sim.aio.linux.primary.DEAD_AFTER_S`, or an
error on the link, while its own port is up: else it fences itself), lets its running
connections go on alone for the moment, and mirrors from then on to the successor, which
listens for it on a port of its own (:func:`link_port`) and keeps its states; each running
connection is handed over in one ``adopt`` frame (its own copy of the mirror's view,
:attr:`Service.shadow <sslacc_sim.aio.linux.service.Service.shadow>`), and the session table
goes along. Two members remain, and a second death is the two-member case above.

**Judging a mirror** (:meth:`Member._verdict`). A member whose mirror went silent, or whose
keepalive link to it failed, must not go on alone if it was itself the one judged dead (woken
from a stop, say): its successor is fencing it, and it has to find its own port down first.
How long it waits for that depends on what it knows. If the link failed and the mirror's
kernel refuses a connection to its listener (:func:`refused`), the mirror's process is gone:
it fences nothing more, and a fence it made is down already, so the member judges at once
(even one that may have been stopped: its port decides below). If its own heartbeat ran on
time through the last second (:meth:`Primary.ran_through
<sslacc_sim.aio.linux.primary.Primary.ran_through>`), its keepalives reached the mirror, which
had no reason to judge it: a silent mirror gets :data:`QUIET_WAIT_S`. A member that may have
been stopped, or whose mirror still listens although the link failed (it closed the link: it
judged this member dead), waits :data:`SILENT_WAIT_S`. Then its own port decides: down, it
fences itself. With two members each
is the other's mirror and both may see the other die at once (their cluster link cut): the
higher id waits :data:`TIE_BREAK_S` before it fences, so that the lower one fences it first
(not when the other's listener refuses: its process is gone).

**Two deaths closer together than a verdict.** The successor hands the connections it took
over to its own mirror *before* it claims the dead member's buckets (so that from the claim
on each is held twice), each ``adopt`` with the client bytes it put back into the restored
socket's receive queue. If the successor dies too before the last member has judged the
first death, the last member's watch on it has to hold connections of buckets it did not
choose to keep: it keeps every connection its predecessor mirrors to it
(:meth:`FlowTracker.hold <sslacc_sim.aio.linux.sniff.FlowTracker.hold>`), and an ``adopt`` of
a third member's bucket tells it that member died (:meth:`Member._learn`), so that it keeps
all of that member's connections from then on; the bytes it heard of them before it knew
come from :class:`~sslacc_sim.aio.linux.sniff.Recent`, the member's record of the client
bytes of connections no watch kept.

**Four members and more.** A member that judged a death tells every other live member
(:meth:`Member._tell_dead`, a ``dead`` frame): one that is neither the dead member's
predecessor nor its successor learns it only so, and its table must give the dead member's
buckets to their heir before the next death (:meth:`Member._told_dead`). The table's rule is
deterministic, so every copy agrees after the same deaths in any order.

**A leave** (``SIGUSR1``, ``cluster leave``) is a planned death: the member silences its client
sockets, takes its LAN link down and exits (``LEFT``); its links end with it, and its
neighbours act as after a kill. **A join** (``--join``) is :mod:`~sslacc_sim.aio.linux.join`'s
(:class:`~sslacc_sim.aio.linux.join.Joining`, which :class:`Member` extends).
"""

from __future__ import annotations

import gc
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from tls12 import ServerConfig

from ...buckets import BucketTable
from .backup import Backup, Controls
from .buckets import BucketFilter, LibNft, bucket_of
from .docroot import Docroot
from .join import Joining, link_port
from .mirror import dead_frame
from .peers import carrier, refused, send_frame_to
from .primary import DEAD_AFTER_S, Primary
from .report import say
from .service import ALONE_WAIT_S
from .sessions import SessionGossip, SharedSessionStore, hand_sessions
from .sniff import FlowTracker, Recent, Sniffer, packet_socket
from .threads import realtime_thread, spawn

__all__ = ["Member", "run_member", "carrier", "refused", "link_port", "CONNECT_WITHIN_S",
           "TIE_BREAK_S"]

#: Seconds a member waits for its mirror's listener at start (members start together).
CONNECT_WITHIN_S = 30.0
#: Seconds the higher-id member of two waits before it fences the other (two keepalive
#: intervals): each is the other's mirror, and both may see the other die at once.
TIE_BREAK_S = 0.1
#: Seconds a member whose mirror died tries to reach its new mirror (the successor starts
#: listening for it once it has taken the dead member over).
RETARGET_WITHIN_S = 10.0
#: Seconds a member whose mirror went silent, or whose keepalive link failed, waits (beating
#: on) before it judges, when it may have been stopped itself (:meth:`Primary.ran_through
#: <sslacc_sim.aio.linux.primary.Primary.ran_through>`): longer than a successor that saw
#: this member die takes to fence it (:data:`TIE_BREAK_S` and the fence's ioctl), so that a
#: member woken from a stop finds itself fenced, never the mirror dead; a mirror that answers
#: again meanwhile was only slow.
SILENT_WAIT_S = 0.3
#: Seconds a member that ran through the last :data:`RAN_THROUGH_S` waits before it judges a
#: silent mirror: an answer still on its way, and the fence of a successor that cannot hear it
#: (its cluster link cut), which judges it as soon as it judges its mirror.
QUIET_WAIT_S = 0.1
#: The time a member's heartbeat must have run on time for the shorter waits: longer than a
#: mirror takes to judge it (:data:`~sslacc_sim.aio.linux.primary.DEAD_AFTER_S`) and fence it.
RAN_THROUGH_S = 1.0


@dataclass
class Member(Joining):
    """Member ``index`` of ``members`` (module docstring).

    ``listen_on``: this member's cluster-LAN address and port, where its predecessor's links
    arrive; ``mirror``: the next member's (``None`` with one member)."""

    index: int
    members: int
    buckets: int
    vip: str
    port: int
    listen_on: tuple[str, int]
    mirror: tuple[str, int] | None
    docroot: Docroot
    config: ServerConfig | None
    dev: str = "eth0"
    fence_port: tuple[str, str] | None = None
    """The switch's namespace and the predecessor's port there (taken down on its death)."""
    takeover: bool = True
    """Off only as a negative control: a death is reported and nothing is taken over."""
    ring: tuple[str, ...] = ()
    """Every member's cluster-LAN address, by index (``()``: a fixed ring; with three or more
    members a death is then only reported)."""
    switch_ports: tuple[str, ...] = ()
    """Every member's port on the switch, by index (with :attr:`ring`: the fence of whichever
    member becomes this one's predecessor)."""
    stall: float = 0.0
    """Seconds to wait before each read of a connection (``--stall-ms``: a loaded member, the
    client's bytes waiting in its kernel, acknowledged and not yet consumed)."""
    fence: bool = True
    """Off only as a negative control (``--no-fence``): a dead predecessor's switch port is
    not taken down, and this member does not take its own link down when its lease runs out
    (both fences, as the chain layout's ``no-fence`` control)."""
    joining: bool = False
    """This member joins a running ring (:mod:`~sslacc_sim.aio.linux.join`): :attr:`ring`
    lists the members' addresses up to its own, and the table comes from the master."""
    table: BucketTable = field(init=False)
    _owner: Primary | None = field(default=None, init=False)
    _nft: BucketFilter | None = field(default=None, init=False)
    _ring_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _filtered: set[int] = field(default_factory=set, init=False)
    """The buckets this member's filter lets in."""
    _judging: bool = field(default=False, init=False)
    """A verdict on the silent mirror is under way (:meth:`_verdict`)."""
    _theirs: dict[int, set[int]] = field(default_factory=dict, init=False)
    """Per predecessor watched: the buckets whose connections its watch keeps and claims."""
    _recent: Recent = field(default_factory=Recent, init=False)
    """The client bytes last heard of connections no watch keeps, shared by every watch."""
    _watching: dict[int, FlowTracker] = field(default_factory=dict, init=False)
    """Per predecessor watched: its watch's LAN record."""
    _watches: dict[int, Backup] = field(default_factory=dict, init=False)
    """Per predecessor watched: its watch (its links, its death)."""
    _gifts: dict[int, list[int]] = field(default_factory=dict, init=False)
    """Per newcomer: the buckets this member gave its join."""
    _tries: dict[int, int] = field(default_factory=dict, init=False)
    """Per newcomer: the highest master id whose try asked this member anything of it."""
    _gift_lock: threading.RLock = field(default_factory=threading.RLock, init=False)
    _linked: bool = field(default=False, init=False)
    """This member's first link to its mirror is made (:meth:`run`)."""

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.members:
            raise ValueError(f"member index {self.index} outside 0..{self.members - 1}")
        if self.joining and not (self.ring and self.switch_ports and self.index > 0):
            raise ValueError("a member that joins needs the ring and the switch ports, and a "
                             "lower member to ask")  # fmt: skip
        if (self.mirror is None) != (self.members == 1) and not self.joining:
            raise ValueError("a mirror address is needed exactly when there are other members")
        if self.ring and len(self.ring) != self.members or len(self.switch_ports) not in (0, len(self.ring)):
            raise ValueError("--ring and the switch ports need one entry per member")
        self.table = BucketTable(self.members, self.buckets)

    @property
    def owned(self) -> list[int]:
        """The buckets this member serves."""
        return self.table.owned_by(self.index)

    @property
    def predecessor(self) -> int:
        """The member whose buckets this one mirrors (the live one before it in the ring)."""
        live = self.table.members
        return live[(live.index(self.index) - 1) % len(live)]

    @property
    def mirror_index(self) -> int | None:
        """The member this one mirrors to (the live one after it), ``None`` alone."""
        return self.table.next_fit(self.index)

    def run(self) -> int:
        """Filter, mirror links, own mirror, listener; print ``ready``; serve until killed."""
        nft = self._nft = BucketFilter(LibNft(), self.vip, self.port, self.buckets)
        nft.install([] if self.joining else self.owned)  # a newcomer is given its buckets
        if self.joining:
            self._enter()
        self._filtered = set() if self.joining else set(self.owned)
        many = len(self.table.members) > 1
        owner = self._owner = Primary(self.vip, self.port, self.mirror, self.docroot, self.config,
                                      lan_dev=self.dev, alone=threading.Event() if many else None,
                                      stand_down=lambda: not carrier(self.dev),
                                      stall=self.stall, self_fence=self.fence)  # fmt: skip
        owner.lease.grace = ALONE_WAIT_S
        # with a ring it may re-form (a death, a join): each connection keeps its shadow
        owner.readopt = bool(self.ring) and many
        store = self.config.session_store if self.config is not None else None
        if isinstance(store, SharedSessionStore) and self.ring:
            # the mirror has each session from the updates; the other members from this
            store.on_put = SessionGossip(self._peers).start().offer
        if many:
            self._mirror_predecessor(self.predecessor, self.listen_on, self.fence_port)
        control = _connect(owner) if self.mirror is not None else None
        self._linked = True  # from now on its keepalives judge its mirror
        listener = owner.listen()
        self._own(self.owned)  # a newcomer's buckets, once it listens
        signal.signal(signal.SIGUSR1, lambda *_: owner.fence_self(
            "on request (SIGUSR1): the successor takes this member's buckets over", leaving=True))
        if control is not None:
            self._beat(control)
        say(f"ready member {self.index}/{len(self.table.members)} owns {len(self.owned)} of "
            f"{self.buckets} buckets")  # fmt: skip
        while True:
            sock, _ = listener.accept()
            spawn(owner.serve_one, sock)

    def _peers(self) -> list[tuple[str, int]]:
        """Every other live member's cluster listener (where sessions are handed on)."""
        with self._ring_lock:
            live = [m for m in self.table.members if m not in (self.index, self.mirror_index)]
        return [(self.ring[m], self.listen_on[1]) for m in live]

    def _beat(self, link: socket.socket) -> None:
        assert self._owner is not None
        # the member this link reaches: its silence can be no other's death
        try:
            peer = link.getpeername()[0]
        except OSError:  # reset already: the heartbeat's first send fails and says so
            peer = None
        with self._ring_lock:
            beats_for = next((m for m in self.table.members if m < len(self.ring)
                              and self.ring[m] == peer), self.mirror_index)  # fmt: skip
        silent = (lambda reason: self._mirror_silent(reason, beats_for)) if self.ring else None
        spawn(self._owner.heartbeat, link, silent, name="heartbeat")

    def _mirror_predecessor(self, pred: int, listen_on: tuple[str, int],
                            fence_port: tuple[str, str] | None) -> None:  # fmt: skip
        """Take ``pred``'s links on ``listen_on``, hear its clients on the LAN, watch for its
        death (its buckets: :attr:`_theirs`, grown when it inherits another member's)."""
        theirs = self._theirs.setdefault(pred, set(self.table.owned_by(pred)))
        backup = Backup(self.vip, self.port, listen_on, self.dev, self.docroot,
                        self.config, fence_port=fence_port, stall=self.stall,
                        controls=Controls(fence=self.fence))  # fmt: skip
        backup.arm_fence()
        backup.tracker = FlowTracker((self.vip, self.port), keep=lambda client: bucket_of(
            client[0], client[1], self.buckets) in theirs, recent=self._recent)  # fmt: skip
        backup.on_mirrored = lambda client: self._learn(pred, client)
        backup.on_dead, backup.on_join = self._told_dead, self._on_join
        backup.on_release = lambda: self._retire(pred)
        self._watching[pred] = backup.tracker
        self._watches[pred] = backup
        sniffer = Sniffer(packet_socket(self.dev, service=backup.tracker.service),
                          backup.tracker).start()
        backup.start_links()
        spawn(self._watch, backup, sniffer, pred, name=f"predecessor-{pred}")

    def _watch(self, backup: Backup, sniffer: Sniffer, pred: int) -> None:
        owner, nft = self._owner, self._nft
        assert owner is not None and nft is not None
        realtime_thread()  # the takeover runs first when the death comes
        while not backup.death.wait(1.0):
            if self._watches.get(pred) is not backup:  # retired (a join): no death to come
                sniffer.stop()
                return
        woke = time.monotonic()  # the death heard; "detected" is when the fence begins
        # Each member can see the other die (two members: each is the other's mirror); only
        # one may fence the other. A member whose own port is down has been fenced: it never
        # fences, it stands down. The higher id of two waits a little first, so that when both
        # see a death at once (the cluster LAN cut, both alive) the lower id fences it first --
        # unless the other's kernel refuses its listener: its process is gone.
        if self.index > pred and self.mirror_index == pred and owner.buddy is not None \
                and not refused(owner.buddy):  # fmt: skip
            time.sleep(TIE_BREAK_S)
        if not carrier(self.dev):
            owner.fence_self(f"member {pred} looked dead, but this member's own "
                             "port is down: fenced")  # fmt: skip
        if self.takeover:
            backup.fence()  # before any wait below (_chain_for_takeover): SILENT_WAIT_S
        theirs = set(self._theirs[pred])
        if self._declare_dead(pred):
            owner.go_alone()  # the dead member was this one's mirror too
            spawn(self._retarget, name="retarget")  # to the next, if any is left
        self._tell_dead(pred)
        if not self.takeover or (self.members > 2 and not self.ring):
            say(f"DEAD member {pred}: {backup.reason} (its buckets are not taken "
                "over" + (" with more than two members without --ring)" if self.takeover
                          else ")"))  # fmt: skip
            return
        gc.disable()  # no collection pause between the death and the last resume
        # the dead member's buckets, and those of every connection it held (one it had taken
        # over from a member that died just before, which this one may not know dead yet)
        backup.claim = lambda: self._own(theirs | {bucket_of(ip, port, self.buckets)
                                                   for ip, port in list(backup.states)})
        # every restored connection goes to this member's own mirror before a byte of it
        # leaves (adopt), unless the dead member was that mirror: then they go on alone
        backup.chain = self._chain_for_takeover(owner)
        restored, report = backup.take_over(sniffer)
        report["member"], report["woke"] = pred, woke
        self._own(self.owned)  # buckets the table gave it with no connection in them too
        self._gain_predecessor(pred)
        backup.serve_taken_over(None, restored, report)  # also re-enables gc

    def _learn(self, pred: int, client: tuple[str, int]) -> None:
        """``pred`` mirrors ``client``'s connection to this member: if its bucket is another
        member's, ``pred`` took that member over (a death this member may not have judged
        yet), so its watch keeps every connection of that member's buckets from now on, with
        the bytes heard of them (:meth:`FlowTracker.promote
        <sslacc_sim.aio.linux.sniff.FlowTracker.promote>`)."""
        with self._ring_lock:
            owner = self.table.owner[bucket_of(client[0], client[1], self.buckets)]
            theirs = self._theirs.get(pred)
            if theirs is None or owner in (pred, self.index) or \
                    set(self.table.owned_by(owner)) <= theirs:  # fmt: skip
                return
            theirs.update(self.table.owned_by(owner))
        self._watching[pred].promote()

    def _chain_for_takeover(self, owner: Primary) -> Primary | None:
        """Where the connections taken over go first: this member's own mirror (``owner``),
        unless it is dead too -- declared so, or silent, and then declared so within the wait
        for this member's verdict on it (two deaths close together) -- then nowhere: alone."""
        def alone() -> bool:
            return owner.alone is not None and owner.alone.is_set()

        if not alone() and time.monotonic() - owner.answered_at > DEAD_AFTER_S:
            assert owner.alone is not None
            owner.alone.wait(ALONE_WAIT_S)
        return owner if self.mirror_index is not None and not alone() else None

    def _own(self, buckets: Iterable[int]) -> None:
        """Add ``buckets`` to the filter, those it does not hold yet (one transaction)."""
        assert self._nft is not None
        with self._ring_lock:
            new = set(buckets) - self._filtered
            self._filtered |= new
        self._nft.own(new)

    def _declare_dead(self, dead: int) -> bool:
        """Apply ``dead``'s death to this member's table (once; its buckets go to their heir,
        whose watched set grows); whether ``dead`` was this member's mirror."""
        with self._ring_lock:
            if dead not in self.table.members or dead == self.index:
                return False
            was_mirror = self.table.next_fit(self.index) == dead
            lost = self.table.owned_by(dead)
            self.table.remove(dead)
            heir = self.table.owner[lost[0]] if lost else None
            if heir in self._theirs:
                self._theirs[heir].update(lost)
                # connections of those buckets heard but not kept until now: kept from now on
                self._watching[heir].promote()
            return was_mirror

    def _gain_predecessor(self, old: int) -> None:
        """After ``old``'s death: mirror the member now before this one, if that changed."""
        new = self.predecessor
        if not self.ring or new in (self.index, old) or new in self._theirs:
            return
        self._mirror_predecessor(new, (self.listen_on[0], link_port(self.listen_on[1], new, False)),
                                 self._fence_for(new))  # fmt: skip
        say(f"PREDECESSOR member {new}")
        # one that never links (a newcomer whose master died before it answered) is dead
        spawn(self._expect_link, new, name="gained-link")

    def _fence_for(self, member: int) -> tuple[str, str] | None:
        """The switch's namespace and ``member``'s port there (``None``: no fence known)."""
        if self.fence_port is None or len(self.switch_ports) <= member:
            return None
        return self.fence_port[0], self.switch_ports[member]

    def _mirror_silent(self, reason: str, of: int | None) -> bool:
        """The heartbeat's call when the mirror ``of`` it beats for stops answering (three or
        more members: with two, the predecessor's watch decides): judge it in
        :meth:`_verdict`, the keepalives going on meanwhile unless the link itself failed
        (``True``: the heartbeat ends). A mirror that is not the table's any more is not
        judged here, and neither is the table's, which this link never reached: a join put a
        newcomer before it (this member's re-target to the newcomer is under way), or it was
        declared dead already (another member told this one); its own successor judges it,
        and the newcomer holds this member's connections from the re-target on."""
        if of is not None and of != self.mirror_index:
            say(f"OLD MIRROR member {of} silent: {reason} (the mirror is member "
                f"{self.mirror_index} now)")  # fmt: skip
            return True
        if len(self.table.members) <= 2:
            with self._ring_lock:
                mirror = self.mirror_index
            if mirror is not None and self._unwatched_and_gone(mirror, reason):
                self._verdict(reason, None)  # at once: its listener refuses
                return True
            if mirror is not None:
                self._unheard(mirror, reason)
            return False
        if reason.startswith("keepalive link"):  # nothing more can be sent on it
            self._verdict(reason, None)
            return True
        if not self._judging:
            self._judging = True
            spawn(self._verdict, reason, time.monotonic(), name="verdict")
        return False

    def _unwatched_and_gone(self, mirror: int, reason: str) -> bool:
        """With two members the predecessor's watch judges the mirror -- unless the mirror
        became the predecessor in a takeover still under way (a third member died just
        after it): no watch of it exists yet. Then its failed keepalive link and a listener
        that refuses (its process is gone, :meth:`_wait_before_verdict`) are its death."""
        owner = self._owner
        return (mirror not in self._watches and reason.startswith("keepalive link")
                and owner is not None and owner.buddy is not None and refused(owner.buddy))

    def _unheard(self, dead: int, reason: str) -> None:
        """``dead`` failed (this member's heartbeat to it, or another member says so): if it
        is this member's predecessor and its watch has had no link from it -- it became the
        predecessor when a third member died, and died before it linked here -- no link of
        that watch will ever show its death, so this is its death."""
        watch = self._watches.get(dead)
        if watch is None or watch.beaten.is_set() or watch.death.is_set():
            return
        say(f"MIRROR DEAD member {dead}: {reason} (no link from it since it became the "
            "predecessor: its watch takes it over)")  # fmt: skip
        watch.die(f"unheard predecessor: {reason}")

    def _tell_dead(self, dead: int) -> None:
        """Tell every other live member that this one judged ``dead`` dead (a ``dead`` frame
        on a link of its own to each one's first listener), in the background: with four or
        more members some are neither its predecessor nor its successor, and only their own
        table tells them whom they would inherit next."""
        if not self.ring:
            return
        with self._ring_lock:
            peers = [(self.ring[m], self.listen_on[1]) for m in self.table.members
                     if m != self.index]  # fmt: skip
        for peer in peers:  # one thread each: a hung member holds up no other's notice
            spawn(send_frame_to, peer, dead_frame(dead), name=f"tell-dead-{dead}")

    def _told_dead(self, dead: int) -> None:
        """Another member judged ``dead`` dead: this member applies it to its table, unless
        ``dead`` is one of its neighbours, which its own links and keepalives judge (with one
        exception: :meth:`_unheard`)."""
        with self._ring_lock:
            if dead not in self.table.members or dead == self.index:
                return
            neighbour = dead in (self.predecessor, self.mirror_index)
        if neighbour:
            if not self._unlinked_newcomer(dead):
                self._unheard(dead, "another member judged it dead")
            return
        self._declare_dead(dead)
        say(f"TOLD DEAD member {dead}")

    def _verdict(self, reason: str, since: float | None) -> None:
        """Wait until a member that took this one over would have fenced it; then an answer
        since ``since`` -- the mirror lives; own port down -- this member was fenced (or cut):
        fence self; else the mirror is dead: go on alone, and mirror to the next member."""
        owner = self._owner
        assert owner is not None
        realtime_thread()  # a verdict thread too: its connections wait for it
        wait = self._wait_before_verdict(since)
        time.sleep(wait)  # the lease may run out meanwhile: nothing is written
        if since is not None and owner.answered_at >= since:
            self._judging = False
            return
        if not carrier(self.dev):
            owner.fence_self(f"the mirror looked dead ({reason}), but this member's own port "
                             "is down: fenced")  # fmt: skip
        owner.stop_heartbeat()
        dead = self.mirror_index
        if dead is None:  # alone already: every other member was declared dead meanwhile
            self._judging = False
            return
        self._declare_dead(dead)
        self._tell_dead(dead)
        owner.go_alone()
        self._own(self.owned)  # when a member it watched died just before, unknown till now
        self._judging = False
        say(f"MIRROR DEAD member {dead}: {reason} (judged after {wait:g} s)")
        spawn(self._retarget, name="retarget")

    def _wait_before_verdict(self, since: float | None) -> float:
        """How long :meth:`_verdict` waits ("Judging a mirror" in the module docstring): none if
        the link failed and the mirror's listener refuses (its process is gone);
        :data:`SILENT_WAIT_S` if this member may have been stopped, or its mirror's process is
        there although its keepalive link failed (the mirror judged this member dead); else
        :data:`QUIET_WAIT_S`."""
        owner = self._owner
        assert owner is not None and owner.buddy is not None
        if since is None and refused(owner.buddy):
            # the keepalive link failed and the mirror's process is gone: it can fence this
            # member no more, and a fence it made is down already (the carrier check finds it)
            return 0.0
        if not owner.ran_through(RAN_THROUGH_S) or since is None:
            return SILENT_WAIT_S
        return QUIET_WAIT_S

    def _retarget(self, joined: tuple[str, int] | None = None) -> None:
        """Link to the new mirror (the dead one's successor, listening for this member once it
        has taken the dead one over; or ``joined``, a newcomer's first listener: the old
        mirror lives), hand it the session table, beat on."""
        owner, new = self._owner, self.mirror_index
        assert owner is not None
        if new is None:
            return  # alone for good
        address = joined or (self.ring[new], link_port(self.listen_on[1], self.index, False))
        deadline = time.monotonic() + RETARGET_WITHIN_S
        while True:
            try:
                link = owner.retarget(address, old_lives=joined is not None)
                break
            except OSError as exc:
                if joined is not None and new not in self.table.members:
                    return  # the newcomer died before this member linked to it
                if time.monotonic() > deadline:
                    print(f"ERROR member {self.index}: no new mirror at {address}: {exc!r}",
                          file=sys.stderr, flush=True)  # fmt: skip
                    return
                time.sleep(0.05)
        store = self.config.session_store if self.config is not None else None
        if isinstance(store, SharedSessionStore):  # the new mirror resumes them after a death
            hand_sessions(owner.link, store, "the new mirror")
        self._beat(link)
        say(f"MIRROR member {new}")


def _connect(owner: Primary) -> socket.socket:
    """The first link to the mirror, retried while its member is still starting."""
    deadline = time.monotonic() + CONNECT_WITHIN_S
    while True:
        try:
            return owner.link()
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run_member(member: Member) -> int:
    """Serve as ``member`` until killed (:meth:`Member.run`)."""
    try:
        return member.run()
    except OSError as exc:
        print(f"ERROR member {member.index}: {exc!r}", file=sys.stderr, flush=True)
        return 1

