"""The buddy's bookkeeping, in process: frames heard on the LAN, flows, the lease, the analysis.

No namespaces here: :func:`sslacc_sim.aio.linux.sniff.parse_frame` and
:class:`~sslacc_sim.aio.linux.sniff.FlowTracker` get hand-built Ethernet frames (the test's own
packing, so that the parser is checked against an independent writer), the campaign's
analysis (:mod:`sslacc_sim.aio.linux.loadstats`) gets hand-made capture rows, and the buddy's
any-error-is-death rule is driven over real loopback TCP links.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslacc_sim.aio.linux.backup import Backup, Controls
from sslacc_sim.aio.linux.docroot import Docroot
from sslacc_sim.aio.linux.loadstats import CLIENT as CLIENT_ROW
from sslacc_sim.aio.linux.loadstats import (
    by_request,
    campaign_summary,
    flows_at,
    gaps_by,
    quantile,
    resends,
    wilson_lower,
    window_at_fault,
    zombie_frames,
)
from sslacc_sim.aio.linux.mirror import MirrorError, MirrorState, recv_frame, send_frame
from sslacc_sim.aio.linux.service import Lease, LeaseExpired, Service
from sslacc_sim.aio.linux.sniff import ACK, FIN, RST, SYN, FlowTracker, parse_frame
from sslacc_sim.aio.linux.takeover import snapshot_from_flow

VIP, CLIENT = ("10.88.0.100", 443), ("10.88.0.2", 40000)
MAC_A, MAC_C = bytes.fromhex("02000000000a"), bytes.fromhex("02000000000c")


def frame(src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
          payload: bytes = b"", options: bytes = b"", window: int = 1000,
          src_mac: bytes = MAC_C) -> bytes:  # fmt: skip
    """An Ethernet/IPv4/TCP frame packed here, independently of the parser."""
    opts = options + b"\0" * (-len(options) % 4)
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, ack, (5 + len(opts) // 4) << 4, flags,
                      window, 0, 0) + opts + payload  # fmt: skip
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))  # fmt: skip
    return MAC_A + src_mac + b"\x08\x00" + ip + tcp


SYN_OPTS = b"\x02\x04\x05\xb4" + b"\x01\x03\x03\x07" + b"\x04\x02"  # MSS 1460, wscale 7, SACK


def test_a_frame_round_trips_through_the_parser() -> None:
    seg = parse_frame(frame(CLIENT, VIP, 7, 9, SYN, b"", SYN_OPTS))
    assert seg is not None
    assert (seg.src, seg.dst, seg.seq, seg.ack, seg.flags) == (CLIENT, VIP, 7, 9, SYN)
    assert seg.options == {2: b"\x05\xb4", 3: b"\x07", 4: b""} and seg.src_mac == MAC_C


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_the_parser_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    for cut in (False, True):
        parse_frame(data, cut=cut)
        parse_frame(frame(CLIENT, VIP, 1, 2, ACK)[:34] + data, cut=cut)  # valid head, garbage


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 300))
def test_a_frame_cut_by_the_filter_keeps_its_header_and_size(payload: bytes, keep: int) -> None:
    whole = frame(VIP, CLIENT, 5, 6, ACK, payload, b"\x01\x01\x08\x0a" + bytes(8))
    seg = parse_frame(whole[: 14 + 20 + 32 + keep], cut=True)
    assert seg is not None and seg.size == len(payload)
    assert seg.payload == payload[:keep] and seg.whole == (keep >= len(payload))
    assert (seg.src, seg.dst, seg.seq, seg.ack, seg.flags) == (VIP, CLIENT, 5, 6, ACK)
    assert (parse_frame(whole[: 14 + 20 + 32 + keep]) is None) == (keep < len(payload))


def _with_ip_options(plain: bytes, words: int) -> bytes:
    """``plain`` (a :func:`frame`) with ``words`` 4-byte words of IP options (no-ops) added."""
    ip_len = struct.unpack(">H", plain[16:18])[0]
    head = bytes([0x45 + words]) + plain[15:16] + struct.pack(">H", ip_len + 4 * words)
    return plain[:14] + head + plain[18:34] + b"\x01" * (4 * words) + plain[34:]


@pytest.mark.parametrize("words", [0, 1])
@pytest.mark.parametrize("protocol", [1, 17, 41])
def test_another_protocol_is_not_a_segment(protocol: int, words: int) -> None:
    """ICMP, UDP and IPv6-in-IPv4 with a TCP-shaped body, with and without IP options."""
    plain = _with_ip_options(frame(CLIENT, VIP, 1, 2, ACK, b"data"), words)
    other = plain[:23] + bytes([protocol]) + plain[24:]
    assert parse_frame(plain) is not None and parse_frame(other) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 255),
       st.binary(max_size=64), st.sampled_from([b"", SYN_OPTS, b"\x01\x01\x08\x0a" + bytes(8)]),
       st.integers(1, 10), st.integers(0, 80), st.booleans(), st.booleans())  # fmt: skip
def test_ip_options_change_nothing_in_the_segment(seq: int, ack: int, flags: int, payload: bytes,
                                                 options: bytes, words: int, keep: int,
                                                 cut: bool, to_client: bool) -> None:  # fmt: skip
    """A header without IP options is read in one unpack, any other the long way: both read
    the same segment, whole or cut (``keep``: bytes of the payload the frame holds)."""
    src, dst = (VIP, CLIENT) if to_client else (CLIENT, VIP)
    plain = frame(src, dst, seq, ack, flags, payload, options)
    tail = len(payload) - min(keep, len(payload))  # bytes cut off the end
    plain_seg = parse_frame(plain[:len(plain) - tail], cut=cut)
    opts_frame = _with_ip_options(plain, words)
    opts_seg = parse_frame(opts_frame[:len(opts_frame) - tail], cut=cut)
    assert (plain_seg is None) == (opts_seg is None)
    if plain_seg is not None and opts_seg is not None:
        assert plain_seg._replace(packet=b"") == opts_seg._replace(packet=b"")
        assert (plain_seg.src, plain_seg.dst, plain_seg.seq, plain_seg.flags) == (src, dst, seq,
                                                                                 flags)  # fmt: skip
        assert plain_seg.size == len(payload) and plain_seg.payload == payload[:keep]
        assert bool(plain_seg.packet) == bool(opts_seg.packet)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=64))
def test_malformed_options_end_the_list_instead_of_raising(options: bytes, payload: bytes) -> None:
    seg = parse_frame(frame(CLIENT, VIP, 1, 2, ACK, payload, options))
    assert seg is None or seg.payload == payload


def _handshake(tracker: FlowTracker) -> None:
    tracker.feed(parse_frame(frame(CLIENT, VIP, 1000, 0, SYN, options=SYN_OPTS)))  # type: ignore[arg-type]
    tracker.feed(parse_frame(frame(VIP, CLIENT, 5000, 1001, SYN | ACK,  # type: ignore[arg-type]
                                   options=b"\x02\x04\x05\xb4\x01\x03\x03\x09\x04\x02")))


def test_the_tracker_keeps_the_syn_exchange_and_the_client_bytes_in_order() -> None:
    tracker = FlowTracker(VIP)
    _handshake(tracker)
    # the client's bytes arrive out of order and with a retransmitted overlap
    for seq, data in ((1006, b"world"), (1001, b"hello"), (1004, b"loworld!"), (1012, b"!")):
        tracker.feed(parse_frame(frame(CLIENT, VIP, seq, 5001, ACK, data, window=300)))  # type: ignore[arg-type]
    flow = tracker.flows[CLIENT]
    assert bytes(flow.data) == b"helloworld!!"
    assert (flow.client_isn, flow.server_isn, flow.client_mss) == (1000, 5000, 1460)
    assert (flow.client_wscale, flow.server_wscale, flow.client_sack) == (7, 9, True)
    assert flow.acked == 5001 and flow.client_window == 300
    snap = snapshot_from_flow(flow, *VIP)
    assert (snap.snd_nxt, snap.rcv_nxt, snap.snd_wscale, snap.rcv_wscale) == (5001, 1001, 7, 9)
    assert snap.snd_wnd == 300 << 7 and snap.sack


def test_a_cut_frame_counts_for_the_servers_position_but_never_for_client_bytes() -> None:
    tracker = FlowTracker(VIP)
    _handshake(tracker)
    data = frame(CLIENT, VIP, 1001, 5001, ACK, b"hello world")
    tracker.feed(parse_frame(data[:-4], cut=True))  # type: ignore[arg-type]
    assert bytes(tracker.flows[CLIENT].data) == b""  # a part would read as the whole
    tracker.feed(parse_frame(data, cut=True))  # type: ignore[arg-type]
    assert bytes(tracker.flows[CLIENT].data) == b"hello world"
    reply = frame(VIP, CLIENT, 5001, 1012, ACK, b"x" * 1000)
    tracker.feed(parse_frame(reply[:80], cut=True))  # type: ignore[arg-type]
    assert tracker.flows[CLIENT].sent_end == 6001


def test_a_reset_or_an_unknown_flow_is_marked_or_ignored() -> None:
    tracker = FlowTracker(VIP)
    tracker.feed(parse_frame(frame(("10.88.0.9", 1), VIP, 1, 1, ACK, b"x")))  # type: ignore[arg-type]
    assert tracker.flows == {}  # no SYN heard: nothing to restore
    _handshake(tracker)
    tracker.feed(parse_frame(frame(CLIENT, VIP, 1001, 5001, RST)))  # type: ignore[arg-type]
    assert tracker.flows[CLIENT].reset
    tracker.feed(parse_frame(frame(CLIENT, VIP, 2000, 0, SYN, options=SYN_OPTS)))  # type: ignore[arg-type]
    assert not tracker.flows[CLIENT].reset and tracker.flows[CLIENT].client_isn == 2000


def test_an_owner_without_its_lease_writes_nothing(tmp_path: Path) -> None:
    """A node whose lease ran out (it was stopped, its buddy may own its connections now)
    never writes a byte of a response: ``LeaseExpired`` before the first write."""
    (tmp_path / "f").write_bytes(b"y" * 300_000)
    expired = Lease(0.01, renewed=time.monotonic() - 1.0)
    server, client = socket.socketpair()
    with server, client:
        client.sendall(b"GET /f HTTP/1.1\r\nConnection: close\r\n\r\n")
        server.settimeout(5.0)  # a write that went ahead would block (nobody reads): fail
        with pytest.raises(LeaseExpired):
            Service(server, Docroot(tmp_path), None, lease=expired).serve()
        client.setblocking(False)
        with pytest.raises(BlockingIOError):
            client.recv(1)  # not one byte
    server, client = socket.socketpair()
    got = bytearray()
    with server, client:  # the same with a lease held: the whole response
        client.sendall(b"GET /f HTTP/1.1\r\nConnection: close\r\n\r\n")
        reader = threading.Thread(target=lambda: got.extend(_read_all(client)))
        reader.start()
        Service(server, Docroot(tmp_path), None, lease=Lease(60.0)).serve()
        reader.join(timeout=30)
    assert got.endswith(b"y" * 300_000)


@pytest.mark.parametrize("client_sends", [b"BREW /pot HTTP/1.1\r\n\r\n", b""])
def test_every_end_of_a_connection_tells_the_buddy_done(tmp_path: Path,
                                                         client_sends: bytes) -> None:  # fmt: skip
    """A connection that ends here -- garbage from the client, or the client closing before
    a request -- sends ``done`` before its link closes: a link closed without it would make
    the buddy take the whole node over (a false death)."""
    server, client = socket.socketpair()
    mirror_a, mirror_b = socket.socketpair()
    with server, client, mirror_a, mirror_b:
        client.sendall(client_sends)
        client.shutdown(socket.SHUT_WR)
        service = Service(server, Docroot(tmp_path), None, mirror=mirror_a)
        if client_sends:
            with pytest.raises(ValueError, match="only GET and POST"):
                service.serve_to_end()
        else:
            service.serve_to_end()
        mirror_a.close()
        frame = recv_frame(mirror_b)
        assert frame is not None and frame[0]["type"] == "done"
        assert ("ValueError" if client_sends else "the client closed") in frame[0]["why"]


def _read_all(sock: socket.socket) -> bytes:
    """Everything up to the server's end, then this side's end (the server waits for it)."""
    out = bytearray()
    while chunk := sock.recv(1 << 16):
        out += chunk
    sock.shutdown(socket.SHUT_WR)
    return bytes(out)


def test_the_lease_ends_and_renews() -> None:
    lease = Lease(0.05)
    assert lease.valid()
    time.sleep(0.06)
    assert not lease.valid()
    lease.renew(time.monotonic())
    assert lease.valid()
    lease.renew(0.0)  # an older answer never shortens it
    assert lease.valid()


# --- the campaign's analysis ----------------------------------------------------------------


def test_flows_are_classified_and_gaps_measured_from_another_node() -> None:
    a, b = "aa", "bb"
    rows = [
        (0.0, a, 1, 100, 0, SYN | ACK), (0.1, a, 1, 101, 1000, ACK), (0.2, a, 1, 1101, 5000, ACK),
        (1.001, a, 1, 6101, 1000, ACK),  # the victim's segment still on its way: not the gap
        (1.05, b, 1, 6101, 1000, ACK),
        (0.0, a, 2, 500, 0, SYN | ACK), (0.5, a, 2, 501, 100, FIN | ACK),
        (0.9, a, 3, 900, 0, SYN | ACK), (1.2, b, 3, 901, 900, ACK),
        (1.3, b, 4, 50, 0, SYN | ACK),
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].phase == "transfer" and at[1].had == 6000
    assert at[1].gap_s == pytest.approx(0.05)
    assert at[2].phase == "finished" and at[2].gap_s is None
    assert at[3].phase == "handshake" and at[3].gap_s == pytest.approx(0.2)
    assert at[4].phase == "no-syn-ack"
    late = [(2.0, a, 1, 1, 0, RST), (2.1, a, 1, 1, 0, ACK), (2.2, a, 1, 1, 0, FIN | ACK)]
    assert zombie_frames([*rows, *late], a, 1.5) == 2  # the reset and the FIN, not the ACK


def test_an_uploads_gap_ends_at_an_acknowledgement_the_client_accepts() -> None:
    """Rows with the ack column (what record_frames writes): an uploading client waits for
    an acknowledgement, not for data. The new owner's window probe (sequence number one below
    the client's acknowledgement: the client drops it unread) does not end the gap, nor does a
    retransmission of server bytes the client holds; an acceptable ACK of new client bytes does.
    Seen in a campaign capture: the probe's ACK was ignored and the client waited 200 ms."""
    a, b = "aa", "bb"
    rows = [
        (0.0, a, 1, 1000, 0, SYN | ACK, 0, 501), (0.1, a, 1, 1001, 935, ACK, 0, 501),
        (0.2, CLIENT_ROW, 1, 1936, 0, ACK, 60000, 501),  # the client has the 935 bytes ...
        (0.3, a, 1, 1936, 0, ACK, 0, 90000),  # ... and uploads: A acknowledged up to 90000
        (1.02, b, 1, 1935, 0, ACK, 0, 120000),  # B's window probe: one below, dropped
        (1.03, CLIENT_ROW, 1, 1936, 0, ACK, 60000, 120000),  # the client's answer
        (1.04, b, 1, 1001, 935, ACK, 0, 120000),  # a retransmission of what it holds
        (1.25, b, 1, 1936, 0, ACK, 0, 120000),  # an acceptable ACK of new client bytes
        (0.0, a, 2, 5000, 0, SYN | ACK, 0, 1), (0.1, a, 2, 5001, 100, ACK, 0, 1),
        (1.5, b, 2, 5101, 0, ACK, 0, 1),  # accepted, but acknowledges nothing new
        (1.6, b, 2, 5101, 50, ACK, 0, 1),  # new server bytes
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].gap_s == pytest.approx(0.25)
    assert at[2].gap_s == pytest.approx(0.6)


