"""Write what the simulated TCP puts on its links as a pcap file that Wireshark reads.

A :class:`PcapWriter` attached to a :class:`~netsim.tcp.TcpConnection` (:meth:`PcapWriter.attach`,
or ``capture=`` on :class:`~netsim.drive.Driver`, :func:`~netsim.drive.run_pair` and
:class:`~netsim.relay.Relay`) writes one Ethernet/IPv4/TCP frame per segment the model sends:
its SYN and SYN-ACK, every data segment with its real payload bytes (zeros for a phantom
payload), every retransmission, every pure ACK, the FIN and the RST -- with the model's
sequence and acknowledgement numbers (``seq % 2**32`` on the wire), its flags, its receive
window and correct IP and TCP checksums. ``tshark`` or Wireshark then dissects the simulated
connection like a real one: TLS with a key log (:mod:`tls12.keylog`), and its TCP analysis
(retransmissions, duplicate ACKs, lost segments) is an outside check of the model.

**Capture point: the sender, at the simulated send time.** Each packet is written once, when
its sender hands it to the first link of its route -- as ``tcpdump`` on the sending host's
interface records it -- whether the links then deliver it, queue it or drop it. So a segment
the link loses is in the file, followed later by its retransmission, in both directions: the
file holds everything the model sent, and a retransmission count read from it equals the
model's (``HalfConnection.retransmits``). The price: a packet's arrival is not in the file
(Wireshark's ACK round-trip times are from a segment's send to its ACK's send, one way plus
the receiver's turnaround). A capture at one host (its own packets sent, the peer's arrived)
would instead lose the peer's dropped segments. Frames are written in simulated-time order
(one writer may serve every connection of a run); a frame's timestamp is the simulated time
in seconds since the epoch, with nanosecond resolution.

**Addresses.** Each host name gets a stable address of its own in ``10.0.0.0/24`` (in the
order the writer first meets them, from ``10.0.0.1``) and a locally administered MAC; the
connection's server end uses ``port`` (443 by default, where Wireshark looks for TLS), its
client end an ephemeral port from 49152, one per attached connection.

**Headers.** IPv4 with DF, TTL 64 and an identification counter per endpoint. The TCP header
carries the options that fill the model's per-packet header size: ``TcpParams.header`` (52
bytes by default: 20 IP + 20 TCP + 12 of timestamps) and ``TcpParams.syn_size`` (60: MSS,
window scale when needed, timestamps), so the IP length of each frame is the size the model
puts on its link. Timestamps (RFC 7323) are on when ``header`` leaves room for them: TSval is
the sender's simulated time in milliseconds, TSecr the last TSval that arrived at the sender.
The window is the receiver's ``rwnd``; when one end's is over 65,535 bytes both SYNs carry a
window scale (the smallest shift that fits, at most 14). The MSS option is the model's
``mss``. PSH, SACK and ECN are not modelled (never set). A header size that cannot be filled
exactly (not 40 to 80 bytes in steps of 4) is rounded down to one that can.

**Library: dpkt**, not hand-packed headers and not scapy. dpkt is one small pure-Python
package without dependencies that builds Ethernet, IPv4 and TCP headers as objects, fills in
the IP length and both checksums when the frame is serialised, reads pcap files back (the tests
parse what the writer wrote) and writes pcap. Scapy does the same but pulls in a large
interactive environment and is several times slower per packet; a capture of a simulated run
should cost little next to the simulation. Only the TCP options are composed here, as
kind-length-value bytes (dpkt leaves them to the caller); dpkt's option constants name them.

Off by default: a connection without a writer tests one attribute per packet and nothing else.

Example -- capture a plain transfer over a 1 Mbit/s line, then read the frames back::

    >>> import io, dpkt, simpy
    >>> from netsim.link import Duplex, LinkParams
    >>> from netsim.tcp import TcpConnection
    >>> env, buf = simpy.Environment(), io.BytesIO()
    >>> wire = Duplex(env, LinkParams(1e6, 0.010))
    >>> conn = TcpConnection(env, (wire.ab,), (wire.ba,), isn=(1000, 5000))
    >>> cap = PcapWriter(buf)
    >>> client, server = cap.attach(conn, "client", "server", port=80)
    >>> client.ip, client.port, server.ip, server.port
    ('10.0.0.1', 49152, '10.0.0.2', 80)
    >>> def run(env):
    ...     yield conn.open()
    ...     yield conn.a.send(b"hello")
    >>> _ = env.process(run(env))
    >>> env.run()
    >>> frames = [dpkt.ethernet.Ethernet(f) for _, f in dpkt.pcap.Reader(io.BytesIO(buf.getvalue()))]
    >>> [(f.data.data.seq, f.data.data.ack, f.data.len) for f in frames]   # SYN, SYN-ACK, data, ACK
    [(1000, 0, 60), (5000, 1001, 60), (1001, 5001, 57), (5001, 1006, 52)]
    >>> sum(f.data.len for f in frames) == wire.ab.bytes_sent + wire.ba.bytes_sent
    True
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import dpkt

from .link import Packet
from .tcp import Ack, HalfConnection, Segment, TcpConnection

__all__ = ["Endpoint", "PcapWriter"]

#: The first ephemeral port (RFC 6335) a connection's client end gets.
EPHEMERAL = 49152
_MAX_WINDOW = 0xFFFF
_MAX_SHIFT = 14             # RFC 7323 §2.3
_TS_ROOM = 12               # NOP, NOP, timestamps (10 bytes)
_BASE_HEADER = 40           # IPv4 + TCP without options


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of a captured connection: its host name, IPv4 address, MAC and TCP port."""

    host: str
    ip: str
    mac: bytes
    port: int


