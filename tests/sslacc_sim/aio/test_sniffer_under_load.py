"""The LAN recorder under a flood: a takeover's :meth:`Sniffer.sync` returns while frames keep
coming.

The first campaign on the bucket layout lost two connections (trial 57) this way: the last
member served at full speed, so the frames on its LAN never stopped; its recorder thread held
the record for as long as frames came, and ``sync()`` drained until the socket was empty, so
the takeover waited on both. Now the thread lets go of the record every
:data:`~sslacc_sim.aio.linux.sniff._BATCH` frames and ``sync()`` stops at the first frame
received after it was called (``SO_TIMESTAMPNS``). Each test fails when its half is undone.

No namespaces: the sniffer reads hand-built Ethernet frames from a UDP socket on loopback (it
reads any datagram socket alike); a sender in another process floods it, and a record that
takes a little time per frame stands for a loaded member.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from sslacc_sim.aio.linux import sniff
from sslacc_sim.aio.linux.sniff import _BATCH, ACK, SYN, FlowTracker, Sniffer, TcpFrame

from .test_sniff_takeover import CLIENT, VIP, frame

_FRAME = frame(CLIENT, VIP, 1, 0, ACK, b"x" * 40)


class _SlowRecord(FlowTracker):
    """A record that takes about a quarter of a millisecond per frame (a busy member)."""

    def feed(self, seg: TcpFrame) -> None:
        time.sleep(0.00025)
        super().feed(seg)


def _receiver(rcvbuf: int = 1 << 15) -> socket.socket:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # a short backlog
    rx.bind(("127.0.0.1", 0))
    return rx


def test_sync_stops_at_the_first_frame_received_after_the_call() -> None:
    rx = _receiver(1 << 20)
    tracker = FlowTracker(VIP)
    sniffer = Sniffer(rx, tracker)  # not started: the test's thread drains
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        # the kernel turns receive timestamps on a moment after the first socket asks (a
        # deferred static key): until then a frame is stamped when it is read, not when it came
        time.sleep(0.1)
        for _ in range(5):
            tx.sendto(_FRAME, rx.getsockname())
        time.sleep(0.01)
        mark = time.monotonic()
        time.sleep(0.01)
        for _ in range(5):
            tx.sendto(_FRAME, rx.getsockname())
        time.sleep(0.01)
    sniffer._drain(until=mark)
    assert tracker.frames == 6, "five frames from before the mark, and the first one after it"
    sniffer._drain(limit=2)
    assert tracker.frames == 8
    rx.close()


def test_the_thread_feeds_a_batch_at_a_time() -> None:
    rx = _receiver(1 << 22)
    tracker = FlowTracker(VIP)
    sniffer = Sniffer(rx, tracker)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for _ in range(_BATCH + 100):
            tx.sendto(_FRAME, rx.getsockname())
    time.sleep(0.05)
    sniffer._drain(limit=_BATCH)
    assert tracker.frames == _BATCH
    rx.close()


def test_a_short_frame_after_a_long_one_is_read_as_short() -> None:
    """The sniffer reads every frame into one buffer: a frame cut short (as the socket filter
    cuts a server's) must not borrow the previous frame's bytes and pass for whole."""
    rx = _receiver(1 << 20)
    tracker = FlowTracker(VIP)
    sniffer = Sniffer(rx, tracker)
    syn = frame(CLIENT, VIP, 0, 0, SYN)
    long = frame(CLIENT, VIP, 1, 0, ACK, b"a" * 1000)
    cut = frame(CLIENT, VIP, 1001, 0, ACK, b"b" * 1000)[:-990]  # its IP header says 1,000
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for f in (syn, long, cut):
            tx.sendto(f, rx.getsockname())
    time.sleep(0.05)
    sniffer._drain()
    flow = tracker.flows[CLIENT]
    assert tracker.frames == 3 and bytes(flow.data) == b"a" * 1000, (tracker.frames, flow.end)
    rx.close()


def test_a_takeovers_sync_returns_while_the_frames_keep_coming() -> None:
    rx = _receiver()
    tracker = _SlowRecord(VIP)
    sniffer = Sniffer(rx, tracker).start()
    host, port = rx.getsockname()
    flood = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"f, end = bytes.fromhex('{_FRAME.hex()}'), time.monotonic() + 4.0\n"
        "print('go', flush=True)\n"
        f"while time.monotonic() < end: s.sendto(f, ('{host}', {port}))\n")],
        stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert flood.stdout is not None and flood.stdout.readline() == "go\n"
        time.sleep(0.3)  # the thread is feeding, and the socket never empties
        took: list[float] = []
        caller = threading.Thread(target=lambda: (t0 := time.monotonic(), sniffer.sync(),
                                                  took.append(time.monotonic() - t0)))  # fmt: skip
        caller.start()
        caller.join(timeout=10)
        assert took, "sync() did not return"
        assert flood.poll() is None, "the flood must outlast the sync for the test to mean anything"
        assert took[0] < 1.5, f"sync() took {took[0]:.2f} s under a flood (it waited for the flood's end)"
    finally:
        flood.wait(timeout=10)
        sniffer.stop()
        rx.close()


def test_a_stop_ends_the_thread_s_nap_at_once_and_feeds_what_came_during_it(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """After each drain the thread naps while frames gather (fewer wake-ups). A takeover's
    ``stop`` must not wait for the nap's end, nor lose what came during it. (A minute's nap
    here: a plain sleep fails the first check, a stop that does not drain the second.)"""
    monkeypatch.setattr(sniff, "_NAP_MS", 60_000)
    rx = _receiver(1 << 20)
    tracker = FlowTracker(VIP)
    sniffer = Sniffer(rx, tracker).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.sendto(_FRAME, rx.getsockname())
            deadline = time.monotonic() + 5
            while tracker.frames < 1 and time.monotonic() < deadline:
                time.sleep(0.001)
            assert tracker.frames == 1, "the thread fed the first frame"
            for _ in range(3):
                tx.sendto(_FRAME, rx.getsockname())
        time.sleep(0.05)
        assert tracker.frames == 1, "napping: the frames wait in the socket"
    finally:
        t0 = time.monotonic()
        sniffer.stop()
        took = time.monotonic() - t0
        rx.close()
    assert took < 1.0, f"stop() waited {took:.1f} s for the nap"
    assert tracker.frames == 4
