"""A TCP transfer model for SimPy, good enough for the latency of small and large objects.

What it models:

* connection set-up (SYN / SYN-ACK round trip, :meth:`TcpConnection.open`);
* segmentation (``mss`` bytes of payload plus ``header`` bytes per segment);
* slow start from ``init_cwnd`` segments, congestion avoidance above ``ssthresh``
  (per-ACK increase of 1 and 1/cwnd segments), a receive window cap;
* ACK clocking: every delivered in-order segment sends a cumulative ACK back over the reverse
  route, so the sender is paced by the bottleneck and competing flows share its FIFO queue;
* loss recovery by timeout (go-back-N with a fixed ``rto``; halve ssthresh, cwnd back to 1).

What it leaves out: fast retransmit, SACK, delayed ACKs, Nagle, RTT estimation. Those matter
for lossy or long-fat paths, not for the paper's question (latency of one HTTP(S) request over
an idle 160 kbit/s line).

Use: make a :class:`TcpConnection` over two routes (tuples of :class:`~netsim.link.Link`),
``yield conn.open()`` in a SimPy process, then ``yield conn.a.send(nbytes)`` (a → b) or
``conn.b.send(nbytes)`` (b → a): the returned event fires when the *receiver* has all bytes.
Flights are therefore serialised exactly as the application protocol dictates.

Closed forms checked in the tests: with a window larger than the transfer, ``N`` bytes take
``delay + wire_bytes(N) * 8 / bandwidth`` after the first byte is sent; with unlimited
bandwidth, ``k`` segments reach the receiver after ``R - 1/2`` round trips of slow start, where
``R = ceil(log2(k / init_cwnd + 1))`` is the number of windows needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import simpy

from .link import Link, Packet, send_on

__all__ = ["TcpParams", "TcpConnection", "HalfConnection", "wire_bytes"]


@dataclass(frozen=True)
class TcpParams:
    """TCP constants. Sizes in bytes, windows in segments, times in seconds."""

    mss: int = 1448
    header: int = 52
    init_cwnd: float = 2.0
    ssthresh: float = 64.0
    rwnd: float = 44.0          #: 64 KiB receive window / 1448
    rto: float = 1.0
    syn_size: int = 60

    def __post_init__(self) -> None:
        if self.mss <= 0 or self.header < 0:
            raise ValueError("mss must be positive and header non-negative")
        if self.init_cwnd < 1 or self.rwnd < 1:
            raise ValueError("init_cwnd and rwnd must be at least one segment")
        if self.rto <= 0:
            raise ValueError("rto must be positive")


def wire_bytes(nbytes: int, params: TcpParams = TcpParams()) -> int:
    """Bytes on the wire for ``nbytes`` of payload: payload + one header per segment."""
    return nbytes + math.ceil(nbytes / params.mss) * params.header


class HalfConnection:
    """One direction of a connection: a sender at one end, a receiver at the other."""

    def __init__(self, env: simpy.Environment, fwd: tuple[Link, ...], rev: tuple[Link, ...],
                 params: TcpParams, name: str) -> None:
        self.env = env
        self.fwd = fwd
        self.rev = rev
        self.p = params
        self.name = name
        self.cwnd = params.init_cwnd
        self.ssthresh = params.ssthresh
        self.segments: list[int] = []      # payload size of segment i
        self.acked = 0                     # segments acknowledged (cumulative)
        self.next_seq = 0                  # next segment to (re)send
        self.expected = 0                  # receiver: next in-order segment
        self._deliveries: list[tuple[int, simpy.Event]] = []
        self._ack_event: simpy.Event = env.event()
        self._data_event: simpy.Event = env.event()
        self.retransmits = 0
        self.timeouts = 0
        self.packets_sent = 0
        env.process(self._sender())

    # -- application side -------------------------------------------------------------
    def send(self, nbytes: int) -> simpy.Event:
        """Queue ``nbytes`` for sending; the event fires when the receiver has them all."""
        if nbytes < 0:
            raise ValueError(f"cannot send {nbytes} bytes")
        done = self.env.event()
        n = math.ceil(nbytes / self.p.mss) if nbytes else 0
        for _ in range(n - 1):
            self.segments.append(self.p.mss)
        if n:
            self.segments.append(nbytes - (n - 1) * self.p.mss)
        end = len(self.segments)
        if end <= self.expected:
            done.succeed(self.env.now)
        else:
            self._deliveries.append((end, done))
        if not self._data_event.triggered:
            self._data_event.succeed()
        return done

    # -- sender --------------------------------------------------------------------------
    def _sender(self):  # type: ignore[no-untyped-def]
        env = self.env
        while True:
            window = min(self.cwnd, self.p.rwnd)
            while self.next_seq < len(self.segments) and self.next_seq - self.acked < window:
                seq = self.next_seq
                size = self.segments[seq] + self.p.header
                send_on(self.fwd, size, self._on_segment, seq)
                self.packets_sent += 1
                self.next_seq += 1
            if self.acked >= len(self.segments):
                self._data_event = env.event()
                yield self._data_event
                continue
            self._ack_event = env.event()
            before = self.acked
            result = yield self._ack_event | env.timeout(self.p.rto)
            if self._ack_event not in result and self.acked == before:
                # retransmission timeout: go back N
                self.timeouts += 1
                self.ssthresh = max((self.next_seq - self.acked) / 2, 2.0)
                self.cwnd = 1.0
                self.retransmits += self.next_seq - self.acked
                self.next_seq = self.acked

    def _on_ack(self, pkt: Packet) -> None:
        ackno: int = pkt.payload
        if ackno <= self.acked:
            return
        for _ in range(ackno - self.acked):
            if self.cwnd < self.ssthresh:
                self.cwnd += 1.0
            else:
                self.cwnd += 1.0 / self.cwnd
        self.acked = ackno
        self.next_seq = max(self.next_seq, ackno)
        if not self._ack_event.triggered:
            self._ack_event.succeed()

    # -- receiver ------------------------------------------------------------------------
    def _on_segment(self, pkt: Packet) -> None:
        seq: int = pkt.payload
        if seq == self.expected:
            self.expected += 1
            still = []
            for end, ev in self._deliveries:
                if end <= self.expected:
                    ev.succeed(self.env.now)
                else:
                    still.append((end, ev))
            self._deliveries = still
        send_on(self.rev, self.p.header, self._on_ack, self.expected)


class TcpConnection:
    """A connection between endpoint ``a`` and endpoint ``b``.

    ``ab`` is the route from a to b, ``ba`` the route back. ``conn.a`` sends a → b,
    ``conn.b`` sends b → a.
    """

    def __init__(self, env: simpy.Environment, ab: tuple[Link, ...], ba: tuple[Link, ...],
                 params: TcpParams = TcpParams(), name: str = "tcp") -> None:
        self.env = env
        self.p = params
        self.ab = ab
        self.ba = ba
        self.a = HalfConnection(env, ab, ba, params, f"{name}:a")
        self.b = HalfConnection(env, ba, ab, params, f"{name}:b")

    def open(self) -> simpy.Event:
        """SYN from a, SYN-ACK from b: fires when a has the SYN-ACK (one round trip)."""
        done = self.env.event()

        def synack_arrived(pkt: Packet) -> None:
            done.succeed(self.env.now)

        def syn_arrived(pkt: Packet) -> None:
            send_on(self.ba, self.p.syn_size, synack_arrived)

        send_on(self.ab, self.p.syn_size, syn_arrived)
        return done
