"""What a node hears on the LAN: the client's side of every connection to the virtual IP.

Linux acknowledges a client's bytes as soon as they arrive, before the server process has read
them, let alone mirrored them; a node dying in between would take bytes with it that the
client, acknowledged, never sends again. The paper's relay withholds the ACK until the buddy
holds the state (SSLACC §5.5). This testbed closes the same gap from the other side: the
cluster's bridge *floods* every frame to every port (``ageing_time 0``: it learns no address,
like a hub), so the buddy receives each client segment in the same forwarding step that
delivers it to the owner, before the owner's TCP can acknowledge it. The buddy keeps, per
connection, the client's bytes and the SYN exchange (:class:`FlowTracker`), and on takeover
puts the bytes the owner had not consumed back into the restored socket's receive queue.
The same record saves connections the owner's kernel had established but its server had not
accepted yet: the buddy rebuilds them from the SYN and SYN-ACK it heard.

The paper rejected multicasting client data to every node because updates share the wire
(§4); on a flooding bridge the copy costs the sender nothing, only every port's bandwidth, which
this testbed measures (``bench_sslacc_cluster``) rather than assumes.

:func:`parse_frame` reads one Ethernet frame (IPv4/TCP only; anything else is ``None``; never
raises on bad input). :class:`FlowTracker` is pure bookkeeping (no I/O); :func:`capture`
feeds it from an ``AF_PACKET`` socket. :func:`record_server_frames` is the client-side probe of
the campaign: the arrival time, source MAC, flow and sequence numbers of every server segment.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "TcpFrame", "Flow", "FlowTracker", "parse_frame", "packet_socket", "capture",
    "record_server_frames", "SYN", "ACK", "FIN", "RST",
]

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
_SO_RCVBUFFORCE = 33
_ETH_P_IP = 0x0800
_MAX_FLOW_BYTES = 1 << 25  # a client that sends more than this is not tracked further


@dataclass(frozen=True, slots=True)
class TcpFrame:
    """One TCP segment as heard on the wire."""

    src_mac: bytes
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    window: int
    options: dict[int, bytes]
    payload: bytes


def _options(raw: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    i = 0
    while i < len(raw):
        kind = raw[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(raw) or raw[i + 1] < 2 or i + raw[i + 1] > len(raw):
            break  # a malformed option ends the list
        out[kind] = raw[i + 2 : i + raw[i + 1]]
        i += raw[i + 1]
    return out


def parse_frame(frame: bytes) -> TcpFrame | None:
    """The TCP segment in an Ethernet frame, or ``None`` (not IPv4/TCP, truncated, malformed)."""
    if len(frame) < 14 + 20 + 20 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[0] >> 4 != 4 or ihl < 20 or ip[9] != 6:
        return None
    total = struct.unpack(">H", ip[2:4])[0]
    if total < ihl + 20 or total > len(ip):
        return None
    tcp = ip[ihl:total]
    off = (tcp[12] >> 4) * 4
    if off < 20 or off > len(tcp):
        return None
    sport, dport, seq, ack = struct.unpack(">HHII", tcp[:12])
    window = struct.unpack(">H", tcp[14:16])[0]
    return TcpFrame(frame[6:12], (socket.inet_ntoa(ip[12:16]), sport),
                    (socket.inet_ntoa(ip[16:20]), dport), seq, ack, tcp[13], window,
                    _options(tcp[20:off]), bytes(tcp[off:]))  # fmt: skip


def _after(a: int, b: int) -> bool:
    """``a`` is after ``b`` in 32-bit sequence space."""
    return 0 < (a - b) & 0xFFFFFFFF < 1 << 31


@dataclass
class Flow:
    """One client's connection to the service, as heard: the SYN exchange and the client's
    bytes, contiguous from the first byte after its SYN."""

    client: tuple[str, int]
    client_isn: int
    client_mss: int = 536
    client_wscale: int | None = None
    client_sack: bool = False
    server_isn: int | None = None
    server_wscale: int | None = None
    server_sack: bool = False
    client_window: int = 0
    server_window: int = 0
    data: bytearray = field(default_factory=bytearray)
    pending: dict[int, bytes] = field(default_factory=dict)
    acked: int | None = None
    """The highest server sequence number the client acknowledged."""
    fin: bool = False
    server_fin: bool = False
    reset: bool = False
    overflow: bool = False

    @property
    def established(self) -> bool:
        """The server answered the SYN (a SYN-ACK was heard)."""
        return self.server_isn is not None

    @property
    def rcv_base(self) -> int:
        """The sequence number of the client's first data byte."""
        return (self.client_isn + 1) & 0xFFFFFFFF

    def client_bytes(self, seq: int, payload: bytes) -> None:
        """Client data at ``seq``: appended when contiguous, else held until the gap fills."""
        rel = (seq - self.rcv_base) & 0xFFFFFFFF
        if rel >= 1 << 31 or self.overflow:
            return
        if rel + len(payload) > _MAX_FLOW_BYTES:
            self.overflow = True
            return
        if rel > len(self.data):
            self.pending[rel] = payload
            return
        self.data += payload[len(self.data) - rel :]
        while self.pending:
            ready = [r for r in self.pending if r <= len(self.data)]
            if not ready:
                break
            for r in sorted(ready):
                chunk = self.pending.pop(r)
                self.data += chunk[len(self.data) - r :]


