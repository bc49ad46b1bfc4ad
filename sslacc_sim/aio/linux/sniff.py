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
raises on bad input). :class:`FlowTracker` is pure bookkeeping (no I/O); :class:`Sniffer`
feeds it from an ``AF_PACKET`` socket. The campaign's client-side probe, which records every
segment's header, is :mod:`~sslacc_sim.aio.linux.probe`.
"""

from __future__ import annotations

import itertools
import math
import os
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from . import lanfilter
from .threads import normal_thread

__all__ = [
    "TcpFrame", "Flow", "FlowTracker", "Recent", "parse_frame", "packet_socket", "Sniffer",
    "SYN", "ACK", "FIN", "RST",
]

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
_SO_RCVBUFFORCE = 33
_ETH_P_IP = 0x0800
_ETH_P_ALL = 0x0003
_SO_TIMESTAMPNS = 35
_PACKET_OUTGOING = 4  # a packet socket's address: a frame this host sent (linux/if_packet.h)
_MAX_FLOW_BYTES = 1 << 25  # client bytes not yet consumed beyond this: not tracked further
_TRIM_AT = 1 << 20  # consumed bytes the record forgets at once (one memmove per MiB)
_RECENT_BYTES = 1 << 26  # client bytes of connections not kept, heard last (Recent)
_MAX_OTHERS = 1 << 16  # connections not kept whose SYN exchange is remembered


class TcpFrame(NamedTuple):
    """One TCP segment as heard on the wire. (A named tuple: the sniffer makes one for each of
    some 10,000 frames a second, and a frozen dataclass took 1.4 us of its 3.)"""

    src_mac: bytes
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    window: int
    options: dict[int, bytes]
    """The options of a SYN or SYN-ACK (MSS, window scale, SACK: what the record needs); not
    parsed for other segments (most frames are ACKs, and the parse would cost them most)."""
    payload: bytes
    """The segment's bytes as far as the frame holds them (a socket filter may have cut it:
    :mod:`~sslacc_sim.aio.linux.lanfilter`)."""
    size: int
    """The segment's payload length, from the IP header, whether or not the frame holds it all."""
    packet: bytes = b""
    """The whole IP packet, kept for a client's SYN only (:attr:`Flow.syn`); empty otherwise."""

    @property
    def whole(self) -> bool:
        """The frame holds the whole segment (its bytes can be recorded)."""
        return self.size == len(self.payload)


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


def parse_frame(frame: bytes, *, cut: bool = False) -> TcpFrame | None:
    """The TCP segment in an Ethernet frame, or ``None`` (not IPv4/TCP, truncated, malformed).

    ``cut``: a frame may end before its IP packet does (a socket filter kept its head only,
    :mod:`~sslacc_sim.aio.linux.lanfilter`), as long as it holds the whole TCP header; the
    segment's :attr:`~TcpFrame.size` says how long its payload was. The frame's bytes are
    read through a view: a 64 KiB segment's payload is copied once. An IP header without
    options (nearly every frame) is read with the TCP header in one unpack."""
    n = len(frame)
    if n < 14 + 20 + 20 or frame[12] != 0x08 or frame[13] != 0x00:
        return None
    if frame[14] == 0x45:  # IPv4, a 20-byte header: both headers in one unpack
        ihl = 20
        (total, protocol, src4, dst4, sport, dport, seq, ack, off_byte, flags,
         window) = _IP20_TCP_HEAD.unpack_from(frame, 16)  # fmt: skip
    else:
        version_ihl, total, protocol = _IP_HEAD.unpack_from(frame, 14)
        ihl = (version_ihl & 0x0F) * 4
        if version_ihl >> 4 != 4 or ihl < 20 or n < 14 + ihl + 20:
            return None
        src4, dst4 = frame[26:30], frame[30:34]
        sport, dport, seq, ack, off_byte, flags, window = _TCP_HEAD.unpack_from(frame, 14 + ihl)
    end = 14 + total
    if protocol != 6 or total < ihl + 20 or (end > n and not cut):
        return None
    t = 14 + ihl  # the TCP header (its fields, read above, count only from here on)
    if min(end, n) < t + 20:
        return None
    off = (off_byte >> 4) * 4
    if off < 20 or t + off > min(end, n):
        return None
    size = total - ihl - off
    view = memoryview(frame)
    payload = bytes(view[t + off : min(end, n)])
    packet = bytes(view[14:end]) if flags & (SYN | ACK) == SYN and end <= n else b""
    return TcpFrame(frame[6:12], (_address(src4), sport), (_address(dst4), dport), seq, ack,
                    flags, window,
                    _options(frame[t + 20 : t + off]) if off > 20 and flags & SYN else {},
                    payload, size, packet)  # fmt: skip


