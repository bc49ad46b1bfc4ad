"""A newcomer gives up on a silent master within :data:`SILENT_S`, not after its 30 s question.

A master that hangs while it admits a newcomer (stopped, or its cluster link gone) would hold
the newcomer's question for :data:`JOIN_WITHIN_S`, and with it every donor's gift to that try,
out of every filter until then. (A killed master's kernel ends the question at once: the
campaign's master-kill does not reach this path.) A master now sends ``wait`` frames while it
admits (:func:`beating`), and the newcomer asks the next member once it has heard nothing for
:data:`SILENT_S`. Over loopback: the wire on its own, then a real
:class:`~sslacc_sim.aio.linux.member.Member` as the master and as the newcomer.
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

from sslacc_sim.aio.linux.docroot import Docroot
from sslacc_sim.aio.linux.join import JOIN_WITHIN_S, link_port
from sslacc_sim.aio.linux.joinwire import SILENT_S, WAIT, ask, beating, join_frame
from sslacc_sim.aio.linux.member import Member
from sslacc_sim.aio.linux.mirror import recv_frame, send_frame
from sslacc_sim.buckets import BucketTable
from sslacc_sim.membership import encode_table
from tests.sslacc_sim.aio.test_join_give_up import _master
from tests.sslacc_sim.aio.test_master_death import _RING, _VIP, _port, _stand_in

_TABLE = ({"type": "table"}, b"the table")


@contextmanager
def _listener(serve: Callable[[socket.socket], None]) -> Iterator[tuple[str, int]]:
    """A listener on loopback whose first connection ``serve`` handles (after reading the
    question off it); its address."""
    server = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        link, _ = server.accept()
        with link:
            recv_frame(link)
            serve(link)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield server.getsockname()
    finally:
        thread.join(10)
        server.close()


def test_ask_reads_past_a_masters_beats_to_its_answer() -> None:
    """A master that works 0.8 s (longer than the newcomer's silence limit) but beats every
    0.05 s is waited for; its answer is what ``ask`` returns."""
    def slow(link: socket.socket) -> None:
        with beating(link, 0.05):
            time.sleep(0.8)
        send_frame(link, *_TABLE)

    with _listener(slow) as address:
        began = time.monotonic()
        header, blob = ask(address, join_frame(3, "127.0.0.14", "p3"), 30.0, silent=0.3)
    assert (header, blob) == _TABLE and time.monotonic() - began >= 0.8


def test_ask_gives_up_on_a_master_that_falls_silent() -> None:
    """A master that beats for 0.3 s and then says nothing more, its link open (hung, or its
    cluster link gone), is given up on ``silent`` seconds after its last beat, not after the
    question's own limit."""
    def dies(link: socket.socket) -> None:
        with beating(link, 0.05):
            time.sleep(0.3)
        time.sleep(3.0)  # silent, the link still open

    with _listener(dies) as address:
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            ask(address, join_frame(3, "127.0.0.14", "p3"), 30.0, silent=0.3)
        assert 0.55 <= time.monotonic() - began < 1.5


def test_no_beat_follows_the_body_so_the_answer_is_the_next_frame() -> None:
    """Beats stop when the body ends: a frame sent right after is the next one read."""
    near, far = socket.socketpair()
    with near, far:
        with beating(near, 0.02):
            time.sleep(0.2)
        send_frame(near, *_TABLE)
        far.settimeout(1.0)
        frames = []
        while (frame := recv_frame(far)) is not None and frame[0]["type"] == WAIT:
            frames.append(frame)
        assert len(frames) >= 3 and frame == _TABLE


def test_a_master_beats_while_a_slow_donor_is_asked(tmp_path: Path) -> None:
    """Member 0, the master, takes up 3's join; donor 1 takes 0.8 s to answer ``give``, and
    donor 2 then fails (so the try ends in a refusal, not in a join applied in this process).
    The answer to the newcomer is preceded by ``wait`` frames throughout: a newcomer's
    silence limit never runs out on a master that works."""
    port = _port()
    master, _ = _master(port, tmp_path)

    def slow_give(header: dict[str, Any], n: int) -> tuple[dict[str, Any], bytes]:
        if header["type"] == "give":
            time.sleep(0.8)
            return {"type": "given", "buckets": [1]}, b""
        return {"type": "applied"}, b""

    near, far = socket.socketpair()
    with near, far, _stand_in(_RING[1], port, slow_give), \
            _stand_in(_RING[2], port, lambda h, n: None):  # fmt: skip
        def admit() -> None:
            send_frame(near, *master._on_join(join_frame(3, _RING[3], "p3"), near))

        thread = threading.Thread(target=admit, daemon=True)
        thread.start()
        far.settimeout(SILENT_S)
        arrivals, answer = [], None
        while answer is None:
            frame = recv_frame(far)  # a silence of SILENT_S here is a TimeoutError
            assert frame is not None
            arrivals.append(time.monotonic())
            if frame[0]["type"] != WAIT:
                answer = frame
        thread.join(5)
    assert answer[0]["type"] == "refused" and "member 2 did not give" in answer[0]["reason"]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert len(arrivals) >= 6 and max(gaps) < SILENT_S


def test_a_newcomer_whose_master_falls_silent_asks_the_next_member_at_once(
        tmp_path: Path) -> None:  # fmt: skip
    """Newcomer 3 asks master 0, which holds the question without a word (hung, or its
    cluster link gone). Within a second 3 asks member 1 -- which refuses until it has judged 0 dead, then
    answers as the master -- and enters; before, it waited :data:`JOIN_WITHIN_S`, and the gift
    a donor made the dead master's try stayed out of every filter until then."""
    port = _port()
    table = BucketTable(4, 16)
    table.remove(0)
    released = threading.Event()

    def master_later(header: dict[str, Any], n: int) -> tuple[dict[str, Any], bytes]:
        if n == 0:
            return {"type": "refused", "reason": "not the master (member 0 is)"}, b""
        return {"type": "table"}, encode_table(0, table)

    newcomer = Member(3, 4, 16, _VIP, 443, (_RING[3], port), None, Docroot(tmp_path), None,
                      ring=_RING, switch_ports=("p0", "p1", "p2", "p3"), joining=True)  # fmt: skip
    def silent(header: dict[str, Any], n: int) -> None:
        released.wait(JOIN_WITHIN_S)  # the question is held, never answered

    with _stand_in(_RING[0], port, silent), \
            _stand_in(_RING[1], port, master_later) as to_1:  # fmt: skip
        try:
            entering = threading.Thread(target=newcomer._enter, daemon=True)
            began = time.monotonic()
            entering.start()
            entering.join(4 * SILENT_S + 1.0)
            took = time.monotonic() - began
        finally:
            released.set()
    assert not entering.is_alive(), "the newcomer still waits for its silent master"
    assert took < 4 * SILENT_S + 1.0 and len(to_1) == 2
    assert newcomer.table.members == [1, 2, 3]
    assert newcomer.mirror == (_RING[1], link_port(port, 3, False))
