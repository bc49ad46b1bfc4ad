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

**Not yet** (``docs/sslacc-cluster.md``, "Buckets"): with three members a death is reported
(``DEAD ...``) and not taken over -- the dead member was also the mirror of another member,
which would have to be told (the master and its table epochs, :mod:`sslacc_sim.membership`)
before it could go on -- and joins and leaves come after that.
"""

from __future__ import annotations

import gc
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tls12 import ServerConfig

from ...buckets import BucketTable
from .backup import Backup
from .buckets import BucketFilter, LibNft, bucket_of
from .primary import Primary, realtime_thread
from .service import ALONE_WAIT_S, Docroot
from .sniff import FlowTracker, Sniffer, packet_socket

__all__ = ["Member", "run_member", "carrier", "CONNECT_WITHIN_S", "TIE_BREAK_S"]

#: Seconds a member waits for its mirror's listener at start (members start together).
CONNECT_WITHIN_S = 30.0
#: Seconds the higher-id member waits before it fences the other (two keepalive intervals).
TIE_BREAK_S = 0.1


@dataclass
class Member:
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
    table: BucketTable = field(init=False)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.members:
            raise ValueError(f"member index {self.index} outside 0..{self.members - 1}")
        if (self.mirror is None) != (self.members == 1):
            raise ValueError("a mirror address is needed exactly when there are other members")
        self.table = BucketTable(self.members, self.buckets)

    @property
    def owned(self) -> list[int]:
        """The buckets this member serves."""
        return self.table.owned_by(self.index)

    @property
    def predecessor(self) -> int:
        """The member whose buckets this one mirrors."""
        return (self.index - 1) % self.members

    def run(self) -> int:
        """Filter, mirror links, own mirror, listener; print ``ready``; serve until killed."""
        nft = BucketFilter(LibNft(), self.vip, self.port, self.buckets)
        nft.install(self.owned)
        owner = Primary(self.vip, self.port, self.mirror, self.docroot, self.config,
                        lan_dev=self.dev,
                        alone=threading.Event() if self.members > 1 else None,
                        stand_down=lambda: not carrier(self.dev))  # fmt: skip
        owner.lease.grace = ALONE_WAIT_S
        if self.members > 1:
            self._mirror_predecessor(nft, owner)
        control = _connect(owner) if self.mirror is not None else None
        listener = owner.listen()
        if control is not None:
            threading.Thread(target=owner.heartbeat, args=(control,), daemon=True,
                             name="heartbeat").start()  # fmt: skip
        print(f"ready member {self.index}/{self.members} owns {len(self.owned)} of "
              f"{self.buckets} buckets", flush=True)  # fmt: skip
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=owner.serve_one, args=(sock,), daemon=True).start()

    def _mirror_predecessor(self, nft: BucketFilter, owner: Primary) -> None:
        """Take the predecessor's links, hear its clients on the LAN, watch for its death."""
        theirs = set(self.table.owned_by(self.predecessor))
        backup = Backup(self.vip, self.port, self.listen_on, self.dev, self.docroot,
                        self.config, fence_port=self.fence_port)  # fmt: skip
        backup.claim = lambda: nft.own(theirs)
        backup.arm_fence()
        backup.tracker = FlowTracker((self.vip, self.port), keep=lambda client: bucket_of(
            client[0], client[1], self.buckets) in theirs)  # fmt: skip
        sniffer = Sniffer(packet_socket(self.dev), backup.tracker).start()
        backup.start_links()
        threading.Thread(target=self._watch, args=(backup, owner, sniffer), daemon=True,
                         name="predecessor").start()  # fmt: skip

    def _watch(self, backup: Backup, owner: Primary, sniffer: Sniffer) -> None:
        realtime_thread()  # the takeover runs first when the death comes
        backup.death.wait()
        # Each member can see the other die (two members: each is the other's mirror); only
        # one may fence the other. A member whose own port is down has been fenced: it never
        # fences, it stands down. The higher id waits a little first, so that when both see a
        # death at once (the cluster LAN cut, both alive) the lower id fences it first.
        if self.index > self.predecessor:
            time.sleep(TIE_BREAK_S)
        if not carrier(self.dev):
            owner.fence_self(f"member {self.predecessor} looked dead, but this member's own "
                             "port is down: fenced")  # fmt: skip
        if self.members == 2:
            owner.go_alone()  # the dead member was this one's mirror too
        if not self.takeover or self.members > 2:
            print(f"DEAD member {self.predecessor}: {backup.reason} (its buckets are not taken "
                  "over" + (" with more than two members yet)" if self.takeover else ")"),
                  flush=True)  # fmt: skip
            return
        gc.disable()  # no collection pause between the death and the last resume
        restored, report = backup.take_over(sniffer)
        report["member"] = self.predecessor
        backup.serve_taken_over(None, restored, report)  # also re-enables gc


def carrier(dev: str) -> bool:
    """Whether ``dev`` has a link partner: a veth whose switch port was taken down (the fence)
    or whose own end is down (a cut) has none."""
    try:
        return (Path("/sys/class/net") / dev / "carrier").read_text().strip() == "1"
    except OSError:
        return False  # down interfaces refuse the read (EINVAL)


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