_IP_HEAD = struct.Struct(">BxHxxxxxB")  # version and IHL, total length, protocol
_TCP_HEAD = struct.Struct(">HHIIBBH")  # ports, seq, ack, data offset, flags, window
#: From the total length on: an IP header without options, then the TCP header's fields above.
_IP20_TCP_HEAD = struct.Struct(">HxxxxxBxx4s4sHHIIBBH")
#: Dotted addresses by their 4 bytes: a LAN has few, and each frame names two.
_ADDRESSES: dict[bytes, str] = {}


def _address(raw: bytes) -> str:
    """The dotted form of a 4-byte IPv4 address (:data:`_ADDRESSES`)."""
    text = _ADDRESSES.get(raw)
    if text is None:
        if len(_ADDRESSES) >= 1 << 12:  # a flood of forged sources cannot grow it
            _ADDRESSES.clear()
        text = _ADDRESSES[raw] = socket.inet_ntoa(raw)
    return text


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
    """The client's bytes heard and kept, from client byte :attr:`base` on."""
    base: int = 0
    """Client bytes before ``data`` (counted from the first byte after the SYN): the owner
    consumed and mirrored them, so the record forgot them (:meth:`trim`)."""
    pending: dict[int, bytes] = field(default_factory=dict)
    acked: int | None = None
    """The highest server sequence number the client acknowledged."""
    sent_end: int | None = None
    """The sequence number after the last server data byte heard (the highest)."""
    fin: bool = False
    server_fin: bool = False
    reset: bool = False
    overflow: bool = False
    syn: bytes = b""
    """The client's SYN as heard (the IP packet), to replay into the new owner's own stack
    when no SYN-ACK was heard (:func:`~sslacc_sim.aio.linux.takeover.replay_syns`)."""

    @property
    def established(self) -> bool:
        """The server answered the SYN (a SYN-ACK was heard)."""
        return self.server_isn is not None

    @property
    def rcv_base(self) -> int:
        """The sequence number of the client's first data byte."""
        return (self.client_isn + 1) & 0xFFFFFFFF

    @property
    def end(self) -> int:
        """Client bytes heard contiguously (counted from the first byte after the SYN)."""
        return self.base + len(self.data)

    def client_bytes(self, seq: int, payload: bytes) -> None:
        """Client data at ``seq``: appended when contiguous, else held until the gap fills. A
        record that would keep more than :data:`_MAX_FLOW_BYTES` not yet consumed stops
        (``overflow``: such a connection cannot be restored from it)."""
        rel = (seq - self.rcv_base) & 0xFFFFFFFF
        if rel >= 1 << 31 or self.overflow:
            return
        if rel + len(payload) - self.base > _MAX_FLOW_BYTES:
            self.overflow = True
            return
        if rel > self.end:
            self.pending[rel] = payload
            return
        self.data += payload[self.end - rel :]
        while self.pending:
            ready = [r for r in self.pending if r <= self.end]
            if not ready:
                break
            for r in sorted(ready):
                chunk = self.pending.pop(r)
                self.data += chunk[self.end - r :]

    def trim(self, consumed: int) -> int:
        """Forget the client bytes before ``consumed`` (the owner read and mirrored them: a
        takeover starts after them); returns how many were dropped."""
        n = min(max(consumed - self.base, 0), len(self.data))
        if n:
            del self.data[:n]
            self.base += n
        return n

    def data_from(self, rel: int) -> bytes:
        """The kept client bytes from byte ``rel`` on; ``ValueError`` if they were trimmed,
        never heard (``rel`` beyond :attr:`end`) or the record overflowed."""
        if self.overflow:
            raise ValueError(f"the LAN record overflowed ({_MAX_FLOW_BYTES} bytes not consumed)")
        if rel < self.base or rel > self.end:
            raise ValueError(f"the LAN record holds client bytes {self.base}..{self.end}, "
                             f"not from {rel}")  # fmt: skip
        return bytes(self.data[rel - self.base :])


