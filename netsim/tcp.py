"""A byte-accurate TCP model for SimPy: real payload bytes, sequence numbers, windows.

What it models:

* connection set-up (SYN / SYN-ACK round trip, :meth:`TcpConnection.open`) with initial
  sequence numbers (ISNs) that a model may seed and read;
* a byte stream per direction: every segment carries ``seq`` (the sequence number of its first
  byte), its payload (real bytes, or a *phantom* payload that has only a length) and the FIN
  and RST flags; ``mss`` bytes of payload at most plus ``header`` bytes on the wire. Each
  application write starts a new segment (writes are not coalesced, as with ``TCP_NODELAY``
  and a sender that never holds a partial segment back);
* sequence state in RFC 793's names (:class:`SeqState`: ``isn``, ``snd_una``, ``snd_nxt``,
  ``rcv_nxt``), absolute integers (not wrapped modulo 2**32; ``seq % 2**32`` is the wire value);
* byte-counted windows: a segment is sent only while the bytes in flight plus its length fit
  in ``min(cwnd, rwnd)`` (RFC 5681 §3.1); ``cwnd`` starts at ``init_cwnd`` segments of
  ``mss`` bytes, grows by one ``mss`` per acknowledged segment in slow start and by
  ``mss * mss / cwnd`` above ``ssthresh`` (congestion avoidance);
* cumulative ACKs: the receiver accepts the segment that starts at (or straddles) ``rcv_nxt``,
  hands its new bytes to the application in order, drops out-of-order segments and answers
  every segment with an ACK of ``rcv_nxt`` (or less: :meth:`HalfConnection.set_ack_limit`
  lets a model withhold the acknowledgement of bytes the application has not committed yet);
  the ACK clock paces the sender by the bottleneck, and competing flows share its FIFO queue;
* loss recovery by timeout (go-back-N with a fixed ``rto``; ssthresh becomes half the flight,
  cwnd one segment);
* end of stream: :meth:`HalfConnection.close` queues a FIN after the data (one sequence
  number); the receiver's application sees ``b""`` once every byte before it has arrived.
  :meth:`HalfConnection.abort` sends a RST at once (unless ``send_rst`` is off, for models
  of a node that must stay silent); the receiver's ``on_reset`` callback runs.

Every packet can be captured: :mod:`netsim.pcap` sets ``tap`` on both halves and writes each
segment (with its real header) at its send time, for Wireshark.

What it leaves out: fast retransmit, SACK, delayed ACKs, Nagle, RTT estimation, window
scaling, the TIME-WAIT state, ISN wrap-around, RSTs in answer to segments for an unknown
connection. Those matter for lossy or long-fat paths, not for the papers' questions (latency
of one HTTP(S) request over an idle 160 kbit/s line; the bytes a real protocol puts on it).

Use: make a :class:`TcpConnection` over two routes (tuples of :class:`~netsim.link.Link`),
``yield conn.open()`` in a SimPy process, then ``yield conn.a.send(data)`` (a → b) or
``conn.b.send(data)`` (b → a), where ``data`` is ``bytes`` or, for a size-only model, an
``int`` (a phantom payload of that many bytes): the returned event fires when the *receiver*
has all bytes, so flights are serialised exactly as the application protocol dictates. To
consume the bytes, set ``conn.a.on_data`` (called at b's end with each in-order chunk, and
with ``b""`` at FIN); :mod:`netsim.drive` does this for sans-IO protocol objects.

Closed forms checked in the tests: with a window larger than the transfer, ``N`` bytes take
``delay + wire_bytes(N) * 8 / bandwidth`` after the first byte is sent; with unlimited
bandwidth, ``k`` segments reach the receiver after ``R - 1/2`` round trips of slow start, where
``R = ceil(log2(k / init_cwnd + 1))`` is the number of windows needed. A phantom payload and
real bytes of the same size take exactly the same time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import simpy
from simpy.events import ProcessGenerator, Timeout

from .link import Link, Packet, send_on

__all__ = ["TcpParams", "TcpConnection", "HalfConnection", "SeqState", "Segment", "Ack",
           "TcpStateError", "Tap", "wire_bytes"]

#: Trim the retransmission queue once this many segments are acknowledged.
_TRIM = 256


class TcpStateError(RuntimeError):
    """Local misuse: writing after FIN or RST, seeding an ISN after data was queued."""


@dataclass(frozen=True)
class TcpParams:
    """TCP constants. Sizes in bytes, windows in segments of ``mss`` bytes, times in seconds."""

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
    """Bytes on the wire for ``nbytes`` of payload in one write: payload + a header per segment."""
    return nbytes + math.ceil(nbytes / params.mss) * params.header


@dataclass
class SeqState:
    """Sequence numbers of one direction of a connection (sender at one end, receiver at the other).

    The SYN takes sequence number ``isn``; the first data byte is ``isn + 1``. Sender side:
    ``snd_una`` (oldest unacknowledged), ``snd_nxt`` (next to send), ``snd_end`` (one past the
    last byte, or FIN, the application queued). Receiver side: ``rcv_nxt`` (next expected),
    ``ack_limit`` (the highest acknowledgement the receiver may send; ``None``: no limit).
    ``fin_sent`` / ``fin_received`` record an orderly end; ``rst_sent`` that this direction's
    sender aborted (set even when the RST itself is suppressed), ``rst_received`` that a RST
    (from either end) was delivered: it ends both directions, senders stop, receivers drop.

    """

    isn: int = 0
    snd_una: int = 1
    snd_nxt: int = 1
    snd_end: int = 1
    rcv_nxt: int = 1
    ack_limit: int | None = None
    fin_sent: bool = False
    fin_received: bool = False
    rst_sent: bool = False
    rst_received: bool = False

    @property
    def reset(self) -> bool:
        """The stream was reset at either end."""
        return self.rst_sent or self.rst_received

    @classmethod
    def starting_at(cls, isn: int) -> SeqState:
        """Fresh state for a direction whose SYN carries ``isn``."""
        if isn < 0:
            raise ValueError(f"ISN must be >= 0, got {isn}")
        return cls(isn, isn + 1, isn + 1, isn + 1, isn + 1)

    @property
    def in_flight(self) -> int:
        """Sequence space sent but not acknowledged (bytes, plus one for a FIN)."""
        return self.snd_nxt - self.snd_una

    @property
    def stream_offset(self) -> int:
        """Data bytes (not counting a FIN) the receiver has accepted, from the stream's start."""
        return self.rcv_nxt - self.isn - 1 - (1 if self.fin_received else 0)


