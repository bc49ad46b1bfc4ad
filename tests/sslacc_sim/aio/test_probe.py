"""The campaign's client-side probe (:mod:`sslacc_sim.aio.linux.probe`): a frame cut where the
probe cuts it gives the segment read whole, the frames queued at the stop are recorded, and the
kernel's count of frames the socket had no room for is read.

A probe that lost frames would make connections look unfinished at the fault (a FIN missed)
and leave their gap to the next byte unmeasured. The probe parses with
:func:`~sslacc_sim.aio.linux.sniff.parse_frame` (``cut=True``), fuzzed here with Hypothesis:
a cut frame against the same frame whole. The probe reads any datagram socket, so hand-built
frames on a loopback UDP socket stand for the wire, and the drop count is read on a real packet
socket on ``lo`` (root, as the namespace tests).
"""

from __future__ import annotations

import socket
import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sslacc_sim.aio.linux.probe import HEADER_READ, packet_drops, record_frames
from sslacc_sim.aio.linux.sniff import ACK, FIN, SYN, packet_socket, parse_frame

from .test_sniff_takeover import CLIENT, SYN_OPTS, VIP, frame

_SEGMENTS = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                      st.sampled_from([SYN, SYN | ACK, ACK, ACK | FIN, ACK | 0x08]),
                      st.binary(max_size=3000), st.binary(max_size=40),
                      st.integers(0, 65535), st.booleans())  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_SEGMENTS)
@example((1, 2, ACK, b"y" * 2000, b"", 500, True))  # a payload the probe's read cuts off
def test_a_frame_cut_where_the_probe_cuts_it_is_the_segment_read_whole(
        segment: tuple[int, int, int, bytes, bytes, int, bool]) -> None:  # fmt: skip
    seq, ack, flags, payload, options, window, to_client = segment
    src, dst = (VIP, CLIENT) if to_client else (CLIENT, VIP)
    whole = frame(src, dst, seq, ack, flags, payload, options, window)
    full, head = parse_frame(whole), parse_frame(whole[:HEADER_READ], cut=True)
    if full is None:
        assert parse_frame(whole, cut=True) is None
        return
    assert head is not None  # the probe's read holds every header
    assert (head.src_mac, head.src, head.dst, head.seq, head.ack, head.flags, head.window,
            head.options, head.size) == (full.src_mac, full.src, full.dst, full.seq, full.ack,
                                         full.flags, full.window, full.options,
                                         len(full.payload))  # fmt: skip
    assert full.payload.startswith(head.payload) and full.whole


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_the_parser_of_cut_frames_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    parse_frame(data, cut=True)
    parse_frame(frame(CLIENT, VIP, 1, 2, ACK)[:34] + data, cut=True)  # a valid head, garbage after


def test_a_frame_cut_inside_its_headers_is_refused() -> None:
    whole = frame(CLIENT, VIP, 1, 2, SYN, b"", SYN_OPTS)
    assert parse_frame(whole, cut=True) is not None
    assert all(parse_frame(whole[:n], cut=True) is None for n in range(len(whole)))


def _udp_pair() -> tuple[socket.socket, socket.socket]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    rx.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS, as the probe asks
    rx.bind(("127.0.0.1", 0))
    # the kernel turns receive timestamps on a moment after the first socket asks (a deferred
    # static key): until then a frame is stamped when it is read, which would be after the stop
    time.sleep(0.1)
    return rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def test_the_frames_queued_at_the_stop_are_recorded() -> None:
    """The probe is stopped (SIGTERM) while frames are still queued: a probe that lagged
    behind the load. Every one of them is a row, with its payload's length from a header
    read of :data:`HEADER_READ` bytes."""
    rx, tx = _udp_pair()
    with rx, tx:
        sent = [frame(VIP, CLIENT, 1000 + i * 5000, 7, ACK, b"x" * 5000) for i in range(200)]
        sent.append(frame(VIP, CLIENT, 1_001_000, 7, ACK | FIN))
        for f in sent:
            tx.sendto(f, rx.getsockname())
        time.sleep(0.05)
        rows = record_frames(rx, VIP, lambda: True)  # told to stop before it read one
    assert len(rows) == len(sent)
    assert [r[3] for r in rows] == [1000 + i * 5000 for i in range(200)] + [1_001_000]
    assert {r[4] for r in rows[:-1]} == {5000} and rows[-1][5] == ACK | FIN


def test_the_kernel_count_of_frames_the_socket_had_no_room_for_is_read() -> None:
    """A packet socket on ``lo`` with the smallest buffer, never read, while datagrams cross
    ``lo``: the kernel drops what does not fit, and says how many (then the count starts over)."""
    with packet_socket("lo", 1) as probe, packet_socket("lo", 1 << 24) as roomy, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:  # fmt: skip
        for _ in range(200):
            tx.sendto(b"x" * 1000, ("127.0.0.1", 9))  # the discard port: nobody listens
        time.sleep(0.05)
        dropped = packet_drops(probe)
        assert dropped > 100
        assert packet_drops(probe) == 0
        assert packet_drops(roomy) == 0  # it received them all (and read none)