@dataclass
class Recent:
    """The client bytes last heard of connections a tracker does not keep, in arrival order,
    at most ``limit`` bytes: what a member looks back into when a connection it did not keep
    becomes one it must (:meth:`FlowTracker.hold`). One may be shared by a member's trackers
    (one per predecessor), so that a tracker started after a death still sees back past it."""

    limit: int = _RECENT_BYTES
    segments: deque[tuple[tuple[str, int], int, bytes]] = field(default_factory=deque)
    size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, client: tuple[str, int], seq: int, payload: bytes) -> None:
        """One client segment's bytes (the oldest are forgotten beyond :attr:`limit`)."""
        with self.lock:
            self.segments.append((client, seq, payload))
            self.size += len(payload)
            while self.size > self.limit:
                self.size -= len(self.segments.popleft()[2])

    def of(self, clients: set[tuple[str, int]]) -> list[tuple[tuple[str, int], int, bytes]]:
        """The segments kept of ``clients``, oldest first."""
        with self.lock:
            return [s for s in self.segments if s[0] in clients]


@dataclass
class FlowTracker:
    """Every connection to ``service`` (address, port) heard on the LAN, by client address.

    With :attr:`keep`, the connections it does not keep are remembered all the same, without
    their bytes (:attr:`others`: the SYN exchange, the acknowledgements), and their bytes go
    to :attr:`recent`, so that one can be kept after all, with the bytes it needs, when the
    member learns that it must (:meth:`hold`, :meth:`promote`): a connection a neighbour took
    over from a member that died just before, which this member may not know dead yet."""

    service: tuple[str, int]
    flows: dict[tuple[str, int], Flow] = field(default_factory=dict)
    frames: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    keep: Callable[[tuple[str, int]], bool] | None = None
    """Which clients to record (``None``: all): a bucket-layout member records only the
    connections of the buckets it mirrors (its own it serves, and would hold for ever)."""
    others: dict[tuple[str, int], Flow] = field(default_factory=dict)
    """With :attr:`keep`: the connections not kept, without their bytes."""
    recent: Recent = field(default_factory=Recent)
    """With :attr:`keep`: the bytes of the connections not kept, heard last."""

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
            kept = self.keep is None or self.keep(seg.src)
            table = self.flows if kept else self.others
            flow = table.get(seg.src)
            if flow is None or flow.client_isn != seg.seq:
                wscale = seg.options.get(3)
                mss = seg.options.get(2)
                table[seg.src] = Flow(
                    seg.src, seg.seq, struct.unpack(">H", mss)[0] if mss is not None and len(mss) == 2 else 536,
                    wscale[0] if wscale else None, 4 in seg.options, syn=seg.packet)  # fmt: skip
                if not kept and len(self.others) > _MAX_OTHERS:
                    del self.others[next(iter(self.others))]
            return
        kept = flow is not None
        if flow is None:  # not kept: its bytes to ``recent``, the rest to ``others``
            if self.keep is None:
                return
            if seg.payload and seg.whole:
                self.recent.add(seg.src, seg.seq, seg.payload)
            flow = self.others.get(seg.src)
            if flow is None:
                return
        if seg.flags & RST:
            flow.reset = True
            if not kept:
                del self.others[seg.src]
            return
        if seg.flags & ACK and (flow.acked is None or _after(seg.ack, flow.acked)):
            flow.acked = seg.ack
        flow.client_window = seg.window
        if seg.payload and kept and seg.whole:  # (a filter keeps a client's frames whole)
            flow.client_bytes(seg.seq, seg.payload)
        if seg.flags & FIN:
            flow.fin = True
            if not kept and flow.server_fin:
                del self.others[seg.src]

    def _from_server(self, seg: TcpFrame) -> None:
        flow = self.flows.get(seg.dst)
        if flow is None and self.keep is not None:
            flow = self.others.get(seg.dst)
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
        if seg.size:
            end = (seg.seq + seg.size) & 0xFFFFFFFF
            if flow.sent_end is None or _after(end, flow.sent_end):
                flow.sent_end = end
        if seg.flags & FIN:
            flow.server_fin = True

    def copy_flows(self) -> dict[tuple[str, int], Flow]:
        """A consistent copy of every flow, while the sniffer goes on feeding the originals."""
        with self.lock:
            return {key: replace(flow, data=bytearray(flow.data), pending=dict(flow.pending))
                    for key, flow in self.flows.items()}  # fmt: skip

    def consumed(self, client: tuple[str, int], seq: int) -> None:
        """The owner has consumed ``client``'s bytes before sequence number ``seq`` (a mirrored
        update's ``rcv_pos``): the record forgets them once they make up :data:`_TRIM_AT`, so
        that a long upload is held only as far as the owner lags behind it."""
        with self.lock:
            flow = self.flows.get(client)
            if flow is None:
                return
            rel = (seq - flow.rcv_base) & 0xFFFFFFFF
            if rel < 1 << 31 and rel - flow.base >= _TRIM_AT:
                flow.trim(rel)

    def forget(self, client: tuple[str, int]) -> None:
        """Drop a finished connection's record."""
        with self.lock:
            self.flows.pop(client, None)
            self.others.pop(client, None)

    def hold(self, client: tuple[str, int], rcv_nxt: int, consumed: int, unread: bytes = b"") -> None:
        """Keep ``client``'s connection from now on, whether :attr:`keep` chose it or not: its
        owner mirrors it to this node (a ``tcp`` or ``adopt`` frame). ``rcv_nxt``: the sequence
        number of the client's first byte; ``consumed``: client bytes its owner has consumed
        (what a takeover starts after); ``unread``: the client bytes after those that the
        owner holds (an ``adopt`` frame carries those its sender put back into the receive
        queue). A record that holds the bytes from ``consumed`` on stays as it is; else it
        starts at ``consumed`` with ``unread`` and what :attr:`recent` holds of the client."""
        with self.lock:
            flow = self.flows.get(client)
            if flow is None and self.keep is None:
                return  # every SYN is kept: there is nothing more to find
            if flow is None:
                flow = self.others.pop(client, None)
            if flow is None or flow.rcv_base != rcv_nxt:  # never heard, or an older connection
                flow = Flow(client, (rcv_nxt - 1) & 0xFFFFFFFF)
            if not flow.base <= consumed <= flow.end or flow.overflow:
                flow.data, flow.base, flow.pending, flow.overflow = bytearray(), consumed, {}, False
            if unread:
                flow.client_bytes((rcv_nxt + consumed) & 0xFFFFFFFF, unread)
            if self.flows.get(client) is not flow:
                self.flows[client] = flow
                self._look_back({client})

    def promote(self) -> int:
        """Keep every connection in :attr:`others` that :attr:`keep` now chooses (it chooses
        more once the member learns of a death), with the bytes :attr:`recent` holds of it;
        returns how many."""
        with self.lock:
            keep = self.keep
            chosen = {client for client in self.others if keep is not None and keep(client)}
            for client in chosen:
                self.flows[client] = self.others.pop(client)
            if chosen:
                self._look_back(chosen)
            return len(chosen)

    def _look_back(self, clients: set[tuple[str, int]]) -> None:
        for client, seq, payload in self.recent.of(clients):
            self.flows[client].client_bytes(seq, payload)