def test_a_connection_begun_after_the_fault_is_not_one_it_hit() -> None:
    """Client SYN rows (what record_frames writes) tell when each connection began: one whose
    SYN left after the kill is ``after`` (its first byte measures no takeover), one whose SYN
    was out and unanswered is ``no-syn-ack``, also when no SYN-ACK ever came."""
    a, b = "aa", "bb"
    rows = [
        (0.9, CLIENT_ROW, 1, 0, 0, SYN, 0, 700),  # out before the kill, unanswered
        (1.02, b, 1, 100, 0, SYN | ACK, 0, 701), (1.03, b, 1, 101, 900, ACK, 0, 701),
        (2.0, CLIENT_ROW, 2, 0, 0, SYN, 0, 800),  # a new connection, a second later
        (2.001, b, 2, 300, 0, SYN | ACK, 0, 801), (2.002, b, 2, 301, 900, ACK, 0, 801),
        (0.95, CLIENT_ROW, 3, 0, 0, SYN, 0, 900),  # never answered at all
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].phase == "no-syn-ack" and at[1].gap_s == pytest.approx(0.03)
    assert at[2].phase == "after"
    assert at[3].phase == "no-syn-ack" and at[3].gap_s is None


def test_a_client_that_sends_again_before_its_next_byte_is_found() -> None:
    """A client that resends (data with no new byte, or a second SYN) between the kill and
    its next byte waited for its own timer: ``resent_s``, and the summary counts it, and
    whether the next byte answered it within 20 ms. New data, a resend before the kill or
    after the next byte, and a window probe (no data) are not resends."""
    a, b = "aa", "bb"
    rows = [
        # 1: uploads 1000 bytes at 0.5 s into the void; resends them at 1.2 s, answered at once
        (0.0, a, 1, 100, 0, SYN | ACK, 0, 501), (0.1, CLIENT_ROW, 1, 101, 1000, ACK, 9000, 501),
        (0.9, CLIENT_ROW, 1, 101, 1000, ACK, 9000, 1501),
        (1.2, CLIENT_ROW, 1, 101, 1000, ACK, 9000, 1501),
        (1.205, b, 1, 101, 0, ACK, 0, 2501),
        # 2: only new data after the kill, then its gap ends; a resend after it does not count
        (0.0, a, 2, 100, 0, SYN | ACK, 0, 701), (0.95, CLIENT_ROW, 2, 101, 500, ACK, 9000, 701),
        (1.01, CLIENT_ROW, 2, 101, 500, ACK, 9000, 1201), (1.02, b, 2, 101, 0, ACK, 0, 1701),
        (1.3, CLIENT_ROW, 2, 101, 500, ACK, 9000, 1201),
        # 3: a SYN out before the kill, sent again after it (its timer), answered 0.1 s later
        (0.9, CLIENT_ROW, 3, 0, 0, SYN, 0, 900), (1.9, CLIENT_ROW, 3, 0, 0, SYN, 0, 900),
        (2.0, b, 3, 300, 0, SYN | ACK, 0, 901),
        # 4: a resend before the kill and a zero-length window probe after it
        (0.0, a, 4, 100, 0, SYN | ACK, 0, 41), (0.2, CLIENT_ROW, 4, 101, 100, ACK, 9000, 41),
        (0.3, CLIENT_ROW, 4, 101, 100, ACK, 9000, 41),
        (1.1, CLIENT_ROW, 4, 101, 0, ACK, 0, 140), (1.15, b, 4, 101, 0, ACK, 0, 141),
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].resent_s == pytest.approx(0.2) and at[1].gap_s == pytest.approx(0.205)
    assert at[2].resent_s is None and at[2].gap_s == pytest.approx(0.02)
    assert at[3].phase == "no-syn-ack" and at[3].resent_s == pytest.approx(0.9)
    assert at[4].resent_s is None
    flows = pd.DataFrame([{"trial": 0, **vars(f)} for f in at.values()])
    assert resends(flows) == {"n": 4, "resent": 2, "p50_s": pytest.approx(0.55),
                              "max_s": pytest.approx(0.9), "answered_within_20ms": 1}