class _End:
    """What one end of a captured connection has sent and received (mutable)."""

    __slots__ = ("addr", "tx", "rx", "shift", "ip_id", "ts_recent")

    def __init__(self, addr: Endpoint, tx: HalfConnection, rx: HalfConnection) -> None:
        self.addr = addr
        self.tx = tx              # the direction this end sends
        self.rx = rx              # the direction this end receives (and acknowledges)
        self.shift = 0            # window scale this end announced
        self.ip_id = 0
        self.ts_recent = 0        # the last TSval that arrived here


def _room(size: int) -> int:
    """Bytes of TCP options a packet of header ``size`` (IP + TCP) can carry: 0 to 40, by 4."""
    return max(0, min(40, size - _BASE_HEADER)) // 4 * 4


def _shift(window: float) -> int:
    """The smallest window-scale shift that makes ``window`` bytes fit in 16 bits."""
    shift = 0
    while shift < _MAX_SHIFT and window > _MAX_WINDOW << shift:
        shift += 1
    return shift


def _opt(kind: int, value: bytes = b"") -> bytes:
    """One TCP option as kind, length, value."""
    return bytes([kind, 2 + len(value)]) + value


def _timestamps(tsval: int, tsecr: int) -> bytes:
    return bytes([dpkt.tcp.TCP_OPT_NOP] * 2) + _opt(
        dpkt.tcp.TCP_OPT_TIMESTAMP, tsval.to_bytes(4, "big") + tsecr.to_bytes(4, "big"))


def _pad(opts: bytes, room: int) -> bytes:
    """``opts`` padded with end-of-list bytes to ``room``."""
    return opts + bytes([dpkt.tcp.TCP_OPT_EOL]) * (room - len(opts))