def packet_socket(dev: str, rcvbuf: int = 1 << 26, *, outgoing: bool = False,
                  service: tuple[str, int] | None = None) -> socket.socket:  # fmt: skip
    """An ``AF_PACKET`` socket on ``dev`` receiving every IPv4 frame it carries (root).

    ``outgoing``: also the frames this host sends (a socket bound to one protocol sees only
    incoming frames; this one takes every protocol, and :func:`parse_frame` skips non-IPv4).
    ``service`` (address, port): only the TCP segments to and from it, those from it cut to
    their headers in the kernel (:mod:`~sslacc_sim.aio.linux.lanfilter`); the filter is in
    place before the socket receives its first frame."""
    proto = _ETH_P_ALL if outgoing else _ETH_P_IP  # (bind takes it in host order)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0 if service else socket.htons(proto))
    try:
        if service is not None:  # protocol 0 receives nothing until the bind below
            lanfilter.attach(s, lanfilter.service_filter(service))
        s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, rcvbuf)  # beyond rmem_max: root
        s.bind((dev, proto))
    except OSError:
        s.close()
        raise
    return s


class Sniffer:
    """Feeds a :class:`FlowTracker` from a packet socket in a thread until :meth:`stop`.

    The thread sleeps in ``poll`` on the packet socket and a wake-up pipe, so that a stop
    takes effect at once (a takeover waits for it), then drains what is queued already. After
    each drain it naps (:data:`_NAP_MS`, on the pipe alone) while frames gather.
    """

    def __init__(self, sock: socket.socket, tracker: FlowTracker) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        # each frame's kernel receive time: sync() stops at the frames that came after it
        self.sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self.tracker = tracker
        self._wake_r, self._wake_w = os.pipe()
        self._feeding = threading.Lock()  # held while frames are read and fed
        self._stop_at = math.inf
        self._thread = threading.Thread(target=self._run, daemon=True, name="sniffer")
        # one buffer for every frame, read into: a fresh 128 KiB bytes object per recvmsg
        # costs an mmap and munmap each (glibc's threshold), 18 us a frame against 3 measured
        self._buf = bytearray(_FRAME_MAX)
        self._view = memoryview(self._buf)

    def start(self) -> Sniffer:
        self._thread.start()
        return self

    def sync(self) -> None:
        """Feed, in the calling thread, every frame the socket holds now (the thread may lag
        behind the wire when the CPU is busy); the thread goes on after. It stops at the first
        frame received after the call: under a load that keeps the socket from ever being
        empty (other members serving on, in the bucket layout) it would never return.

        The kernel turns receive timestamps on a moment after a socket first asks for them
        (a deferred static key, when no socket of the host had them on): a frame read before
        that is stamped when it is read, so a sync in a sniffer's first milliseconds may stop
        early. A node's sniffer starts long before any takeover."""
        self._drain(until=time.monotonic())

    def stop(self) -> None:
        """Stop listening, feed what the socket holds already, return when it is fed."""
        self._stop_at = time.monotonic()
        os.write(self._wake_w, b"x")
        self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def _run(self) -> None:
        normal_thread()  # also when a keepalive or takeover thread (SCHED_FIFO) started it
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        nap = select.poll()  # the wake-up pipe alone: a stop ends the nap at once
        nap.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                self._drain(until=self._stop_at)  # everything queued when stop() was called
                return
            # a batch at a time: between batches the lock is free for a sync() (a takeover),
            # which would otherwise wait as long as the frames keep coming
            self._drain(limit=_BATCH)
            nap.poll(_NAP_MS)

    def _drain(self, until: float | None = None, limit: int | None = None) -> None:
        """Feed every frame queued, or (``until``, ``time.monotonic``) up to the first one
        received after ``until``, or at most ``limit`` frames."""
        with self._feeding:
            for _ in itertools.count() if limit is None else range(limit):
                try:
                    if until is None:  # no receive time wanted: no control message built
                        n = self.sock.recv_into(self._buf)
                    else:
                        n, ancillary, _, _ = self.sock.recvmsg_into([self._buf], 64)
                except BlockingIOError:
                    return
                except InterruptedError:
                    continue
                except OSError:
                    return  # the interface went down (ENETDOWN: this node's link was cut)
                seg = parse_frame(bytes(self._view[:n]), cut=True)  # (filtered: lanfilter)
                if seg is not None:
                    self.tracker.feed(seg)
                if until is not None and _received_at(ancillary) > until:
                    return