def test_a_connection_its_client_reset_before_the_fault_is_finished() -> None:
    """Seen in a campaign's pcap: a client that has its response closes first (close_notify,
    FIN); the server's close_notify then meets a closed socket, and the client resets. No
    server FIN ever comes, yet the client waits for nothing: ``finished``, not ``transfer``."""
    a = "aa"
    rows = [
        (0.0, a, 1, 100, 0, SYN | ACK, 0, 501), (0.1, a, 1, 101, 66784, ACK, 0, 601),
        (0.2, CLIENT_ROW, 1, 66885, 53, ACK, 9000, 601),  # the client's close_notify ...
        (0.2, CLIENT_ROW, 1, 66885, 0, ACK | FIN, 9000, 654),  # ... and FIN
        (0.25, a, 1, 66885, 53, ACK, 0, 655),  # the server's close_notify
        (0.25, CLIENT_ROW, 1, 0, 0, RST, 0, 655),  # the client's reset
        (0.0, a, 2, 100, 0, SYN | ACK, 0, 501), (0.1, a, 2, 101, 66784, ACK, 0, 601),
        (1.5, CLIENT_ROW, 2, 0, 0, RST, 0, 601),  # a reset after the fault: it was hit
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].phase == "finished"
    assert at[2].phase == "transfer"