@dataclass(frozen=True, slots=True)
class Segment:
    """A data segment: ``length`` payload bytes from ``seq``; ``data`` is ``None`` if phantom.

    ``syn`` marks the SYN and SYN-ACK of :meth:`TcpConnection.open` (``seq`` is the ISN).
    """

    seq: int
    length: int
    data: bytes | None = None
    fin: bool = False
    rst: bool = False
    syn: bool = False

    @property
    def end(self) -> int:
        """One past the last sequence number it occupies (a SYN or a FIN takes one)."""
        return self.seq + self.length + (1 if self.fin else 0) + (1 if self.syn else 0)


@dataclass(frozen=True, slots=True)
class Ack:
    """A pure cumulative acknowledgement: every sequence number below ``ack`` arrived."""

    ack: int


#: A capture hook (:mod:`netsim.pcap`): ``tap(half, segment_or_ack, on_arrive)`` is called when
#: ``half``'s sender puts a segment (or its receiver an :class:`Ack`) on the first link, at the
#: simulated send time, and returns the callback to run at arrival in place of ``on_arrive``.
Tap = Callable[["HalfConnection", "Segment | Ack", Callable[[Packet], None]],
               Callable[[Packet], None]]


class HalfConnection:
    """One direction of a connection: a sender at one end, a receiver at the other.

    Application side: :meth:`send`, :meth:`close`, :meth:`abort` (:meth:`write` and
    :meth:`close_nowait` when nothing waits for the delivery); at the receiving end the
    ``on_data(chunk)`` and ``on_reset()`` callbacks. Model side: :attr:`seq` (a
    :class:`SeqState`), :meth:`seed_isn`, :meth:`set_ack_limit`, ``send_rst``. Metrics:
    ``packets_sent``, ``retransmits`` (segments sent again: their first sequence number had
    been sent before; a segment rewound at a timeout and acknowledged before its turn came is
    not one), ``timeouts``, ``payload_sent`` (bytes, retransmissions included),
    ``delivered`` (bytes handed to the receiver) and ``expected`` (segments accepted in
    order). ``tap``: a capture hook (:data:`Tap`; ``None``, the default, costs one attribute
    test per packet).
    """

    def __init__(self, env: simpy.Environment, fwd: tuple[Link, ...], rev: tuple[Link, ...],
                 params: TcpParams, name: str, isn: int = 0) -> None:
        self.env = env
        self.fwd = fwd
        self.rev = rev
        self.p = params
        self.name = name
        self.seq = SeqState.starting_at(isn)
        self.cwnd = params.init_cwnd * params.mss          #: bytes
        self.ssthresh = params.ssthresh * params.mss       #: bytes
        self.rwnd = params.rwnd * params.mss               #: bytes
        self.send_rst = True
        # what the callbacks return is ignored (a simpy ``Store.put`` event, say)
        self.on_data: Callable[[bytes], object] | None = None
        self.on_reset: Callable[[], object] | None = None
        self.reverse: HalfConnection | None = None   #: the other direction (set by TcpConnection)
        self.tap: Tap | None = None
        self._segs: list[Segment] = []   # retransmission queue, in sequence order
        self._una = 0                    # index in _segs of the oldest unacknowledged segment
        self._nxt = 0                    # index in _segs of the next segment to (re)send
        self._deliveries: deque[tuple[int, simpy.Event]] = deque()
        self._ack_event: simpy.Event = env.event()
        self._data_event: simpy.Event = env.event()
        self._woken: simpy.Event = env.event()   # an ACK or the retransmission timer fired
        self.retransmits = 0
        self.timeouts = 0
        self._snd_max = self.seq.snd_nxt   # one past the highest sequence number ever sent
        self.packets_sent = 0
        self.payload_sent = 0
        self.delivered = 0
        self.expected = 0
        env.process(self._sender())

    # -- application side -------------------------------------------------------------
    def send(self, data: bytes | int) -> simpy.Event:
        """Queue ``data`` (bytes, or an int: a phantom payload of that many bytes).

        The event fires (value: the time) when the receiver has every byte queued so far.
        """
        self._enqueue(data)
        return self._queued()

    def write(self, data: bytes | int) -> None:
        """:meth:`send` for a caller that never waits for the delivery: no event is made.

        The same segments at the same times; only the delivery event (one SimPy event per
        write, processed with nothing waiting on it) is left out. :mod:`netsim.drive` writes so.
        """
        self._enqueue(data)
        self._kick()

    def close_nowait(self) -> None:
        """:meth:`close` without the event that fires when the receiver has the FIN."""
        self._queue_fin()
        self._kick()

    def _enqueue(self, data: bytes | int) -> None:
        if isinstance(data, int):
            if data < 0:
                raise ValueError(f"cannot send {data} bytes")
            nbytes, payload = data, None
        else:
            nbytes, payload = len(data), bytes(data)
        st = self.seq
        if st.fin_sent or st.rst_sent:
            raise TcpStateError(f"{self.name}: write after {'RST' if st.rst_sent else 'FIN'}")
        mss = self.p.mss
        for off in range(0, nbytes, mss):
            n = min(mss, nbytes - off)
            chunk = None if payload is None else payload[off : off + n]
            self._segs.append(Segment(st.snd_end, n, chunk))
            st.snd_end += n

    def close(self) -> simpy.Event:
        """Queue a FIN after the data; the event fires when the receiver has it."""
        self._queue_fin()
        return self._queued()

    def _queue_fin(self) -> None:
        st = self.seq
        if st.rst_sent:
            raise TcpStateError(f"{self.name}: close after RST")
        if not st.fin_sent:
            st.fin_sent = True
            self._segs.append(Segment(st.snd_end, 0, b"", fin=True))
            st.snd_end += 1

    def abort(self) -> None:
        """Reset the connection: drop unsent data, send a RST (unless ``send_rst`` is False)."""
        st = self.seq
        if st.rst_sent:
            return
        st.rst_sent = True
        del self._segs[self._nxt:]
        if self.send_rst:
            rst = Segment(st.snd_nxt, 0, None, rst=True)
            tap = self.tap
            send_on(self.fwd, self.p.header,
                    self._on_segment if tap is None else tap(self, rst, self._on_segment), rst)
            self.packets_sent += 1
        if not self._data_event.triggered:
            self._data_event.succeed()

    def seed_isn(self, isn: int) -> None:
        """Choose the ISN of this direction (before :meth:`TcpConnection.open` and any write)."""
        if self._segs or self.packets_sent:
            raise TcpStateError(f"{self.name}: ISN seeded after data was queued")
        self.seq = SeqState.starting_at(isn)
        self._snd_max = self.seq.snd_nxt

    def set_ack_limit(self, limit: int | None) -> None:
        """Acknowledge at most ``limit`` (``None``: everything received); raising it sends an ACK."""
        st = self.seq
        before = self._ack_number()
        st.ack_limit = limit
        if self._ack_number() > before:
            self._send_ack()

    # -- internals ----------------------------------------------------------------------
    def _queued(self) -> simpy.Event:
        done = self.env.event()
        end = self.seq.snd_end
        if end <= self.seq.rcv_nxt:
            done.succeed(self.env.now)
        else:
            self._deliveries.append((end, done))
        self._kick()
        return done

    def _kick(self) -> None:
        """Wake the sender (it waits for data once everything queued is acknowledged)."""
        if not self._data_event.triggered:
            self._data_event.succeed()

    def _sender(self) -> ProcessGenerator:
        env = self.env
        st = self.seq
        while True:
            st = self.seq
            window = min(self.cwnd, self.rwnd)
            while self._nxt < len(self._segs) and not st.reset:
                seg = self._segs[self._nxt]
                if seg.length and st.in_flight + seg.length > window:
                    break
                if seg.end <= st.snd_una:      # acknowledged meanwhile (an ACK limit lifted)
                    self._nxt += 1
                    continue
                tap = self.tap
                send_on(self.fwd, seg.length + self.p.header,
                        self._on_segment if tap is None else tap(self, seg, self._on_segment), seg)
                self.packets_sent += 1
                self.payload_sent += seg.length
                if seg.seq < self._snd_max:
                    self.retransmits += 1
                self._snd_max = max(self._snd_max, seg.end)
                st.snd_nxt = max(st.snd_nxt, seg.end)
                self._nxt += 1
            if st.reset or st.snd_una >= st.snd_end:
                self._data_event = env.event()
                yield self._data_event
                continue
            # wait for an ACK or the retransmission timeout, whichever is processed first:
            # the events ``ack | timeout`` would schedule (the ACK's, the timer's and one of
            # its own when the first of them is processed), without a Condition's bookkeeping
            ack = self._ack_event = env.event()
            timer = Timeout(env, self.p.rto)
            woken = self._woken = env.event()
            ack.callbacks.append(self._wake)
            timer.callbacks.append(self._wake)
            before = st.snd_una
            yield woken
            acked = ack.callbacks is None          # processed: it was in the condition's value
            for ev in (ack, timer):                # the condition forgets the other event
                if ev.callbacks is not None:
                    ev.callbacks.remove(self._wake)
            if not acked and st.snd_una == before and not st.reset:
                # retransmission timeout: go back N
                self.timeouts += 1
                self.ssthresh = max(st.in_flight / 2, 2.0 * self.p.mss)
                self.cwnd = float(self.p.mss)
                self._nxt = self._una
                st.snd_nxt = st.snd_una

    def _wake(self, _: simpy.Event) -> None:
        if not self._woken.triggered:
            self._woken.succeed()

    def _on_ack(self, pkt: Packet) -> None:
        ackno: int = pkt.payload.ack
        st = self.seq
        if ackno <= st.snd_una:
            return
        mss = self.p.mss
        segs = self._segs
        while self._una < len(segs) and segs[self._una].end <= ackno:
            self._una += 1
            if self.cwnd < self.ssthresh:
                self.cwnd += mss
            else:
                self.cwnd += mss * mss / self.cwnd
        st.snd_una = ackno
        st.snd_nxt = max(st.snd_nxt, ackno)
        if self._nxt < self._una:
            self._nxt = self._una
        if self._una >= _TRIM:
            del segs[: self._una]
            self._nxt -= self._una
            self._una = 0
        if not self._ack_event.triggered:
            self._ack_event.succeed()

    # -- receiver ------------------------------------------------------------------------
    @property
    def ack_number(self) -> int:
        """The acknowledgement the receiving end sends now (``rcv_nxt``, or its ACK limit)."""
        return self._ack_number()

    def _ack_number(self) -> int:
        st = self.seq
        return st.rcv_nxt if st.ack_limit is None else min(st.rcv_nxt, st.ack_limit)

    def _send_ack(self) -> None:
        ack = Ack(self._ack_number())
        tap = self.tap
        send_on(self.rev, self.p.header,
                self._on_ack if tap is None else tap(self, ack, self._on_ack), ack)

    def _on_segment(self, pkt: Packet) -> None:
        seg: Segment = pkt.payload
        st = self.seq
        rev = self.reverse
        if seg.rst:
            if not st.rst_received:
                st.rst_received = True
                if rev is not None:          # the end that got the RST stops sending too
                    rev.seq.rst_received = True
                    if not rev._data_event.triggered:
                        rev._data_event.succeed()
                if self.on_reset is not None:
                    self.on_reset()
            return
        if st.rst_received or (rev is not None and rev.seq.rst_sent):
            return                           # the receiving end reset or aborted
        if seg.seq <= st.rcv_nxt < seg.end:
            skip = st.rcv_nxt - seg.seq
            new = seg.length - skip
            if new > 0:
                st.rcv_nxt += new
                self.delivered += new
                if self.on_data is not None:
                    chunk = bytes(new) if seg.data is None else seg.data[skip:]
                    self.on_data(chunk)
            if seg.fin:
                st.rcv_nxt += 1
                st.fin_received = True
                if self.on_data is not None:
                    self.on_data(b"")
            self.expected += 1
            dl = self._deliveries
            while dl and dl[0][0] <= st.rcv_nxt:
                dl.popleft()[1].succeed(self.env.now)
        self._send_ack()


