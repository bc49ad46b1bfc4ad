"""Packet links for SimPy: bandwidth, propagation delay, a FIFO queue and optional loss.

A :class:`Link` is one direction of a wire. Packets wait in a FIFO queue (optionally bounded:
a full queue drops the arriving packet, i.e. drop-tail), are serialised at ``bandwidth`` bits
per second, then arrive ``delay`` seconds later. With ``loss > 0`` each packet is dropped with
that probability after serialisation, using the link's own ``random.Random``.

:meth:`Link.fail` injects an outage (the transmitter is interrupted; queued packets are
lost), from which TCP recovers by retransmission timeout.

**Cost per packet.** The transmitter is a chain of event callbacks rather than a generator
process, and :func:`now_event` stands in for a process's start and interrupt: per packet the
link schedules exactly the SimPy events a process would (a wake-up when idle, the end of
serialisation, the arrival), at the same instants and in the same order -- so simultaneous
events keep their order and every simulated time is unchanged (``tests/netsim/test_golden.py``)
-- with less Python around each. :class:`~netsim.tcp.HalfConnection` and
:meth:`~netsim.host.Host.compute` follow the same rule.

Packets follow a *route* (a tuple of links): when a packet reaches the end of one link it is
handed to the next; at the end of the route its ``on_arrive`` callback runs. This is all the
"host" logic a transfer model needs; :class:`Duplex` bundles the two directions of a wire.

Closed-form sanity check (tested): ``k`` back-to-back packets of ``s`` bytes on an idle link
arrive at ``delay + i * 8 s / bandwidth`` for ``i = 1..k``.

Preset: :data:`LAN` (100 Mbit/s switched Ethernet). The papers' links (the SSL-splitting
ADSL line in :mod:`sslsplit.params`, the SINE links in :mod:`sine.params`) live in their packages.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import simpy
from simpy.events import NORMAL, PENDING, URGENT, EventPriority, ProcessGenerator, Timeout

__all__ = ["LinkParams", "Packet", "Link", "Duplex", "LAN", "send_on", "now_event"]


@dataclass(frozen=True)
class LinkParams:
    """One direction of a link. ``bandwidth`` in bit/s, ``delay`` (one way) in seconds,
    ``queue`` in packets (``None`` = unbounded), ``loss`` a probability in [0, 1)."""

    bandwidth: float
    delay: float = 0.0
    queue: int | None = None
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive (bit/s), got {self.bandwidth}")
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0 s, got {self.delay}")
        if self.queue is not None and self.queue < 1:
            raise ValueError(f"queue must be >= 1 packet or None, got {self.queue}")
        if not 0.0 <= self.loss < 1.0:
            raise ValueError(f"loss must be in [0, 1), got {self.loss}")

    def serialisation(self, nbytes: float) -> float:
        """Seconds to put ``nbytes`` on the wire."""
        return nbytes * 8.0 / self.bandwidth


#: A generic switched 100 Mbit/s Ethernet LAN (0.1 ms one way, no queue limit). Links that a
#: particular study describes live in that study's package (its ``params.py``).
LAN = LinkParams(bandwidth=100e6, delay=0.0001, queue=None)


@dataclass(slots=True)
class Packet:
    """A packet in flight. ``size`` in bytes on the wire (headers included)."""

    size: int
    route: tuple[Link, ...]
    on_arrive: Callable[[Packet], None]
    payload: Any = None
    hop: int = 0
    sent_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)


class Link:
    """One direction of a wire; see the module docstring."""

    def __init__(self, env: simpy.Environment, params: LinkParams, name: str = "link",
                 seed: int = 0) -> None:
        self.env = env
        self.params = params
        self.name = name
        self._seed = seed
        self._rng: random.Random | None = None
        self._queue: deque[Packet] = deque()
        self._wakeup: simpy.Event = env.event()
        self.busy = False
        # metrics, appended during the run
        self.log_time: list[float] = []
        self.log_size: list[int] = []
        self.log_event: list[str] = []
        self.bytes_sent = 0
        self.drops = 0
        self.up = True
        self._in_service: Packet | None = None
        self._restored: simpy.Event = env.event()
        # the transmitter (see the module docstring) waits on one event at a time:
        # ``_waiting``, with ``_then`` among its callbacks (an outage removes it)
        self._waiting: simpy.Event | None = None
        self._then: Callable[[simpy.Event], None] | None = None
        now_event(env, self._next, URGENT)         # where the process's Initialize was

    @property
    def rng(self) -> random.Random:
        """The link's own generator (seeded with ``seed``): it draws the losses.

        Made on first use: a lossless link never draws, and seeding costs microseconds per
        link (one per direction of every simulated connection).
        """
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return self._rng

    @rng.setter
    def rng(self, rng: random.Random) -> None:
        self._rng = rng

    def _record(self, event: str, size: int) -> None:
        self.log_time.append(self.env.now)
        self.log_size.append(size)
        self.log_event.append(event)

    def send(self, packet: Packet) -> bool:
        """Enqueue ``packet``; returns ``False`` (and counts a drop) if the queue is full."""
        if not self.up:
            self.drops += 1
            self._record("drop_down", packet.size)
            return False
        q = self.params.queue
        # an idle transmitter will take the head packet at once: it is not "waiting"
        if q is not None and len(self._queue) >= q + (0 if self.busy else 1):
            self.drops += 1
            self._record("drop_queue", packet.size)
            return False
        self._queue.append(packet)
        if self._wakeup._value is PENDING:         # not triggered
            self._wakeup.succeed()
        return True

    # -- the transmitter --------------------------------------------------------------------
    def _wait(self, event: simpy.Event, then: Callable[[simpy.Event], None]) -> None:
        event.callbacks.append(then)
        self._waiting, self._then = event, then

    def _next(self, _: simpy.Event | None = None) -> None:
        """Serve the head of the queue, or wait for a packet."""
        if not self._queue:
            self._wakeup = self.env.event()
            self._wait(self._wakeup, self._next)
            return
        pkt = self._queue.popleft()
        self._in_service = pkt
        self.busy = True
        self._wait(Timeout(self.env, pkt.size * 8.0 / self.params.bandwidth), self._serialised)

    def _serialised(self, _: simpy.Event) -> None:
        pkt = self._in_service
        assert pkt is not None
        self.busy = False
        self._in_service = None
        self.bytes_sent += pkt.size
        p = self.params
        if p.loss and self.rng.random() < p.loss:
            self.drops += 1
            self._record("drop_loss", pkt.size)
        else:
            self._record("sent", pkt.size)
            Timeout(self.env, p.delay, pkt).callbacks.append(_arrive)
        self._next()

    def _interrupted(self, _: simpy.Event) -> None:
        # the link went down: the packet being sent and the queue are lost
        waiting, then = self._waiting, self._then
        assert waiting is not None and then is not None and waiting.callbacks is not None
        waiting.callbacks.remove(then)
        self.busy = False
        lost = ([self._in_service] if self._in_service else []) + list(self._queue)
        self._in_service = None
        self._queue.clear()
        for p in lost:
            self.drops += 1
            self._record("drop_down", p.size)
        self._wait(self._restored, self._next)

    def fail(self, duration: float) -> simpy.Process:
        """Take the link down for ``duration`` seconds (failure injection).

        The transmitter is interrupted: the packet being serialised and every queued
        packet are dropped, and packets offered while down are dropped too. Packets already
        propagating still arrive. Returns the outage process (it ends when the link is back).
        """
        if duration < 0:
            raise ValueError(f"outage duration must be >= 0 s, got {duration}")
        if not self.up:
            raise RuntimeError(f"link {self.name} is already down")
        return self.env.process(self._outage(duration))

    def _outage(self, duration: float) -> ProcessGenerator:
        self.up = False
        self._restored = self.env.event()
        self._record("down", 0)
        now_event(self.env, self._interrupted, URGENT)   # where the process's Interruption was
        yield self.env.timeout(duration)
        self.up = True
        self._record("up", 0)
        self._restored.succeed()

    def queue_length(self) -> int:
        """Packets waiting (not counting the one being serialised)."""
        return len(self._queue)


def now_event(env: simpy.Environment, callback: Callable[[simpy.Event], None],
              priority: EventPriority = NORMAL) -> simpy.Event:
    """Schedule an event for now that runs ``callback`` (``URGENT``: before the ``NORMAL`` ones).

    What :class:`simpy.events.Initialize` does for a process and
    :class:`simpy.events.Interruption` for an interrupt, for callback-driven model code.
    """
    event = simpy.Event(env)
    event._ok = True
    event._value = None
    event.callbacks.append(callback)
    env.schedule(event, priority)
    return event


def _arrive(event: simpy.Event) -> None:
    pkt = cast(Packet, event.value)  # the Timeout that carries it across the link
    pkt.hop += 1
    if pkt.hop < len(pkt.route):
        pkt.route[pkt.hop].send(pkt)
    else:
        pkt.on_arrive(pkt)


def send_on(route: tuple[Link, ...], size: int, on_arrive: Callable[[Packet], None],
            payload: Any = None) -> bool:
    """Put a new packet on the first link of ``route``; ``False`` if dropped at once."""
    if not route:
        raise ValueError("a route needs at least one link")
    pkt = Packet(size, route, on_arrive, payload, 0, route[0].env.now)
    return route[0].send(pkt)


class Duplex:
    """Both directions of a wire between ``a`` and ``b``: ``ab`` and ``ba`` links."""

    def __init__(self, env: simpy.Environment, ab: LinkParams, ba: LinkParams | None = None,
                 name: str = "wire", seed: int = 0) -> None:
        self.ab = Link(env, ab, f"{name}:ab", seed)
        self.ba = Link(env, ba if ba is not None else ab, f"{name}:ba", seed + 1)