def test_wilson_bound_and_quantile() -> None:
    assert wilson_lower(10, 10) == pytest.approx(0.7225, abs=1e-4)
    assert wilson_lower(0, 10) == pytest.approx(0.0, abs=1e-12)
    assert wilson_lower(9990, 10000) == pytest.approx(0.99816, abs=1e-4)
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0 and quantile([], 0.5) is None


def test_the_summary_cuts_connections_by_request_and_gaps_by_window() -> None:
    conns = pd.DataFrame({"upload": [True, False, False, False], "repeat": [1, 1, 3, 1],
                          "resume": [False, False, False, True], "ok": [True, False, True, True]})
    assert by_request(conns) == {
        "download": {"connections": 2, "completed_exact": 1},
        "upload": {"connections": 1, "completed_exact": 1},
        "keep-alive": {"connections": 1, "completed_exact": 1},
        "resumed": {"connections": 1, "completed_exact": 1}}
    flows = pd.DataFrame({"phase": ["transfer", "transfer", "handshake", "finished"],
                          "gap_s": [0.01, 0.3, None, 0.5], "room": [100, 0, None, 5]})
    window = window_at_fault(flows)
    assert window.tolist() == ["open", "closed", "unknown", "open"]
    got = gaps_by(flows.assign(window=window), "window")  # finished connections have no gap
    assert got["open"] == {"n": 1, "without_gap": 0, "p50_s": 0.01, "p99_s": 0.01, "max_s": 0.01}
    assert got["closed"]["max_s"] == 0.3 and got["unknown"]["without_gap"] == 1


