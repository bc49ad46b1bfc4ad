"""The LAN record of connections a member does not keep, and how one becomes kept after all.

Issue 22's hole with two deaths close together: member B dies, its successor C takes B's
connections over and hands each to its own mirror A (``adopt``), then C dies before A has
judged B dead. A's watch on C kept only C's own buckets, so it held none of the client bytes
C's kernel had acknowledged for B's connections: an upload lost them. Now a watch remembers
the connections it does not keep without their bytes (:attr:`FlowTracker.others`), keeps those
bytes a while (:class:`Recent`, shared by a member's watches), and keeps a connection after
all when its owner mirrors it (:meth:`FlowTracker.hold`: the ``adopt`` frame carries the bytes
the sender put back into its receive queue) or when the member learns it must
(:meth:`FlowTracker.promote`). In process, with hand-built frames (no namespaces).
"""

from __future__ import annotations

import json
import socket
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from sslacc_sim.aio.linux.mirror import MirrorState, send_frame
from sslacc_sim.aio.linux.sniff import ACK, FIN, RST, SYN, FlowTracker, Recent, parse_frame

from .test_sniff_takeover import (
    CLIENT,
    SYN_OPTS,
    VIP,
    _buddy,
    _link_pair,
    _state_with_segments,
    frame,
)

ISN = 1000  # the client's; its first byte is ISN + 1
OTHER = ("10.88.0.3", 40001)


def _feed(tracker: FlowTracker, *frames: bytes) -> None:
    for raw in frames:
        seg = parse_frame(raw)
        assert seg is not None
        tracker.feed(seg)


def _syn_exchange(client: tuple[str, int] = CLIENT) -> list[bytes]:
    return [frame(client, VIP, ISN, 0, SYN, options=SYN_OPTS),
            frame(VIP, client, 5000, ISN + 1, SYN | ACK, options=b"\x02\x04\x05\xb4")]  # fmt: skip


def _data(at: int, data: bytes, client: tuple[str, int] = CLIENT) -> bytes:
    """Client bytes from byte ``at`` of its stream (0: the first after the SYN)."""
    return frame(client, VIP, ISN + 1 + at, 5001, ACK, data)


def _choosing(kept: set[tuple[str, int]], recent: Recent | None = None) -> FlowTracker:
    return FlowTracker(VIP, keep=lambda client: client in kept, recent=recent or Recent())


def test_a_connection_not_kept_is_remembered_without_its_bytes_until_it_is_held() -> None:
    tracker = _choosing(set())
    _feed(tracker, *_syn_exchange(), _data(0, b"hello"), _data(5, b"world"))
    assert CLIENT not in tracker.flows and tracker.others[CLIENT].data == b""
    assert tracker.others[CLIENT].established and tracker.recent.size == 10
    tracker.hold(CLIENT, ISN + 1, 0)
    flow = tracker.flows[CLIENT]
    assert CLIENT not in tracker.others and flow.established
    assert flow.data_from(0) == b"helloworld"
    _feed(tracker, _data(10, b"!"))  # kept from now on: straight into the record
    assert flow.data_from(3) == b"loworld!"


def test_an_adopt_hands_over_the_bytes_the_record_never_heard() -> None:
    """The sender put bytes 100..300 back into its receive queue (heard before this record
    began); the record heard bytes 250..500 since, as a connection it did not keep."""
    stream = bytes(range(256)) * 2
    tracker = _choosing(set())
    _feed(tracker, _data(250, stream[250:400]), _data(400, stream[400:500]))
    tracker.hold(CLIENT, ISN + 1, 100, stream[100:300])
    assert tracker.flows[CLIENT].data_from(100) == stream[100:500]


def test_a_record_already_kept_stays_as_it_is() -> None:
    tracker = _choosing({CLIENT})
    _feed(tracker, *_syn_exchange(), _data(0, b"abcdef"))
    flow = tracker.flows[CLIENT]
    tracker.hold(CLIENT, ISN + 1, 2, b"cdefgh")  # the adopt's copy, and two bytes more
    assert tracker.flows[CLIENT] is flow and flow.data_from(0) == b"abcdefgh"
    tracker.hold(CLIENT, ISN + 77, 0)  # another connection from the same address and port
    assert tracker.flows[CLIENT].rcv_base == ISN + 77 and tracker.flows[CLIENT].end == 0


def test_a_tracker_that_keeps_everything_holds_nothing_more() -> None:
    tracker = FlowTracker(VIP)
    _feed(tracker, _data(0, b"no SYN heard"))
    tracker.hold(CLIENT, ISN + 1, 0)
    assert tracker.flows == {} and tracker.recent.size == 0