class TcpConnection:
    """A connection between endpoint ``a`` and endpoint ``b``.

    ``ab`` is the route from a to b, ``ba`` the route back. ``conn.a`` sends a → b,
    ``conn.b`` sends b → a; ``isn`` seeds the two directions' initial sequence numbers.
    """

    def __init__(self, env: simpy.Environment, ab: tuple[Link, ...], ba: tuple[Link, ...],
                 params: TcpParams = TcpParams(), name: str = "tcp",
                 isn: tuple[int, int] = (0, 0)) -> None:
        self.env = env
        self.p = params
        self.ab = ab
        self.ba = ba
        self.a = HalfConnection(env, ab, ba, params, f"{name}:a", isn[0])
        self.b = HalfConnection(env, ba, ab, params, f"{name}:b", isn[1])
        self.a.reverse, self.b.reverse = self.b, self.a

    def open(self) -> simpy.Event:
        """SYN from a, SYN-ACK from b: fires when a has the SYN-ACK (one round trip)."""
        done = self.env.event()

        def synack_arrived(pkt: Packet) -> None:
            done.succeed(self.env.now)

        def syn_arrived(pkt: Packet) -> None:
            synack, tap = Segment(self.b.seq.isn, 0, syn=True), self.b.tap
            send_on(self.ba, self.p.syn_size,
                    synack_arrived if tap is None else tap(self.b, synack, synack_arrived), synack)

        syn, tap = Segment(self.a.seq.isn, 0, syn=True), self.a.tap
        send_on(self.ab, self.p.syn_size,
                syn_arrived if tap is None else tap(self.a, syn, syn_arrived), syn)
        return done
