"""The sniffer's socket filter, run by the kernel on real traffic (loopback, root).

A packet socket on ``lo`` with :func:`~sslacc_sim.aio.linux.lanfilter.service_filter` for one
listening port must hand over the client's segments to that port whole, the server's cut to
their headers (with the payload's length still readable: ``TcpFrame.size``), and nothing else:
not the same port over UDP, not another TCP port. The record built from the cut frames must be
the one the whole frames build.
"""

from __future__ import annotations

import select
import socket
import threading
import time

from sslacc_sim.aio.linux.lanfilter import HEAD
from sslacc_sim.aio.linux.sniff import FlowTracker, TcpFrame, packet_socket, parse_frame

_LO = "127.0.0.1"


def _frames(sock: socket.socket, quiet: float = 0.3) -> list[bytes]:
    """Every frame ``sock`` holds, once it has been quiet for ``quiet`` seconds."""
    out = []
    while select.select([sock], [], [], quiet)[0]:
        out.append(sock.recv(1 << 18))
    return out


def _exchange(port: int, other: int, upload: bytes, answer: bytes) -> None:
    """A client sends ``upload`` to ``port`` and reads ``answer``; a UDP datagram goes to the
    same port, and a TCP exchange to ``other``."""
    with socket.create_server((_LO, port)) as server, socket.create_server((_LO, other)) as noise:

        def serve(listener: socket.socket, reply: bytes) -> None:
            conn, _ = listener.accept()
            with conn:
                got = 0
                while got < len(upload):
                    got += len(conn.recv(1 << 16))
                conn.sendall(reply)

        threads = [threading.Thread(target=serve, args=(server, answer)),
                   threading.Thread(target=serve, args=(noise, answer))]  # fmt: skip
        for t in threads:
            t.start()
        for to in (port, other):
            with socket.create_connection((_LO, to)) as c:
                c.sendall(upload)
                got = b""
                while len(got) < len(answer):
                    got += c.recv(1 << 16)
                assert got == answer
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"u" * 500, (_LO, port))
        for t in threads:
            t.join(10)


def test_the_filter_keeps_client_segments_whole_and_cuts_the_servers() -> None:
    with socket.socket() as probe:  # two ports free a moment ago
        probe.bind((_LO, 0))
        port = probe.getsockname()[1]
    with socket.socket() as probe:
        probe.bind((_LO, 0))
        other = probe.getsockname()[1]
    upload = bytes(range(256)) * 300  # 76,800 bytes
    answer = b"A" * 200_000
    service = (_LO, port)
    with packet_socket("lo", service=service) as filtered, packet_socket("lo") as whole:
        time.sleep(0.05)
        _exchange(port, other, upload, answer)
        time.sleep(0.1)
        cut_frames, whole_frames = _frames(filtered), _frames(whole)
    segs = [parse_frame(f, cut=True) for f in cut_frames]
    assert segs and all(s is not None for s in segs)
    ours = [s for s in segs if s is not None]
    assert all(service in (s.src, s.dst) for s in ours)  # no UDP, no other port
    from_server = [(s, f) for s, f in zip(ours, cut_frames, strict=True) if s.src == service]
    to_server = [s for s in ours if s.dst == service]
    assert all(len(f) <= HEAD for _, f in from_server)
    assert sum(s.size for s, _ in from_server) == len(answer)
    assert sum(len(s.payload) for s in to_server) == len(upload)
    assert all(s.whole for s in to_server)
    # the unfiltered socket heard the same segments, and more
    heard = [s for s in (parse_frame(f) for f in whole_frames) if s is not None]
    key = lambda s: (s.src, s.dst, s.seq, s.ack, s.flags, s.size)  # noqa: E731
    assert sorted(map(key, ours)) == sorted(key(s) for s in heard if service in (s.src, s.dst))
    assert any(service not in (s.src, s.dst) for s in heard)
    assert _record(ours, service) == _record(
        [s for s in heard if service in (s.src, s.dst)], service)


def _record(segs: list[TcpFrame], service: tuple[str, int]) -> list[tuple[object, ...]]:
    tracker = FlowTracker(service)
    for s in segs:
        tracker.feed(s)
    return sorted((f.client, bytes(f.data), f.acked, f.sent_end, f.fin, f.server_fin)
                  for f in tracker.flows.values())  # fmt: skip