#: Frames the sniffer's thread feeds before it lets go of the record for a moment.
_BATCH = 256
#: Milliseconds the sniffer's thread waits after each drain before it reads again, while the
#: frames gather in the socket. Woken for every frame (about 10,000 a second under the cluster
#: benchmark's load), it cost the buddy 0.135 of a core and the sending side a wake-up each;
#: with a 2 ms nap, 0.09 (measured outside the repository; 5 ms with 1 MiB segments was
#: chosen: docs/sslacc-cluster.md, "Goodput"). The record lags the wire by as much, which
#: nothing reads unsynced: a takeover reads what is queued itself (:meth:`Sniffer.sync`) and a
#: stop ends the nap at once.
_NAP_MS = 5
#: The longest frame read whole: a 64 KiB GSO segment with its headers fits.
_FRAME_MAX = 1 << 17


def _received_at(ancillary: list[tuple[int, int, bytes]]) -> float:
    """A frame's kernel receive time (``SO_TIMESTAMPNS``, the wall clock) on the
    ``time.monotonic`` clock; now if the kernel gave none."""
    offset = time.time() - time.monotonic()  # read each time: the wall clock may be slewed
    return next((sec + nsec / 1e9 - offset
                 for level, kind, data in ancillary
                 if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16
                 for sec, nsec in [struct.unpack("=qq", data[:16])]), time.monotonic())  # fmt: skip

