"""Joins of the bucket layout: a member that starts into a running ring (SSLACC §4).

The paper's master moves *idle* buckets -- buckets no connection is in -- to a newcomer until
the load is even; moving a busy bucket would mean moving its connections. On Linux only a
bucket's owner knows whether it is idle (its kernel holds the connections, some not yet
accepted), so the master decides *how many* buckets each member gives and each donor decides
*which*. One join at a time, in this order:

1. The newcomer ``N`` (``node member --join``, with every member's cluster address in
   ``--ring``) sends a ``join`` frame -- its id, cluster address and switch port -- to the
   members in id order; the first that answers is the master (the lowest live id). Its
   filter owns nothing yet.
2. The master works out each member's share (:func:`shares`: ``N`` ends with ``B / (n + 1)``
   buckets, taken one at a time from whoever holds the most) and asks each donor for that many
   idle buckets (``give``; itself directly). A donor picks buckets its kernel holds no
   connection of (:func:`busy_buckets`: ``/proc/net/tcp``, any state but LISTEN, TIME_WAIT
   and CLOSE), takes them out of its filter, looks again, and takes back any that a SYN
   reached in between; it answers with the ones it gave (``given``).
3. The master applies the join to its table (:func:`admit`), sends it to every other member
   (``joined``, answered once applied), and answers ``N`` with the whole table (the wire form
   of :mod:`sslacc_sim.membership`).
4. Every member applies ``joined``: ``N``'s address, the new owners, each bucket's mirror in
   the larger ring; no watch keeps the moved buckets any more. ``N``'s successor ``S`` starts
   a watch for ``N``. ``N``'s predecessor ``P`` *re-targets*: it mirrors to ``N`` from now on,
   each running connection handed to ``N`` in one ``adopt`` and its old link to ``S`` ended
   with ``moved``, its old keepalive link with ``release``, so that ``S`` retires its watch of
   ``P`` without a death (:meth:`Primary.retarget
   <sslacc_sim.aio.linux.primary.Primary.retarget>` with ``old_lives``).
5. ``N`` links to ``S``, watches ``P``, listens, and owns its buckets in its filter.

Between a donor's giving a bucket up and ``N``'s filter taking it (milliseconds), a SYN of
that bucket finds no owner and is dropped; its client sends it again after its SYN timer (1 s).
No connection is lost. A donor whose buckets no ``joined`` gave away within
:data:`JOIN_WITHIN_S` (the master or the newcomer died first) serves them again. An id joins once: a node whose member died or left does not come back
under the same id (every member keeps what it knew of it): its node joins again under a fresh
one, its ring naming the node twice (:func:`sslacc_sim.aio.linux.cluster.revive`).

**A newcomer that dies during its join** (before or just after the master's answer) never
links to ``S``, so no link of ``S``'s watch can fail: ``S`` judges it dead when it has had no
keepalive from it within :data:`LINK_WITHIN_S` of its ``joined`` (:meth:`Joining._expect_link`),
fences it and takes its buckets over (no connection is in them yet), and tells every member.
``P``, whose re-target to ``N`` is still trying, forgets ``N`` when told
(:meth:`Joining._unlinked_newcomer`): its connections still mirror to ``S``.

**The master's death during a join.** The master ``M`` is always ``N``'s successor ``S`` (ids
only grow, and the ring is ordered by id), so its death is that of ``N``'s mirror and of
``P``'s old mirror. Four rules let the survivors agree, wherever the join was:

* every member that applies ``joined`` passes it on to every other member
  (:func:`~.joinwire.relay`), so if any survivor applied it, all do; a join of an id known
  before is never applied again;
* ``N`` asks the ring again for :data:`JOIN_RETRY_S` when no member answered (``M`` died
  before it did). ``M`` sends ``N`` a ``wait`` frame every :data:`~.joinwire.BEAT_S` while it
  admits it, and ``N`` gives up on a master silent for :data:`~.joinwire.SILENT_S` (hung, or
  its cluster link gone: its question would otherwise wait out :data:`JOIN_WITHIN_S`, and
  with it every gift to ``M``'s try; a killed master's kernel ends it at once). ``M``'s successor, master once it has judged the death,
  answers a newcomer its table holds already with that table, and admits one it does not
  know afresh (a donor asked again for the same newcomer serves what it gave the first time
  at once, and a member the new try asks nothing of is told ``ungive``: its gift to the first
  try would otherwise wait :data:`JOIN_WITHIN_S` unserved). A donor makes one gift at a time,
  and an ``ungive`` that arrives while a gift is made (``M`` died while it was asked) waits for
  it; a ``give`` from a master of lower id than one heard before for that newcomer comes from a
  try that is over and is refused (:meth:`Joining._try`);
* ``N``, told that ``M`` died before its first link reached it, links to the next member
  instead (:meth:`Joining._unlinked_newcomer`), which gained ``N`` as its predecessor when it
  took ``M`` over and expects its link within :data:`LINK_WITHIN_S` (else ``N`` is dead to
  it: it takes ``N``'s buckets over);
* ``P``'s heartbeat on ``M``'s old link judges nobody once the table's mirror is ``N``: ``M``'s
  own successor judges ``M``.

**A donor that fails before it answers ``give``** (it dies, refuses, or sends garbage): the
master gives the join up. It tells every donor it asked (``ungive``, answered once done) to
serve what it gave at once, takes its own gift back, and only then refuses the newcomer, so
that no donor's take-back can meet a later attempt's gift. A donor that dies while it is asked
is given up on as soon as the cluster declares it dead, not after the link's timeout
(:meth:`Joining._ask_donor`). The newcomer asks the ring again (:data:`JOIN_RETRY_S`), and the
master shares the buckets out among the members left. A newcomer that left before the join is
applied (its kernel closed its question: it died) is given up on the same way, rather than
admitted with buckets nobody serves until its successor judges it (:func:`still_waiting`).

A join's frames, the question one member asks another and the kernel's connection list a
donor reads are in :mod:`~sslacc_sim.aio.linux.joinwire`.

``N`` learns the sessions its predecessor hands it and, from then on, every new one; a
resumption of an older session that hashes to ``N`` is a full handshake.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...buckets import BucketTable
from ...errors import SslaccError
from ...membership import TableError, decode_table, encode_table
from .buckets import BucketFilter
from .joinwire import (
    ASK_S,
    MAX_MEMBER,
    RELAY_S,
    SILENT_S,
    JoinError,
    ask,
    beating,
    busy_buckets,
    connections,
    join_frame,
    joined_frame,
    read_buckets,
    read_count,
    read_newcomer,
    relay,
    still_waiting,
    with_entry,
)
from .report import say

if TYPE_CHECKING:
    from .backup import Backup
    from .primary import Primary
    from .sniff import FlowTracker

__all__ = ["JoinError", "Joining", "shares", "admit", "busy_buckets", "connections",
           "join_frame", "joined_frame", "read_newcomer", "read_buckets", "ask", "link_port",
           "JOIN_WITHIN_S", "JOIN_RETRY_S", "LINK_WITHIN_S"]

#: Seconds a newcomer waits for the master's answer (the donors' checks and every member's
#: acknowledgement of ``joined`` come first).
JOIN_WITHIN_S = 30.0
#: Seconds a newcomer's successor waits, from its ``joined``, for the newcomer's first
#: keepalive (the master answers the newcomer once every member applied the join, each asked
#: within :data:`ASK_S`): one that has not linked by then died during its join.
LINK_WITHIN_S = ASK_S
#: Seconds a newcomer goes on asking the ring when no member answers its join with the table:
#: the master died during the join, and its successor answers once it has judged the death
#: (a newcomer it admitted already gets the table again).
JOIN_RETRY_S = 5.0
_RETRY_EVERY_S = 0.1
#: One join at a time (one member per process: the master's lock).
_ADMITTING = threading.Lock()


# -- the table --------------------------------------------------------------------------


def shares(table: BucketTable, newcomer: int) -> dict[int, int]:
    """How many buckets each member gives ``newcomer``: it ends with ``buckets // (n + 1)``,
    taken one at a time from the member holding the most (the lower id on a tie)."""
    held = {m: len(table.owned_by(m)) for m in table.members if m != newcomer}
    give: Counter[int] = Counter()
    for _ in range(table.buckets // (len(held) + 1)):
        donor = max(held, key=lambda m: (held[m], -m))
        held[donor] -= 1
        give[donor] += 1
    return dict(give)


def admit(table: BucketTable, newcomer: int, buckets: Iterable[int]) -> None:
    """Apply a join to ``table``: ``newcomer`` is a member and owns ``buckets``; every bucket
    gets its mirror in the larger ring (:meth:`BucketTable.add
    <sslacc_sim.buckets.BucketTable.add>`'s rule, with buckets the donors chose)."""
    moved = sorted(set(buckets))
    if newcomer in table.members:
        raise JoinError(f"member {newcomer} is a member already")
    if any(not 0 <= b < table.buckets for b in moved):
        raise JoinError(f"a bucket outside 0..{table.buckets - 1}")
    table.members.append(newcomer)
    table.members.sort()
    for b in moved:
        table.owner[b] = newcomer
    for b in range(table.buckets):
        table.mirror[b] = table.next_fit(table.owner[b])


class Joining:
    """What a :class:`~sslacc_sim.aio.linux.member.Member` does in a join (module docstring):
    as the newcomer (:meth:`_enter`), as the master (:meth:`_admit`), as a donor
    (:meth:`_give`) and as any member (:meth:`_joined`, and :meth:`_retire` for ``S``)."""

    index: int
    buckets: int
    vip: str
    port: int
    listen_on: tuple[str, int]
    mirror: tuple[str, int] | None
    ring: tuple[str, ...]
    switch_ports: tuple[str, ...]
    fence_port: tuple[str, str] | None
    table: BucketTable
    _ring_lock: threading.Lock
    _nft: BucketFilter | None
    _filtered: set[int]
    _theirs: dict[int, set[int]]
    _watching: dict[int, FlowTracker]
    _watches: dict[int, Backup]
    _owner: Primary | None
    _gifts: dict[int, list[int]]
    """Per newcomer: the buckets this member gave its join (:meth:`_give`)."""
    _tries: dict[int, int]
    """Per newcomer: the highest master id whose try asked this member anything (:meth:`_try`)."""
    _gift_lock: threading.RLock
    """A gift and its take-back, one at a time (:meth:`_give`, :meth:`_take_back_gift`)."""
    _linked: bool
    """This member's first link to its mirror is made (:meth:`_unlinked_newcomer`)."""
    #: The kernel's socket list :meth:`_give` reads (twice); a test points it at a file.
    sockets: Path = Path("/proc/net/tcp")

    # -- the newcomer --

    def _enter(self) -> None:
        """Ask the members in id order to let this one in; the first that answers is the
        master. Its table, with this member in it, becomes this member's; the mirror is the
        member after it, the fence its predecessor's port."""
        say(f"JOINING as member {self.index}")  # the campaign's join-kill draws its death from here
        deadline = time.monotonic() + JOIN_RETRY_S
        while True:
            refusals = self._ask_the_ring()
            if not refusals:
                return
            if time.monotonic() > deadline:
                raise JoinError("no member let this one in: " + "; ".join(refusals)[:500])
            time.sleep(_RETRY_EVERY_S)  # the master died during the join: the next one answers

    def _ask_the_ring(self) -> list[str]:
        """One round of :meth:`_enter`: each member in id order until one answers with the
        table (then ``[]``); the refusals of a round that found no master."""
        request = join_frame(self.index, self.listen_on[0], self.switch_ports[self.index])
        refusals = []
        for m, address in enumerate(self.ring):
            if m == self.index or address == self.listen_on[0]:
                continue  # this node (a member that died here before, under another id)
            try:
                header, blob = ask((address, self.listen_on[1]), request, JOIN_WITHIN_S,
                                   silent=SILENT_S)  # fmt: skip
            except (OSError, JoinError) as exc:  # dead, dying, not the master: the next one
                refusals.append(f"member {m}: {exc}")
                continue
            if header["type"] != "table":
                raise JoinError(f"member {m} answered a join with {str(header['type'])[:20]!r}")
            try:
                self.table = decode_table(blob)[1]
            except TableError as exc:
                raise JoinError(f"member {m} sent a bad table: {exc}") from None
            if self.index not in self.table.members:
                raise JoinError(f"member {m}'s table leaves this member out")
            heir = self.table.next_fit(self.index)
            assert heir is not None  # two members at least: the master and this one
            self.mirror = (self.ring[heir], link_port(self.listen_on[1], self.index, False))
            self.fence_port = self._fence_for(self.predecessor)
            say(f"ENTERED via member {m}: owns {len(self.table.owned_by(self.index))} buckets")
            return []
        return refusals or ["no other member in the ring"]

    # -- every member: a join's frames (Backup.on_join) --

    def _on_join(self, header: dict[str, Any], link: socket.socket | None = None
                 ) -> tuple[dict[str, Any], bytes]:  # fmt: skip
        """Answer a join's frame from another member (asked on ``link``); a refusal says why."""
        try:
            if header["type"] == "join":
                waiting = None if link is None else (lambda: still_waiting(link))
                with beating(link):  # the newcomer gives up on a silent master (SILENT_S)
                    return self._admit(*read_newcomer(header), waiting=waiting)
            if header["type"] in ("give", "ungive"):
                to, by = header.get("to"), header.get("by")
                by = by if type(by) is int else None
                if header["type"] == "give":
                    given = self._give(read_count(header), to if type(to) is int else None, by)
                    return {"type": "given", "buckets": given}, b""
                if type(to) is not int:
                    raise JoinError("an ungive frame without a newcomer")
                self._take_back_gift(to, "the master gave the join up", by)
                return {"type": "applied"}, b""
            self._joined(header)
            return {"type": "applied"}, b""
        except (SslaccError, OSError) as exc:  # a join's error, the filter's (NftError)
            print(f"ERROR {str(header['type'])[:10]}: {exc!r}"[:300], file=sys.stderr, flush=True)
            return {"type": "refused", "reason": str(exc)[:300]}, b""

    def _admit(self, newcomer: int, address: str, switch_port: str, *,
               waiting: Callable[[], bool] | None = None) -> tuple[dict[str, Any], bytes]:  # fmt: skip
        """The master's part: each donor's share, the buckets they give, the table applied
        here and sent to every other member, then the whole table for the newcomer.
        ``waiting``: whether the newcomer still waits for the answer; one that left (its
        kernel closed its question's link: it died) before the join is applied is given up
        on, as a failed donor is, instead of admitted and judged by its successor after
        :data:`LINK_WITHIN_S`, while no member serves its buckets."""
        with _ADMITTING:
            with self._ring_lock:
                if self.table.master != self.index:
                    raise JoinError(f"not the master (member {self.table.master} is)")
                if newcomer in self.table.members and self.ring[newcomer] == address:
                    # admitted already, and the master that admitted it died before it
                    # answered: the join is done, the newcomer only lacks the table
                    say(f"ADMITTED member {newcomer} again: its master died before it answered")
                    return {"type": "table"}, encode_table(0, self.table)
                if newcomer < len(self.ring) or newcomer >= MAX_MEMBER:
                    # every member keeps what it knew of an id (its watch, its buckets):
                    # an id that was a member once does not come back
                    raise JoinError(f"member {newcomer} is or was a member: a node joins under "
                                    "an id never used")  # fmt: skip
                plan = shares(self.table, newcomer)
                others = [m for m in self.table.members if m != self.index]
            for m in [self.index, *others]:
                if m not in plan:  # a gift it made an earlier try (its master died) is served
                    self._ungive(m, newcomer, "a new try asked nothing of it")  # again now
            given: list[int] = []
            asked: list[int] = []
            for donor, count in sorted(plan.items()):
                asked.append(donor)  # a donor that fails may have given before it did
                try:
                    given += self._give(count, newcomer, self.index) if donor == self.index else \
                        self._ask_donor(donor, {"type": "give", "to": newcomer, "count": count,
                                                "by": self.index})  # fmt: skip
                except (OSError, SslaccError) as exc:
                    self._give_up(newcomer, asked)
                    raise JoinError(f"member {donor} did not give: {exc}") from None
            if waiting is not None and not waiting():
                self._give_up(newcomer, asked)
                raise JoinError(f"member {newcomer} left before its join was applied")
            frame = joined_frame(newcomer, address, switch_port, given)
            self._joined(frame)
            for m in others:  # before the newcomer's answer: its mirror listens for it then
                try:
                    ask((self.ring[m], self.listen_on[1]), frame)
                except (OSError, JoinError) as exc:
                    print(f"ERROR member {m} did not apply the join: {exc!r}"[:300],
                          file=sys.stderr, flush=True)  # fmt: skip
            with self._ring_lock:
                table = encode_table(0, self.table)
        say(f"ADMITTED member {newcomer}: {len(given)} buckets")
        return {"type": "table"}, table

    def _ask_donor(self, donor: int, frame: dict[str, Any]) -> list[int]:
        """The buckets ``donor`` gives (its answer to ``frame``). A donor the cluster declares
        dead while it is asked is given up on at once: a killed member's link may be cut, and
        the question would wait for the link's timeout, the newcomer with it."""
        out: list[list[int] | Exception] = []

        def run() -> None:
            try:
                out.append(read_buckets(ask((self.ring[donor], self.listen_on[1]), frame)[0]))
            except (OSError, SslaccError) as exc:
                out.append(exc)
            except Exception as exc:  # noqa: BLE001 - any other failure of the donor's answer
                out.append(JoinError(f"member {donor}'s answer: {exc!r}"[:300]))

        asking = threading.Thread(target=run, name="join-give", daemon=True)
        asking.start()
        while asking.is_alive():
            asking.join(_RETRY_EVERY_S)
            with self._ring_lock:
                gone = donor not in self.table.members
            if gone and asking.is_alive():  # (its late answer, if any, is dropped)
                raise JoinError(f"member {donor} died while it was asked")
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]

    def _give_up(self, newcomer: int, asked: list[int]) -> None:
        """The master's abort of a join (a donor failed): every donor in ``asked`` serves what
        it gave ``newcomer`` again before the newcomer hears the refusal (its next try, under
        this lock, cannot meet a late take-back). A donor declared dead is not told (its heir owns
        its buckets now); one that cannot be told serves its gift again after
        :data:`JOIN_WITHIN_S`, or when a new try asks it to give again."""
        for donor in asked:
            self._ungive(donor, newcomer, "the join was given up")
        say(f"GAVE UP the join of member {newcomer}")

    def _ungive(self, donor: int, newcomer: int, why: str) -> None:
        """Have ``donor`` (this member, or another told ``ungive``) serve again what it gave
        ``newcomer``, if anything; a donor declared dead is skipped, one that cannot be told
        is left to its own rules."""
        if donor == self.index:
            self._take_back_gift(newcomer, why, self.index)
            return
        with self._ring_lock:
            if donor not in self.table.members:
                return  # declared dead: its heir serves its buckets, gift and all
        try:
            ask((self.ring[donor], self.listen_on[1]),
                {"type": "ungive", "to": newcomer, "by": self.index}, RELAY_S)  # fmt: skip
        except (OSError, JoinError) as exc:  # dead or dying: its own rules take over
            print(f"ERROR member {donor} was not told to serve its gift again: {exc!r}"[:300],
                  file=sys.stderr, flush=True)  # fmt: skip

    def _take_back_gift(self, to: int, why: str, by: int | None = None) -> None:
        """Serve again at once what this member gave newcomer ``to`` (those of its buckets no
        ``joined`` gave away meanwhile); ``by``: the master that asks it (:meth:`_try`). A gift
        still being made is waited for, then taken back."""
        with self._gift_lock:
            if by is not None:
                self._try(to, by)
            before = self._gifts.pop(to, None)
            if not before:
                return
            with self._ring_lock:
                orphans = [b for b in before if self.table.owner[b] == self.index]
            self._own(orphans)
        say(f"TAKEN BACK {len(orphans)} buckets given to member {to}: {why}")

    def _try(self, to: int, by: int) -> None:
        """Master ``by`` asks this member something of newcomer ``to``'s join. A ``give`` from
        a lower id than a master heard before comes from a try that is over (its master died;
        a new master's id is higher) and is refused: processed after the new master's
        ``ungive`` (another link's frame), it would leave its gift out of every filter until
        :data:`JOIN_WITHIN_S`."""
        if by < self._tries.get(to, by):
            raise JoinError(f"a give of member {by}'s try for member {to}, over since member "
                            f"{self._tries[to]}'s")  # fmt: skip
        self._tries[to] = by

    def _give(self, count: int, to: int | None = None, by: int | None = None) -> list[int]:
        """A donor's part: up to ``count`` of its buckets that no connection is in, out of its
        filter (those a SYN reached while it looked stay). A second ``give`` for the same
        newcomer ``to`` comes from a new master (the first died during the join, before any
        member applied it) or a new try (the first was given up): the buckets given the first
        time are served again at once. ``by``: the master asking (:meth:`_try`). One gift at a
        time; a take-back waits for a gift under way (its master may die while it is made,
        and the new master's ``ungive`` come before it ends)."""
        with self._gift_lock:
            if to is not None and by is not None:
                self._try(to, by)
            return self._give_now(count, to)

    def _give_now(self, count: int, to: int | None) -> list[int]:
        nft = self._nft
        assert nft is not None
        if to is not None:
            self._take_back_gift(to, "asked again")
        with self._ring_lock:
            mine = [b for b in self.table.owned_by(self.index) if b in self._filtered]
        busy = busy_buckets(self.vip, self.port, self.buckets, self.sockets)
        chosen = [b for b in mine if b not in busy][:count]
        nft.disown(chosen)
        with self._ring_lock:
            self._filtered.difference_update(chosen)
        late = busy_buckets(self.vip, self.port, self.buckets, self.sockets) & set(chosen)
        self._own(late)
        given = [b for b in chosen if b not in late]
        if to is not None:
            self._gifts[to] = given
            say(f"GIVEN {len(given)} buckets to member {to}")
        threading.Thread(target=self._take_back, args=(given,), name="join-take-back",
                         daemon=True).start()  # fmt: skip
        return given

    def _take_back(self, given: list[int], after: float = JOIN_WITHIN_S) -> None:
        """If no ``joined`` gave ``given`` to a newcomer within ``after`` seconds (the master
        or the newcomer died before the join's end), serve them again: a bucket nobody owns
        would never be served."""
        time.sleep(after)
        with self._ring_lock:
            orphans = [b for b in given
                       if self.table.owner[b] == self.index and b not in self._filtered]
        if orphans:
            self._own(orphans)
            say(f"TAKEN BACK {len(orphans)} buckets given to a join that never ended")

    def _joined(self, header: dict[str, Any]) -> None:
        """Apply a join (once): the newcomer's address and port, its buckets, the mirrors;
        the newcomer's successor watches it, its predecessor re-targets to it."""
        newcomer, address, switch_port = read_newcomer(header)
        buckets = read_buckets(header)
        with self._ring_lock:
            if newcomer < len(self.ring) and self.ring[newcomer]:
                return  # applied before (a relay of it, or it died since): never again
            others = [self.ring[m] for m in self.table.members if m != self.index]
            self.ring = with_entry(self.ring, newcomer, address)
            self.switch_ports = with_entry(self.switch_ports, newcomer, switch_port)
            admit(self.table, newcomer, buckets)
            for theirs in self._theirs.values():
                theirs.difference_update(buckets)
            watch, retarget = self.predecessor == newcomer, self.mirror_index == newcomer
        say(f"JOINED member {newcomer}: owns {len(buckets)} buckets")
        # every member that applies a join passes it on: if the master dies having told only
        # some, the others still apply it (a second copy is not applied again)
        passed = {**header, "type": "joined"}
        for peer in others:  # (not ``address``: the newcomer's, used below)
            threading.Thread(target=relay, args=((peer, self.listen_on[1]), passed),
                             name="join-relay", daemon=True).start()  # fmt: skip
        if watch:
            self._mirror_predecessor(
                newcomer, (self.listen_on[0], link_port(self.listen_on[1], newcomer, False)),
                self._fence_for(newcomer))  # fmt: skip
            say(f"PREDECESSOR member {newcomer}")
            threading.Thread(target=self._expect_link, args=(newcomer,), name="join-link",
                             daemon=True).start()  # fmt: skip
        if retarget:
            threading.Thread(target=self._retarget, args=((address, self.listen_on[1]),),
                             name="join-retarget", daemon=True).start()  # fmt: skip

    def _expect_link(self, newcomer: int, within: float = LINK_WITHIN_S) -> None:
        """The newcomer's successor's part: a newcomer links here once the master answers it;
        one that has not within ``within`` seconds died during its join (before or just
        after the master's answer). Its watch would never see a link fail: it is judged dead
        here (:meth:`_unheard`), and this member takes its buckets over. The same holds for
        a predecessor this member gains when the ring re-forms after a death
        (:meth:`Member._gain_predecessor
        <sslacc_sim.aio.linux.member.Member._gain_predecessor>`): a newcomer whose master
        died before its answer reached it never links. One that is not the predecessor any
        more by then (a join put a newcomer between: it mirrors to the newcomer) and never
        linked is not judged: its watch is retired."""
        time.sleep(within)
        with self._ring_lock:
            moved = newcomer in self.table.members and self.predecessor != newcomer
            watch = self._watches.get(newcomer)
        if moved and watch is not None and not watch.beaten.is_set() \
                and not watch.death.is_set():  # fmt: skip
            # a join put a newcomer between since: the old predecessor mirrors to it, and
            # never had a reason to link here (no release comes from a member never linked)
            self._retire(newcomer)
            say(f"UNLINKED member {newcomer}: it never linked here, and member "
                f"{self.predecessor} is the predecessor now")  # fmt: skip
            return
        self._unheard(newcomer, f"no keepalive within {within:g} s of its join")

    def _unlinked_newcomer(self, dead: int) -> bool:
        """Another member judged ``dead``, this member's mirror by the table, dead. If this
        member never linked to it, nothing of this member's depends on it, and the table
        forgets it here (``True``; else this member's own keepalives judge it: ``False``):

        * a newcomer that died during its join, this member's re-target to it still trying:
          its connections still mirror to the old mirror, the newcomer's successor;
        * this member is the newcomer, and its mirror -- the master, the newcomer's successor
          -- died before the newcomer's first link reached it: the first link goes to the
          next member instead, which listens for it once it has taken the dead one over."""
        owner = self._owner
        with self._ring_lock:
            if dead != self.mirror_index or owner is None or owner.buddy is None:
                return False
            retargeting = owner.buddy[0] != self.ring[dead]
            if not retargeting and self._linked:  # its keepalives judge it
                return False
        self._declare_dead(dead)
        if retargeting:
            say(f"TOLD DEAD member {dead}: it died before this member mirrored to it")
            return True
        with self._ring_lock:
            heir = self.mirror_index
            if heir is not None:  # the first link (Member.run) tries this address from now on
                owner.buddy = (self.ring[heir], link_port(self.listen_on[1], self.index, False))
        say(f"TOLD DEAD member {dead}: the mirror died before this member's first link; "
            f"member {heir} instead")  # fmt: skip
        return True

    def _retire(self, pred: int) -> None:
        """``pred`` mirrors elsewhere now (``release``: a join put the newcomer between): its
        watch ends without a death, its listener closes (unless it is this member's first,
        where other members' frames arrive too)."""
        with self._ring_lock:
            self._theirs.pop(pred, set()).clear()  # its LAN record keeps nothing more
            self._watching.pop(pred, None)
            watch = self._watches.pop(pred, None)
        if watch is not None and watch.listen_on[1] != self.listen_on[1]:
            watch.stop_links()
        say(f"RELEASED by member {pred}")

    if TYPE_CHECKING:  # what Member provides: declared for the type checker only

        @property
        def predecessor(self) -> int: ...

        @property
        def mirror_index(self) -> int | None: ...

        def _own(self, buckets: Iterable[int]) -> None: ...

        def _mirror_predecessor(self, pred: int, listen_on: tuple[str, int],
                                fence_port: tuple[str, str] | None) -> None: ...  # fmt: skip

        def _retarget(self, joined: tuple[str, int] | None = None) -> None: ...

        def _unheard(self, dead: int, reason: str) -> None: ...

        def _declare_dead(self, dead: int) -> bool: ...

        def _fence_for(self, member: int) -> tuple[str, str] | None: ...


def link_port(base: int, predecessor: int, first: bool) -> int:
    """The port where a member takes member ``predecessor``'s links: ``base`` for the ring's
    first predecessor, ``base + 1 + predecessor`` for one it gains when the ring re-forms (the
    first listener stays with the Backup that took the dead member over)."""
    return base if first else base + 1 + predecessor