class _Tap:
    """The capture hook of one connection (a :data:`netsim.tcp.Tap`): builds and writes frames."""

    def __init__(self, writer: PcapWriter, conn: TcpConnection, a: Endpoint, b: Endpoint) -> None:
        p = conn.p
        if p.mss + max(p.header, _BASE_HEADER) > 0xFFFF:
            raise ValueError(f"segments of {p.mss} bytes do not fit in an IPv4 packet")
        self.writer = writer
        self.conn = conn
        self.a = _End(a, conn.a, conn.b)
        self.b = _End(b, conn.b, conn.a)
        self.room = _room(p.header)
        self.syn_room = _room(p.syn_size)
        # window scaling only if a window needs it and the SYNs have room to announce it
        self.scaled = max(conn.a.rwnd, conn.b.rwnd) > _MAX_WINDOW and self.syn_room >= 8
        if self.scaled:
            self.a.shift, self.b.shift = _shift(conn.b.rwnd), _shift(conn.a.rwnd)
        self.ts = self.room >= _TS_ROOM and self.syn_room >= 4 + 4 * self.scaled + _TS_ROOM

    def __call__(self, half: HalfConnection, what: Segment | Ack,
                 on_arrive: Callable[[Packet], None]) -> Callable[[Packet], None]:
        forward = half is self.conn.a
        if isinstance(what, Ack):           # the receiving end of ``half`` acknowledges
            src, dst = (self.b, self.a) if forward else (self.a, self.b)
            seq, ack, flags, data = src.tx.seq.snd_nxt, what.ack, dpkt.tcp.TH_ACK, b""
        else:
            src, dst = (self.a, self.b) if forward else (self.b, self.a)
            seq, ack, flags, data = self._segment(src, what)
        now = float(half.env.now)
        tsval = int(now * 1000) & 0xFFFFFFFF
        syn = isinstance(what, Segment) and what.syn
        opts = self._syn_options(src, tsval) if syn else self._options(src, tsval)
        self.writer._write(now, src, dst, self._tcp(src, dst, seq, ack, flags, opts, data))

        def arrived(pkt: Packet) -> None:
            dst.ts_recent = tsval
            on_arrive(pkt)

        return arrived

    def _segment(self, src: _End, seg: Segment) -> tuple[int, int, int, bytes]:
        """Sequence number, acknowledgement, flags and payload of a segment ``src`` sends."""
        th = dpkt.tcp
        data = bytes(seg.length) if seg.data is None else seg.data
        if seg.syn and src is self.a:
            return seg.seq, 0, th.TH_SYN, b""
        flags = th.TH_ACK | (th.TH_SYN if seg.syn else 0) | (th.TH_FIN if seg.fin else 0) \
            | (th.TH_RST if seg.rst else 0)
        return seg.seq, src.rx.ack_number, flags, data

    def _syn_options(self, src: _End, tsval: int) -> bytes:
        th = dpkt.tcp
        opts = _opt(th.TCP_OPT_MSS, self.conn.p.mss.to_bytes(2, "big"))[: self.syn_room]
        if self.scaled and len(opts) + 4 <= self.syn_room:
            opts += _opt(th.TCP_OPT_WSCALE, bytes([src.shift])) + bytes([th.TCP_OPT_NOP])
        if self.ts:
            opts += _timestamps(tsval, src.ts_recent if src is self.b else 0)
        return _pad(opts, self.syn_room)

    def _options(self, src: _End, tsval: int) -> bytes:
        return _pad(_timestamps(tsval, src.ts_recent) if self.ts else b"", self.room)

    def _tcp(self, src: _End, dst: _End, seq: int, ack: int, flags: int, opts: bytes,
             data: bytes) -> dpkt.tcp.TCP:
        rwnd = src.rx.rwnd
        shift = src.shift if self.scaled and not flags & dpkt.tcp.TH_SYN else 0
        win = min(_MAX_WINDOW, -(-int(rwnd) // (1 << shift)))   # rounded up: never too small
        return dpkt.tcp.TCP(sport=src.addr.port, dport=dst.addr.port, seq=seq % 2**32,
                            ack=ack % 2**32, off=5 + len(opts) // 4, flags=flags, win=win,
                            opts=opts, data=data)


class PcapWriter:
    """A pcap file (Ethernet, nanosecond timestamps) of simulated TCP connections.

    ``target``: a path (the file is created, or truncated) or a binary file object (left
    open by :meth:`close`). :meth:`attach` each connection before it opens; :meth:`close` when
    the run is over (or use the writer as a context manager). ``packets``: frames written.
    """

    def __init__(self, target: str | os.PathLike[str] | BinaryIO) -> None:
        if isinstance(target, str | os.PathLike):
            self._file: BinaryIO = open(target, "wb")  # closed by close()
            self._owned = True
        else:
            self._file, self._owned = target, False
        self._pcap = dpkt.pcap.Writer(self._file, snaplen=0xFFFF, nano=True)
        self._hosts: dict[str, Endpoint] = {}
        self._next_port = EPHEMERAL
        self.packets = 0
        self.closed = False

    def endpoint(self, host: str, port: int) -> Endpoint:
        """``host``'s stable address and MAC (a new host gets the next one), with ``port``."""
        if not 0 < port < 0x10000:
            raise ValueError(f"port must be in 1..65535, got {port}")
        known = self._hosts.get(host)
        if known is None:
            n = len(self._hosts) + 1
            if n > 254:
                raise ValueError("a capture holds at most 254 host names")
            known = Endpoint(host, f"10.0.0.{n}", bytes([2, 0, 10, 0, 0, n]), 0)
            self._hosts[host] = known
        return Endpoint(host, known.ip, known.mac, port)

    def attach(self, conn: TcpConnection, client: str = "client", server: str = "server",
               port: int = 443) -> tuple[Endpoint, Endpoint]:
        """Capture ``conn`` from now on: its ``a`` end is host ``client`` on the next ephemeral
        port, its ``b`` end host ``server`` on ``port``. Returns the two endpoints."""
        if self.closed:
            raise ValueError("the capture is closed")
        if client == server:
            raise ValueError(f"a connection needs two hosts, got {client!r} twice")
        a = self.endpoint(client, self._next_port)
        b = self.endpoint(server, port)
        self._next_port = EPHEMERAL if self._next_port == 0xFFFF else self._next_port + 1
        conn.a.tap = conn.b.tap = _Tap(self, conn, a, b)
        return a, b

    def _write(self, now: float, src: _End, dst: _End, tcp: dpkt.tcp.TCP) -> None:
        """Frame ``tcp`` from ``src`` to ``dst`` and write it at simulated time ``now``."""
        if self.closed:
            return
        src.ip_id = (src.ip_id + 1) & 0xFFFF
        ip = dpkt.ip.IP(src=ipaddress.IPv4Address(src.addr.ip).packed,
                        dst=ipaddress.IPv4Address(dst.addr.ip).packed, p=dpkt.ip.IP_PROTO_TCP,
                        ttl=64, id=src.ip_id, df=1, data=tcp)
        frame = dpkt.ethernet.Ethernet(src=src.addr.mac, dst=dst.addr.mac,
                                       type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
        sec, nsec = divmod(round(now * 1e9), 10**9)
        self._pcap.writepkt_time(bytes(frame), sec + nsec / 1e9)
        self.packets += 1

    def close(self) -> None:
        """Flush; close the file if the writer opened it. Later packets are not written."""
        if self.closed:
            return
        self.closed = True
        self._file.flush()
        if self._owned:
            self._file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
