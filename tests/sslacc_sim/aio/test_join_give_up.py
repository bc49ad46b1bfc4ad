"""A donor that fails during a join: the master gives the join up, and nothing stays unserved.

The master asks each donor in turn for its share of idle buckets (``give``); a donor that
dies, refuses or sends garbage before it answers ends that try. The master then tells every
donor it asked to serve its gift again (``ungive``), takes its own back, and only then refuses
the newcomer, who asks the ring again; a donor killed while it is asked is given up on as soon
as the cluster declares it dead, not after its cut link's timeout. In process, over loopback
(the master a real :class:`~sslacc_sim.aio.linux.member.Member` with a recording nftables, the
other members stand-ins answering their cluster listeners); the campaign's join modes run real
members.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sslacc_sim.aio.linux.buckets import BucketFilter
from sslacc_sim.aio.linux.join import JoinError, shares
from sslacc_sim.aio.linux.joinwire import still_waiting
from sslacc_sim.aio.linux.member import Member
from tests.sslacc_sim.aio.test_join_rules import _Donor, _Recording
from tests.sslacc_sim.aio.test_master_death import _RING, _VIP, _member, _port, _stand_in


def _master(port: int, tmp_path: Path) -> tuple[Member, _Recording]:
    """Member 0 of three, the master, its filter on a recording nftables."""
    master = _member(0, port, tmp_path)
    nft = _Recording()
    master._nft = BucketFilter(nft, _VIP, 443, 16)
    master._filtered = set(master.table.owned_by(0))
    return master, nft


def _gives(buckets: list[int]) -> Any:
    def answer(header: dict[str, Any], n: int) -> tuple[dict[str, Any], bytes]:
        if header["type"] == "give":
            return {"type": "given", "buckets": buckets}, b""
        return {"type": "applied"}, b""

    return answer


def test_the_plan_asks_the_master_and_both_other_members() -> None:
    """The premise of the tests below: with 16 buckets over three members, a fourth's share
    comes from all three (the master first, in id order)."""
    master = _member(0, 1, Path("."))
    assert sorted(shares(master.table, 3)) == [0, 1, 2]


def test_a_donor_that_refuses_makes_the_master_give_up_and_every_gift_is_served_again(
        tmp_path: Path) -> None:  # fmt: skip
    """Donor 1 gives, donor 2 closes its link without an answer: the master takes its own
    gift back, tells 1 to serve its gift again (``ungive``) and 2 too (it may have given before
    it failed), and refuses the newcomer; nothing of the try stays in the table."""
    port = _port()
    master, nft = _master(port, tmp_path)
    owned = set(master._filtered)
    with _stand_in(_RING[1], port, _gives([1])) as to_1, \
            _stand_in(_RING[2], port, lambda h, n: None) as to_2:  # fmt: skip
        with pytest.raises(JoinError, match="member 2 did not give"):
            master._admit(3, _RING[3], "p3")
    assert [h["type"] for h in to_1] == ["give", "ungive"] and to_1[1]["to"] == 3
    assert [h["type"] for h in to_2] == ["give", "ungive"]
    # its own gift: out of the filter, then back in, before the refusal
    assert nft.scripts[0].startswith("delete element") and nft.scripts[-1].startswith("add element")
    assert master._filtered == owned and master._gifts == {}
    assert master.table.members == [0, 1, 2] and 3 not in master.table.owner


def test_a_donor_that_dies_while_asked_is_given_up_on_at_its_verdict(tmp_path: Path) -> None:
    """Donor 2 holds the question unanswered (killed, its link cut: the answer would wait for
    the link's timeout); the cluster declares it dead 0.2 s later, and the master gives the
    join up at once, not after the 10 s of its question."""
    port = _port()
    master, _ = _master(port, tmp_path)
    silent = threading.Event()

    def hang(header: dict[str, Any], n: int) -> None:
        silent.wait(5)  # the stand-in's one thread: the question stays open

    with _stand_in(_RING[1], port, _gives([1])) as to_1, _stand_in(_RING[2], port, hang):
        threading.Timer(0.2, master._declare_dead, args=(2,)).start()
        began = time.monotonic()
        with pytest.raises(JoinError, match="member 2 died while it was asked"):
            master._admit(3, _RING[3], "p3")
        took = time.monotonic() - began
        silent.set()
    assert took < 1.5, took
    assert [h["type"] for h in to_1] == ["give", "ungive"]
    assert master.table.members == [0, 1]  # 2's death applied, the join not


def test_a_donor_told_to_give_up_serves_its_gift_again_and_nothing_a_join_took(
        tmp_path: Path) -> None:  # fmt: skip
    """``ungive`` on the donor's side: what it gave newcomer 3 goes back into its filter; a
    second ``ungive``, or one for a newcomer it gave nothing, changes nothing; a malformed one
    is refused."""
    port = _port()
    donor, nft = _master(port, tmp_path)
    given = donor._give(2, 3)
    assert given and not set(given) & donor._filtered
    assert donor._on_join({"type": "ungive", "to": 3}) == ({"type": "applied"}, b"")
    assert set(given) <= donor._filtered and nft.scripts[-1].startswith("add element")
    before = list(nft.scripts)
    donor._on_join({"type": "ungive", "to": 3})
    donor._on_join({"type": "ungive", "to": 7})
    assert nft.scripts == before
    header, _ = donor._on_join({"type": "ungive", "to": "3"})
    assert header["type"] == "refused" and "without a newcomer" in header["reason"]


def test_a_newcomer_that_left_before_its_join_was_applied_is_given_up_on(
        tmp_path: Path) -> None:  # fmt: skip
    """Both donors give, but the newcomer's question is closed by then (its kernel closed it:
    the newcomer died): the master gives the join up as it would for a failed donor -- every
    gift served again, nothing of the newcomer in the table -- instead of admitting a member
    whose buckets nobody would serve until its successor judged it, 10 s later. (A newcomer
    that waits is admitted: every join of the real members' tests and campaigns.)"""
    port = _port()
    master, nft = _master(port, tmp_path)
    owned = set(master._filtered)
    with _stand_in(_RING[1], port, _gives([1])) as to_1, \
            _stand_in(_RING[2], port, _gives([2])) as to_2:  # fmt: skip
        with pytest.raises(JoinError, match="member 3 left before its join was applied"):
            master._admit(3, _RING[3], "p3", waiting=lambda: False)
    assert [h["type"] for h in to_1] == ["give", "ungive"]
    assert [h["type"] for h in to_2] == ["give", "ungive"]
    assert master._filtered == owned and master._gifts == {}
    assert master.table.members == [0, 1, 2] and 3 not in master.table.owner
    assert nft.scripts[-1].startswith("add element")


def test_still_waiting_tells_an_open_question_from_a_closed_or_reset_one() -> None:
    """Over real TCP: the asker's end open, closed, or reset."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        ends = []
        for how in ("open", "closed", "reset"):
            asker = socket.create_connection(server.getsockname())
            link, _ = server.accept()
            if how == "closed":
                asker.close()
            elif how == "reset":
                asker.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                asker.close()
            time.sleep(0.05)
            ends.append((how, still_waiting(link)))
            link.close()
            if how == "open":
                asker.close()
    assert ends == [("open", True), ("closed", False), ("reset", False)]


def test_a_new_masters_try_tells_a_member_it_asks_nothing_of_to_serve_its_old_gift(
        tmp_path: Path) -> None:  # fmt: skip
    """Master 0 died while it gathered a join of 3 (member 2 may have given to that try).
    Member 1, master now and holding 0's buckets too, takes 3's whole share from itself and
    asks nothing of 2: it tells 2 ``ungive`` all the same, so that a gift to the dead master's
    try is served again at once, not after :data:`JOIN_WITHIN_S` (seen in the master-kill
    campaign: one member's gift unanswered right after the load). Here the newcomer has left
    by the time the share is gathered, so the try ends in a give-up, before ``joined``."""
    port = _port()
    master = _member(1, port, tmp_path)
    master._declare_dead(0)
    master._nft = BucketFilter(_Recording(), _VIP, 443, 16)
    master._filtered = set(master.table.owned_by(1))
    assert shares(master.table, 3) == {1: 5}  # the premise: nothing asked of member 2
    with _stand_in(_RING[2], port, _gives([2])) as to_2:
        with pytest.raises(JoinError, match="left before"):
            master._admit(3, _RING[3], "p3", waiting=lambda: False)
    assert [(h["type"], h["to"]) for h in to_2] == [("ungive", 3)]
    assert master._filtered == set(master.table.owned_by(1)) and master._gifts == {}


class _SlowDisown(_Recording):
    """A recording nftables whose ``delete element`` takes 0.3 s (a donor's gift under load)."""

    def run(self, script: str) -> None:
        if script.strip().startswith("delete element"):
            time.sleep(0.3)
        super().run(script)


def test_an_ungive_that_arrives_while_the_gift_is_made_waits_and_serves_it_again() -> None:
    """Master 0 asks a donor to give newcomer 3 two buckets, and dies while the gift is made; its heir, master 1, tells the donor ``ungive``
    before the gift ends (seen in the aimed master-kill runs: the gift then stayed out of every
    filter until :data:`JOIN_WITHIN_S`). The ``ungive`` waits for the gift and serves it
    again."""
    donor = _Donor()
    donor.nft = _SlowDisown()
    donor._nft = BucketFilter(donor.nft, _VIP, 443, 16)
    owned = set(donor._filtered)
    giving = threading.Thread(target=donor._on_join,
                              args=({"type": "give", "to": 3, "count": 2, "by": 0},))  # fmt: skip
    giving.start()
    time.sleep(0.1)  # the gift is under way (its filter change takes 0.3 s)
    answer = donor._on_join({"type": "ungive", "to": 3, "by": 1})
    giving.join(5)
    assert answer[0]["type"] == "applied"
    assert donor._filtered == owned and donor._gifts == {}


def test_a_give_from_a_try_that_is_over_is_refused() -> None:
    """Master 1's try for newcomer 3 told the donor ``ungive``; a ``give`` of dead master 0's
    try read after it (sent on another link just before 0 died) is refused and takes nothing
    out of the filter; master 1's own give is served."""
    donor = _Donor()
    owned = set(donor._filtered)
    assert donor._on_join({"type": "ungive", "to": 3, "by": 1})[0]["type"] == "applied"
    stale = donor._on_join({"type": "give", "to": 3, "count": 2, "by": 0})
    assert stale[0]["type"] == "refused" and "over since member 1" in stale[0]["reason"]
    assert donor._filtered == owned and donor._gifts == {}
    fresh = donor._on_join({"type": "give", "to": 3, "count": 2, "by": 1})
    assert fresh[0] == {"type": "given", "buckets": [0, 3]} and donor._gifts == {3: [0, 3]}