def test_the_summary_judges_the_latency_target_after_kills_only() -> None:
    """A hang's gap is bounded below by the keepalive timeout; the 30 / 150 ms targets are
    judged on kills and double kills (``gap_by_window_after_kills``)."""
    trials = pd.DataFrame({"trial": [0, 1, 2], "mode": ["none", "kill", "hang"],
                           "failed": [0, 0, 0], "took_over": [None, True, True],
                           "zombie_frames": [None, 0, 0], "detect_s": [None, 0.01, 0.2],
                           "takeover_before_fault": [None, False, False]})
    conns = pd.DataFrame({"mode": ["kill", "hang"], "ok": [True, True], "silently_wrong": [False, False],
                          "upload": [False, False], "repeat": [1, 1], "resume": [False, False],
                          "resumed": [None, None]})
    flows = pd.DataFrame({"mode": ["kill", "hang"], "phase": ["transfer", "transfer"],
                          "gap_s": [0.02, 0.21], "room": [100, 100]})
    got = campaign_summary({"modes": ["kill", "hang"]}, trials, conns, flows)
    assert got["gap_by_window"]["open"]["n"] == 2
    assert got["gap_by_window_after_kills"]["open"] == {
        "n": 1, "without_gap": 0, "p50_s": 0.02, "p99_s": 0.02, "max_s": 0.02}
    assert got["success_fraction"] == 1.0 and got["connections"] == 2


