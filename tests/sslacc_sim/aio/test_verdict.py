"""How a member judges its mirror, and which of a node's threads run first.

Issue 22's latency target (p99 <= 150 ms from a kill to each client's next byte): a member
whose mirror was killed used to wait 0.3 s before it went on alone with its own connections,
in case it had itself been stopped and judged dead. It now asks what it knows
(:meth:`Member._wait_before_verdict <sslacc_sim.aio.linux.member.Member._wait_before_verdict>`):
whether its own heartbeat ran on time (:meth:`Primary.ran_through
<sslacc_sim.aio.linux.primary.Primary.ran_through>`) and whether the mirror's kernel refuses
its listener (:func:`~sslacc_sim.aio.linux.member.refused`: the process is gone). And a thread
started by a ``SCHED_FIFO`` thread no longer inherits its policy
(:func:`~sslacc_sim.aio.linux.threads.spawn`). The bucket campaign records each verdict's
wait and whose buckets each connection's gap was in. In process, over loopback, with one
child process for a listener that is stopped and killed (root: ``SCHED_FIFO`` needs it).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pandas as pd
import pytest

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.campaign import _verdict_wait
from sslacc_sim.aio.linux.campaign_buckets import MEMBERS, roles, victim_of
from sslacc_sim.aio.linux.docroot import Docroot
from sslacc_sim.aio.linux.member import QUIET_WAIT_S, SILENT_WAIT_S, Member, refused
from sslacc_sim.aio.linux.mirror import ACK, recv_frame
from sslacc_sim.aio.linux.netns import ADDRESSES
from sslacc_sim.aio.linux.primary import STOP_GAP_S, Primary
from sslacc_sim.aio.linux.threads import realtime_thread, spawn
from sslacc_sim.buckets import BucketTable

_LISTENER = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


@contextmanager
def _child_listener() -> Iterator[tuple[subprocess.Popen[str], tuple[str, int]]]:
    """A listener in a child process (to stop and kill), and its address."""
    proc = subprocess.Popen([sys.executable, "-c", _LISTENER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        yield proc, ("127.0.0.1", int(proc.stdout.readline()))
    finally:
        proc.kill()
        proc.wait()


def _free_port() -> tuple[str, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address: tuple[str, int] = s.getsockname()
    return address


def test_a_listener_that_lives_or_is_stopped_is_not_refused_a_killed_one_is() -> None:
    """The kernel answers for a stopped process (its listener accepts), and refuses once the
    process is gone: what tells a kill from a hang without waiting."""
    with _child_listener() as (proc, address):
        assert not refused(address)
        proc.send_signal(signal.SIGSTOP)
        assert not refused(address), "a stopped process's listener still accepts"
        proc.kill()
        proc.wait()
        assert refused(address)
    assert refused(_free_port())


def _mirror(server: socket.socket, answer: threading.Event) -> None:
    """Answer each keepalive while ``answer`` is set (the buddy's control link)."""
    link, _ = server.accept()
    with link, suppress(OSError):  # the node closes the link at the end of the test
        while (frame := recv_frame(link)) is not None:
            if frame[0]["type"] == "beat" and answer.is_set():
                link.sendall(ACK)


@contextmanager
def _beating(tmp_path: Path) -> Iterator[tuple[Primary, threading.Event]]:
    """A node whose heartbeat beats to a loopback mirror; the event: the mirror answers."""
    server = socket.create_server(("127.0.0.1", 0))
    answer = threading.Event()
    answer.set()
    threading.Thread(target=_mirror, args=(server, answer), daemon=True).start()
    node = Primary("127.0.0.1", 0, server.getsockname(), Docroot(tmp_path), None,
                   self_fence=False)  # fmt: skip
    link = node.link()
    threading.Thread(target=node.heartbeat, args=(link,), daemon=True).start()
    try:
        yield node, answer
    finally:
        node.stop_heartbeat()
        link.close()
        server.close()


def _late_then_silent(server: socket.socket, arrived: list[float]) -> None:
    """A mirror that answers the first keepalive 0.12 s late (after its round gave up waiting,
    :data:`BEAT_S`) and none after; ``arrived``: when each keepalive came."""
    link, _ = server.accept()
    with link, suppress(OSError):
        while (frame := recv_frame(link)) is not None:
            if frame[0]["type"] == "beat":
                arrived.append(time.monotonic())
                if len(arrived) == 1:
                    time.sleep(0.12)
                    link.sendall(ACK)


def test_a_late_answer_renews_the_lease_from_its_own_keepalive_not_a_later_one(
        tmp_path: Path) -> None:  # fmt: skip
    """The first keepalive's answer arrives while a later keepalive is out: it is that first
    one's, and the lease and ``answered_at`` count from when the first was sent. Crediting the
    later keepalive would stretch the lease past the mirror's verdict by up to a beat."""
    server = socket.create_server(("127.0.0.1", 0))
    arrived: list[float] = []
    threading.Thread(target=_late_then_silent, args=(server, arrived), daemon=True).start()
    node = Primary("127.0.0.1", 0, server.getsockname(), Docroot(tmp_path), None,
                   self_fence=False)  # fmt: skip
    link = node.link()
    threading.Thread(target=node.heartbeat, args=(link,), daemon=True).start()
    try:
        time.sleep(0.5)
    finally:
        node.stop_heartbeat()
        link.close()
        server.close()
    assert len(arrived) >= 3, arrived
    # credited, and to the first keepalive (sent just before it arrived over the loopback)
    assert arrived[0] - 0.02 < node.answered_at <= arrived[0], (node.answered_at, arrived)
    assert node.lease.renewed == node.answered_at


def test_a_mirror_that_dies_before_the_first_keepalive_frame_is_judged(tmp_path: Path) -> None:
    """The mirror resets the keepalive link right after it was made (a newcomer killed just
    after its predecessor linked to it, as the join campaign's trial 15 at 506d29b saw): the
    heartbeat's first frame fails, and it must report the failure (``on_silent``), as a link
    failure later on is, and end. Before, the error ended its thread unreported: the member
    never judged its mirror dead and mirrored every new connection to it, refused."""
    server = socket.create_server(("127.0.0.1", 0))
    node = Primary("127.0.0.1", 0, server.getsockname(), Docroot(tmp_path), None,
                   self_fence=False)  # fmt: skip
    link = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # a reset
    time.sleep(0.05)
    reasons: list[str] = []

    def silent(reason: str) -> bool:
        reasons.append(reason)
        return True  # the member deals with it: the heartbeat ends

    beating = threading.Thread(target=node.heartbeat, args=(link, silent))
    beating.start()
    beating.join(timeout=5)
    link.close()
    server.close()
    assert not beating.is_alive()
    assert len(reasons) == 1 and reasons[0].startswith("keepalive link: "), reasons


def _hog_the_interpreter(seconds: float) -> None:
    """Hold the interpreter lock for ``seconds`` (a starved keepalive thread)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds * 2)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    finally:
        sys.setswitchinterval(before)


def test_the_heartbeat_knows_whether_it_ran_on_time(tmp_path: Path) -> None:
    """On time once it has beaten for the window (also with the mirror silent: its own
    rounds go on); not after a starvation longer than :data:`STOP_GAP_S`, for a window."""
    with _beating(tmp_path) as (node, answer):
        assert not node.ran_through(0.3), "nothing is known of the time before the first beat"
        time.sleep(0.5)
        assert node.ran_through(0.3)
        answer.clear()
        time.sleep(0.3)
        assert node.ran_through(0.3), "a silent mirror does not stop this node's own rounds"
        answer.set()
        _hog_the_interpreter(3 * STOP_GAP_S)
        time.sleep(0.1)
        assert not node.ran_through(0.3), "a starved heartbeat must show its gap"
        time.sleep(0.5)
        assert node.ran_through(0.3)


def _member(tmp_path: Path, node: Primary) -> Member:
    member = Member(0, 3, 16, "10.88.0.100", 443, ("127.0.0.1", 0), node.buddy,
                    Docroot(tmp_path), None)  # fmt: skip
    member._owner = node
    return member


def test_the_wait_before_a_verdict_follows_what_the_member_knows(tmp_path: Path) -> None:
    """Link failed, mirror refuses: at once, even for a member that may have been stopped (a
    mirror whose process is gone fences nothing more, and a fence it made is down already);
    mirror still listening (it closed the link: it judged this member dead): the long wait;
    silence: the short wait, the long one for a member that may have been stopped."""
    with _child_listener() as (proc, address), _beating(tmp_path) as (node, _):
        time.sleep(1.2)  # longer than RAN_THROUGH_S
        node.buddy = address
        member = _member(tmp_path, node)
        assert member._wait_before_verdict(None) == SILENT_WAIT_S
        assert member._wait_before_verdict(time.monotonic()) == QUIET_WAIT_S
        proc.kill()
        proc.wait()
        assert member._wait_before_verdict(None) == 0.0
        node.paused_at = time.monotonic()  # as if the heartbeat had just found a gap
        assert member._wait_before_verdict(None) == 0.0
        assert member._wait_before_verdict(time.monotonic()) == SILENT_WAIT_S


def _policy_seen_by(start: str) -> int:
    """The policy of a thread started by a ``SCHED_FIFO`` thread, with ``start``."""
    seen: list[int] = []

    def child() -> None:
        seen.append(os.sched_getscheduler(0))

    def fifo_parent() -> None:
        assert realtime_thread(), "SCHED_FIFO needs root (CAP_SYS_NICE)"
        if start == "spawn":
            spawn(child).join()
        else:
            t = threading.Thread(target=child)
            t.start()
            t.join()

    t = threading.Thread(target=fifo_parent)
    t.start()
    t.join()
    return seen[0]


@pytest.mark.parametrize("start", ["spawn", "thread"])
def test_a_thread_spawned_by_a_realtime_thread_runs_under_the_default_policy(start: str) -> None:
    """:func:`spawn` resets the policy; a plain thread inherits ``SCHED_FIFO`` (the control:
    what every connection the heir of a takeover served used to run under)."""
    assert _policy_seen_by(start) == (os.SCHED_OTHER if start == "spawn" else os.SCHED_FIFO)


def test_the_campaign_reads_the_verdicts_wait_and_whose_connection_each_gap_was() -> None:
    """A bucket campaign's trial row gets the predecessor's wait from its ``MIRROR DEAD`` line,
    and each connection a role from its bucket and the trial's victim."""
    said = {"a": ["PREDECESSOR member 2"], "b": ["MIRROR DEAD member 2: keepalive link: "
                                                 "closed by the mirror (judged after 0.1 s)"]}
    assert _verdict_wait(said) == 0.1
    assert _verdict_wait({"a": ["MIRROR DEAD member 1: reason"]}) is None
    victim = MEMBERS.index(victim_of(1, 7))
    table = BucketTable(len(MEMBERS), 64)
    ports = {m: next(p for p in range(30000, 40000)
                     if table.owner[bucket_of(ADDRESSES["client"], p, 64)] == m)
             for m in range(len(MEMBERS))}  # fmt: skip
    flows = pd.DataFrame({"trial": [7, 7, 7], "port": [ports[victim], ports[(victim + 1) % 3],
                                                      ports[(victim + 2) % 3]]})
    assert roles(flows, 1).tolist() == ["victim", "successor", "predecessor"]