@dataclass
class FlowTracker:
    """Every connection to ``service`` (address, port) heard on the LAN, by client address."""

    service: tuple[str, int]
    flows: dict[tuple[str, int], Flow] = field(default_factory=dict)
    frames: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def feed(self, seg: TcpFrame) -> None:
        """Take one heard segment (either direction; others are ignored)."""
        with self.lock:
            self.frames += 1
            if seg.dst == self.service:
                self._from_client(seg)
            elif seg.src == self.service:
                self._from_server(seg)

    def _from_client(self, seg: TcpFrame) -> None:
        flow = self.flows.get(seg.src)
        if seg.flags & SYN and not seg.flags & ACK:
            if flow is None or flow.client_isn != seg.seq:
                wscale = seg.options.get(3)
                mss = seg.options.get(2)
                self.flows[seg.src] = Flow(
                    seg.src, seg.seq, struct.unpack(">H", mss)[0] if len(mss or b"") == 2 else 536,
                    wscale[0] if wscale else None, 4 in seg.options)  # fmt: skip
            return
        if flow is None:
            return
        if seg.flags & RST:
            flow.reset = True
            return
        if seg.flags & ACK and (flow.acked is None or _after(seg.ack, flow.acked)):
            flow.acked = seg.ack
        flow.client_window = seg.window
        if seg.payload:
            flow.client_bytes(seg.seq, seg.payload)
        if seg.flags & FIN:
            flow.fin = True

    def _from_server(self, seg: TcpFrame) -> None:
        flow = self.flows.get(seg.dst)
        if flow is None:
            return
        if seg.flags & RST:
            flow.reset = True
            return
        if seg.flags & SYN and seg.flags & ACK and seg.ack == flow.rcv_base:
            wscale = seg.options.get(3)
            flow.server_isn = seg.seq
            flow.server_wscale = wscale[0] if wscale else None
            flow.server_sack = 4 in seg.options
        flow.server_window = seg.window
        if seg.flags & FIN:
            flow.server_fin = True

    def forget(self, client: tuple[str, int]) -> None:
        """Drop a finished connection's record."""
        with self.lock:
            self.flows.pop(client, None)


def packet_socket(dev: str, rcvbuf: int = 1 << 26) -> socket.socket:
    """An ``AF_PACKET`` socket on ``dev`` receiving every IPv4 frame it carries (root)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_IP))
    s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, rcvbuf)  # beyond rmem_max: root
    s.bind((dev, 0))
    return s


def capture(sock: socket.socket, tracker: FlowTracker, stop: threading.Event) -> None:
    """Feed ``tracker`` from ``sock`` until ``stop`` is set, then drain what is queued."""
    sock.settimeout(0.02)
    while True:
        if stop.is_set() and sock.gettimeout() != 0.0:
            sock.setblocking(False)  # stopped: read only what is queued already
        try:
            frame = sock.recv(1 << 17)
        except BlockingIOError:
            return
        except (TimeoutError, InterruptedError):
            continue
        seg = parse_frame(frame)
        if seg is not None:
            tracker.feed(seg)


def record_server_frames(sock: socket.socket, service: tuple[str, int],
                         stop: Callable[[], bool]) -> list[tuple[float, str, int, int, int, int]]:  # fmt: skip
    """``(time, source MAC hex, client port, seq, payload length, flags)`` of every segment from
    ``service`` heard on ``sock`` until ``stop()`` (checked every 0.2 s); ``time.monotonic()``,
    one clock for every namespace."""
    seen: list[tuple[float, str, int, int, int, int]] = []
    sock.settimeout(0.2)
    while not stop():
        try:
            frame = sock.recv(1 << 17)
        except (TimeoutError, InterruptedError):
            continue
        now = time.monotonic()
        seg = parse_frame(frame)
        if seg is not None and seg.src == service:
            seen.append((now, seg.src_mac.hex(), seg.dst[1], seg.seq, len(seg.payload),
                         seg.flags))  # fmt: skip
    return seen
