"""The master's death during a join: the rules that let the ring agree afterwards.

The master is always the newcomer's successor (ids only grow, the ring is ordered by id), so
its death during a join is the death of the newcomer's mirror and of the old mirror of the
newcomer's predecessor (``docs/sslacc-cluster.md``, "the master's death during a join"). Each
rule is checked here in process, over loopback (members at 127.0.0.x, stand-ins answering
their cluster listeners); the campaign's ``master-kill`` mode checks them together on real
members at random instants:

* a member that applies ``joined`` passes it on to every other member, once, and never applies
  a join of an id it knew before (a relayed copy that arrives after the newcomer's death);
* the new master answers a newcomer the dead master admitted with the table again;
* a newcomer asks the ring again until a master answers;
* a newcomer whose mirror died before its first link links to the next member instead;
* a member's heartbeat on its old mirror, during the re-target to a newcomer, judges nobody;
* a donor asked again for the same newcomer serves what it gave the first time at once;
* a predecessor gained after the master's death that a join then moved away is not judged.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sslacc_sim.aio.linux.backup import Backup
from sslacc_sim.aio.linux.docroot import Docroot
from sslacc_sim.aio.linux.join import JoinError, admit, joined_frame, link_port
from sslacc_sim.aio.linux.member import Member
from sslacc_sim.aio.linux.mirror import recv_frame, send_frame
from sslacc_sim.aio.linux.primary import Primary
from sslacc_sim.buckets import BucketTable
from sslacc_sim.membership import decode_table, encode_table
from tests.sslacc_sim.aio.test_join_rules import _Donor

_VIP = "10.88.0.100"
_RING = ("127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14")

Answer = Callable[[dict[str, Any], int], "tuple[dict[str, Any], bytes] | None"]


@contextmanager
def _stand_in(address: str, port: int, answer: Answer) -> Iterator[list[dict[str, Any]]]:
    """A member's cluster listener at ``address:port`` that records each frame and answers it
    with ``answer(header, n)`` (``n``: frames before it; ``None``: close without an answer)."""
    heard: list[dict[str, Any]] = []
    server = socket.create_server((address, port))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                link, _ = server.accept()
            except TimeoutError:
                continue
            with link:
                frame = recv_frame(link)
                if frame is None:
                    continue
                reply = answer(frame[0], len(heard))
                heard.append(frame[0])
                if reply is not None:
                    send_frame(link, *reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield heard
    finally:
        stop.set()
        thread.join()
        server.close()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _applied(header: dict[str, Any], n: int) -> tuple[dict[str, Any], bytes]:
    return {"type": "applied"}, b""


def _member(index: int, port: int, tmp_path: Path, *, members: int = 3) -> Member:
    """Member ``index`` of ``members`` at ``_RING[index]:port``, not started (its rules only)."""
    return Member(index, members, 16, _VIP, 443, (_RING[index], port), (_RING[(index + 1) % members], port),
                  Docroot(tmp_path), None, ring=_RING[:members],
                  switch_ports=tuple(f"p{i}" for i in range(members)))  # fmt: skip


def _wait_for(heard: list[dict[str, Any]], n: int, within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while len(heard) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_join_is_relayed_once_to_every_other_member_and_never_applied_again(
        tmp_path: Path) -> None:  # fmt: skip
    """Member 1 of 0..2 applies the master's ``joined`` of 3, passes it on to 0 and 2, does
    not pass on (or apply) a second copy, and after 3's death a late copy does not bring 3
    back into its table."""
    port = _port()
    member = _member(1, port, tmp_path)
    frame = joined_frame(3, _RING[3], "p3", [1, 4])
    with _stand_in(_RING[0], port, _applied) as to_0, _stand_in(_RING[2], port, _applied) as to_2:
        member._joined(frame)
        _wait_for(to_0, 1)
        _wait_for(to_2, 1)
        assert [h["type"] for h in to_0] == ["joined"] and to_0[0]["member"] == 3
        assert to_2 == to_0 and to_2[0]["buckets"] == [1, 4]
        assert member.table.members == [0, 1, 2, 3] and member.table.owner[4] == 3
        member._joined(frame)  # the relay of another member: already applied
        member._declare_dead(3)
        member._joined(frame)  # a copy that arrives after the newcomer's death
        time.sleep(0.3)
        assert len(to_0) == 1 and len(to_2) == 1, "a join passed on more than once"
    assert member.table.members == [0, 1, 2], "a dead newcomer came back with a late copy"


def test_the_new_master_answers_a_newcomer_the_dead_master_admitted(tmp_path: Path) -> None:
    """Member 0 admitted 3, told member 1 (``joined``) and died before it answered 3: member 1,
    the new master, answers 3's join with the table it holds; another node that asks under
    id 3 is refused."""
    member = _member(1, _port(), tmp_path)
    member._declare_dead(0)
    # the join as _joined applies it (not called here: as 3's successor, member 1 would start
    # watching 3 on this host's LAN)
    member.ring, member.switch_ports = _RING, ("p0", "p1", "p2", "p3")
    admit(member.table, 3, [2, 5])
    header, blob = member._admit(3, _RING[3], "p3")
    table = decode_table(blob)[1]
    assert header["type"] == "table" and table.members == [1, 2, 3]
    assert table.owner[2] == 3 and table.owner[5] == 3
    with pytest.raises(JoinError, match="is or was a member"):
        member._admit(3, "127.0.0.99", "p3")


def test_a_newcomer_asks_the_ring_again_until_a_master_answers(tmp_path: Path) -> None:
    """The master (0) dies while it admits 3: its link closes without an answer, and member 1
    refuses (it has not judged 0 dead yet); on the second round member 1 is the master and
    answers with the table. The newcomer enters."""
    port = _port()
    table = BucketTable(4, 16)
    table.remove(0)

    def second_round_only(header: dict[str, Any], n: int) -> tuple[dict[str, Any], bytes]:
        if n == 0:
            return {"type": "refused", "reason": "not the master (member 0 is)"}, b""
        return {"type": "table"}, encode_table(0, table)

    newcomer = Member(3, 4, 16, _VIP, 443, (_RING[3], port), None, Docroot(tmp_path), None,
                      ring=_RING, switch_ports=("p0", "p1", "p2", "p3"), joining=True)  # fmt: skip
    with _stand_in(_RING[0], port, lambda h, n: None) as to_0, \
            _stand_in(_RING[1], port, second_round_only) as to_1:  # fmt: skip
        newcomer._enter()
    assert len(to_0) >= 1 and len(to_1) == 2
    assert newcomer.table.members == [1, 2, 3]
    assert newcomer.mirror == (_RING[1], link_port(port, 3, False))


def test_a_newcomer_whose_mirror_died_before_its_first_link_links_to_the_next(
        tmp_path: Path) -> None:  # fmt: skip
    """Newcomer 3's mirror is the master, 0. Told that 0 died before 3 ever heard it, 3
    forgets 0 and its first link goes to 0's successor, 1 (listening for 3 once it has taken 0
    over). A member whose first link is made leaves the judgement to its keepalives, even one
    that has had no answer yet (killed right after the start, its mirror's death is its
    verdict's: forgetting it here would end the heartbeat and judge nobody)."""
    port = _port()
    newcomer = _member(3, port, tmp_path, members=4)
    owner = newcomer._owner = Primary(_VIP, 443, (_RING[0], link_port(port, 3, False)),
                                      Docroot(tmp_path), None, alone=threading.Event())  # fmt: skip
    newcomer._told_dead(0)
    assert newcomer.table.members == [1, 2, 3]
    assert owner.buddy == (_RING[1], link_port(port, 3, False))

    linked = _member(3, port, tmp_path, members=4)
    owner = linked._owner = Primary(_VIP, 443, (_RING[0], link_port(port, 3, False)),
                                    Docroot(tmp_path), None, alone=threading.Event())  # fmt: skip
    linked._linked = True  # its first link is made (Member.run): its keepalives judge
    linked._told_dead(0)
    assert linked.table.members == [0, 1, 2, 3] and owner.buddy[0] == _RING[0]


def test_an_old_mirror_silent_during_a_re_target_is_judged_by_nobody_here(tmp_path: Path) -> None:
    """Member 2's mirror was 0; a join put 3 between them, and 2's re-target to 3 is under
    way when 0 dies. The heartbeat still on 0's link ends, and 2 judges nobody: not 3 (the
    table's mirror, alive) and not 0 (its own successor judges it) -- also when 2 was told of
    0's death before its heartbeat saw it (then judging the table's mirror would fence 3)."""
    member = _member(2, _port(), tmp_path)
    admit(member.table, 3, [1, 4])
    assert member._mirror_silent("keepalive link: ConnectionResetError()", 0) is True
    assert member.table.members == [0, 1, 2, 3] and not member._judging
    # told of 0's death first (by 0's successor), the heartbeat on 0's link fails after
    member._declare_dead(0)
    assert member._mirror_silent("keepalive link: ConnectionResetError()", 0) is True
    assert member.table.members == [1, 2, 3] and not member._judging


def test_a_donor_asked_again_for_the_same_newcomer_serves_its_first_gift_at_once(
        tmp_path: Path) -> None:  # fmt: skip
    """The master died after donor 0 gave buckets 0 and 3 to newcomer 3, before anyone applied
    the join; the new master asks 0 again: 0 and 3 are in its filter again before it gives."""
    donor = _Donor()
    assert donor._give(2, 3) == [0, 3] and donor._filtered == {6, 9, 12, 15}
    again = donor._give(1, 3)
    assert any(s.startswith("add element") and "{ 0, 3 }" in s for s in donor.nft.scripts)
    assert again == [0] and donor._filtered == {3, 6, 9, 12, 15}


def test_a_gained_predecessor_a_join_moved_away_is_retired_not_judged(tmp_path: Path) -> None:
    """The master 0 died while it asked donors; its successor 1 took it over and gained 2 as
    its predecessor (expecting 2's link). Then 1, the new master, admitted 3, which sits
    between 2 and 1: 2 re-targets to 3 and never links to 1. When 2's time to link runs out,
    1 retires its watch of 2 instead of judging 2 dead (which fenced 2, alive, and began a
    cascade of false deaths in the master-kill campaign). Without the join, 2's silence is
    its death."""
    port = _port()
    for joined in (True, False):
        member = _member(1, port, tmp_path)
        member._declare_dead(0)
        watch = Backup(_VIP, 443, (_RING[1], link_port(port, 2, False)), "eth0",
                       Docroot(tmp_path), None)  # fmt: skip
        member._watches[2], member._theirs[2] = watch, set(member.table.owned_by(2))
        if joined:
            member.ring, member.switch_ports = _RING, ("p0", "p1", "p2", "p3")
            admit(member.table, 3, [1, 4])
        member._expect_link(2, within=0.0)
        assert watch.death.is_set() is not joined, joined
        assert (2 in member._watches) is not joined, joined


def test_a_re_target_at_a_join_lets_the_old_mirrors_connections_go_on_alone(
        tmp_path: Path) -> None:  # fmt: skip
    """At a join (``old_lives``) the re-target sets the old ``alone``: a connection whose
    update to the old mirror fails from then on (the master died during the join) goes on
    alone until its hand-over to the newcomer, instead of waiting for a verdict this member
    never gives on a mirror that is not its own any more (one was lost so in the master-kill
    campaign). After a death the old one is the verdict's to set, not the re-target's."""
    port = _port()
    for old_lives in (True, False):
        with _stand_in(_RING[3], port, lambda h, n: None):
            owner = Primary(_VIP, 443, (_RING[0], port), Docroot(tmp_path), None,
                            alone=threading.Event())  # fmt: skip
            old = owner.alone
            assert old is not None
            owner.retarget((_RING[3], port), old_lives=old_lives)
        assert old.is_set() is old_lives, old_lives
        assert owner.alone is not old and owner.alone is not None and not owner.alone.is_set()