# --- any error on a cluster link is a death --------------------------------------------------


def _buddy() -> Backup:
    return Backup("127.0.0.1", 443, ("127.0.0.1", 0), "lo", Docroot(Path(__file__)), None,
                  controls=Controls())  # fmt: skip


def _link_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        owner = socket.create_connection(server.getsockname())
        buddy, _ = server.accept()
    return owner, buddy


@pytest.mark.parametrize("how", ["reset", "cut-frame", "eof", "silence"])
def test_any_error_on_a_link_is_a_death(how: str) -> None:
    node = _buddy()
    owner, buddy = _link_pair()
    send_frame(owner, {"type": "control"})
    worker = threading.Thread(target=node._link, args=(buddy,))
    worker.start()
    send_frame(owner, {"type": "beat"})
    assert owner.recv(1) == b"\x06"
    if how == "reset":
        send_frame(owner, {"type": "beat"})
        time.sleep(0.05)  # the answer waits unread: closing now sends a reset
        owner.close()
    elif how == "cut-frame":
        owner.sendall(b"\0\0\0\x10\0\0")  # a frame's lengths, cut short
        owner.close()
    elif how == "eof":
        owner.close()
    worker.join(timeout=5)
    assert node.death.is_set(), how
    expected = {"reset": "reset", "cut-frame": "inside a frame", "eof": "closed",
                "silence": "no keepalive"}[how]  # fmt: skip
    assert expected in node.reason.lower()
    if how == "silence":
        owner.close()