def test_promote_keeps_what_the_rule_now_chooses_with_its_bytes() -> None:
    kept: set[tuple[str, int]] = set()
    tracker = _choosing(kept)
    _feed(tracker, *_syn_exchange(), *_syn_exchange(OTHER), _data(0, b"mine"),
          _data(0, b"theirs", OTHER))  # fmt: skip
    assert tracker.promote() == 0
    kept.add(OTHER)  # the member learned that OTHER's bucket is its predecessor's now
    assert tracker.promote() == 1
    assert tracker.flows[OTHER].data_from(0) == b"theirs" and CLIENT in tracker.others


def test_a_members_watches_share_what_they_heard() -> None:
    """A watch started after a death (a new predecessor) sees back past its own start."""
    recent = Recent()
    first = _choosing(set(), recent)
    _feed(first, _data(0, b"before the second watch"))
    second = _choosing(set(), recent)
    second.hold(CLIENT, ISN + 1, 7, b"the")
    assert second.flows[CLIENT].data_from(7) == b"the second watch"


def test_recent_keeps_the_last_bytes_within_its_limit() -> None:
    recent = Recent(limit=10)
    for i in range(5):
        recent.add(CLIENT, i, bytes([i]) * 4)
    assert recent.size <= 10 and [s[1] for s in recent.of({CLIENT})] == [3, 4]


def test_connections_not_kept_are_forgotten_on_a_reset_or_both_fins() -> None:
    tracker = _choosing(set())
    _feed(tracker, *_syn_exchange(), *_syn_exchange(OTHER))
    _feed(tracker, frame(CLIENT, VIP, ISN + 1, 5001, RST))
    _feed(tracker, frame(VIP, OTHER, 5001, ISN + 1, FIN | ACK), frame(OTHER, VIP, ISN + 1, 5002, FIN | ACK))
    assert tracker.others == {}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_after_hold_the_record_holds_every_byte_from_the_consumed_point(data: st.DataObject) -> None:
    """Any cut of a stream into segments, heard in any order with repeats, partly before the
    hold (as a connection not kept) and partly after; the adopt's bytes reach from the
    consumed point at least to where the segments heard start: the record then holds the
    stream from the consumed point on, exactly."""
    stream = data.draw(st.binary(min_size=1, max_size=3000), label="stream")
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=12), label="cuts")) if len(stream) > 1 else []
    edges = [0, *cuts, len(stream)]
    segments = [(a, stream[a:b]) for a, b in zip(edges, edges[1:], strict=False)]
    consumed = data.draw(st.integers(0, len(stream)), label="consumed")
    heard_from = data.draw(st.integers(0, len(stream)), label="heard from")  # the record's start
    unread_end = data.draw(st.integers(min(heard_from, len(stream)), len(stream)), label="unread to")
    heard = [s for s in segments if s[0] + len(s[1]) > heard_from]
    order = data.draw(st.permutations(heard + data.draw(st.lists(st.sampled_from(heard), max_size=4))
                                      if heard else []), label="order")  # fmt: skip
    before = data.draw(st.integers(0, len(order)), label="before the hold")
    tracker = _choosing(set())
    _feed(tracker, *(_data(at, chunk) for at, chunk in order[:before]))
    tracker.hold(CLIENT, ISN + 1, consumed, stream[consumed:max(consumed, unread_end)])
    _feed(tracker, *(_data(at, chunk) for at, chunk in order[before:]))
    assert tracker.flows[CLIENT].data_from(consumed) == stream[consumed:]


def test_an_adopt_frame_carries_the_unread_bytes_and_the_buddy_keeps_them() -> None:
    """Over a real loopback link: the buddy's record keeps the adopted connection, with the
    bytes the frame carried, and the member hears of it before the acknowledgement."""
    state = _state_with_segments()
    header, blob = state.adopt_frame(b"unread bytes")
    copy = MirrorState()
    copy.apply(json.loads(json.dumps(header)), blob)
    assert copy.unread == b"unread bytes"
    node = _buddy()
    node.tracker = _choosing(set())
    told: list[tuple[str, int]] = []
    node.on_mirrored = told.append
    owner, buddy = _link_pair()
    worker = threading.Thread(target=node._link, args=(buddy,))
    worker.start()
    send_frame(owner, header, blob)
    owner.settimeout(5)
    assert owner.recv(1) == b"\x06"
    assert told == [CLIENT]
    assert state.tcp is not None
    flow = node.tracker.flows[CLIENT]
    assert flow.rcv_base == state.tcp.rcv_nxt and flow.data_from(state.rcv_pos) == b"unread bytes"
    assert node.states[CLIENT].unread == b""  # handed to the record, not kept twice
    owner.shutdown(socket.SHUT_WR)
    worker.join(timeout=5)
    owner.close()