# --- the cluster link's frames ----------------------------------------------------------------


def _state_with_segments() -> MirrorState:
    from sslacc_sim.aio.linux.mirror import join_blob
    from sslacc_sim.aio.linux.repair import TcpSnapshot

    state = MirrorState()
    snap = TcpSnapshot(VIP, CLIENT, 5001, 1001, 1460, 7, 9, True, 65535, 65535, 65535)
    state.apply({"type": "tcp", "tcp": snap.to_json()}, b"")
    lengths, blob = join_blob({"raw": b"flight", "full": b"F" * 40, "keys": b"K" * 20})
    state.apply({"type": "update", "rcv_pos": 126, "snd_pos": 6, "una_pos": 0,
                 "app": {"phase": "request", "offset": 0},
                 "seg": {"pos": 0, "length": 6, "raw": True}, "parts": lengths}, blob)  # fmt: skip
    lengths, blob = join_blob({"progress": b"P" * 18})
    state.apply({"type": "update", "rcv_pos": 300, "snd_pos": 1006, "una_pos": 0,
                 "app": {"phase": "response", "offset": 900, "path": "/f1"},
                 "seg": {"pos": 6, "length": 1000, "offset": 0, "plain_len": 900,
                         "write_seq": 1}, "parts": lengths}, blob)  # fmt: skip
    return state


def test_an_adopt_frame_hands_over_the_whole_state() -> None:
    state = _state_with_segments()
    header, blob = state.adopt_frame()
    header = json.loads(json.dumps(header))  # as it crosses the link
    copy = MirrorState()
    copy.apply(header, blob)
    assert copy == state
    with pytest.raises(MirrorError, match="already mirrored"):
        copy.apply(header, blob)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["type", "tcp", "seg", "snd_pos", "rcv_pos", "una_pos",
                                        "app", "parts", "segments", "updates"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=8),
                                 st.sampled_from(["tcp", "update", "adopt", "done"]),
                                 st.lists(st.integers(), max_size=3),
                                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))),
       st.binary(max_size=64))  # fmt: skip
def test_any_malformed_frame_is_a_mirror_error(header: dict[str, object], blob: bytes) -> None:
    for state in (MirrorState(), _state_with_segments()):
        try:
            state.apply(header, blob)
        except MirrorError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_the_frame_reader_refuses_garbage_with_a_mirror_error(data: bytes) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)
        try:
            while recv_frame(b) is not None:
                pass
        except MirrorError:
            pass
