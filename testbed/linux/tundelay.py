"""The delay stage of :mod:`testbed.linux.linktestbed`: a TUN relay that holds packets as a link would.

``tc``'s ``netem`` is not available on the machines this testbed targets, so propagation delay
(and per-frame serialisation, see :func:`run_relay`) is added in user space: the middle
namespace routes every forwarded IPv4 packet into a TUN device, and :func:`run_relay`, started
there by ``python -m testbed.linux.linktestbed relay``, reads each packet, holds it for its direction's
serialisation and one-way delay, and writes it back. Whole packets, so TCP stays end to end.
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import struct
import time
from collections.abc import Sequence

__all__ = ["run_relay", "run_hop_relay", "hop_path", "HOPS", "format_hops", "parse_hops"]

_TUNSETIFF = 0x400454CA
_TUNSETOFFLOAD = 0x400454D0
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000


def _ipv4_net(cidr: str) -> tuple[int, int]:
    addr, bits = cidr.split("/")
    mask = (0xFFFFFFFF << (32 - int(bits))) & 0xFFFFFFFF
    return struct.unpack("!I", bytes(int(x) for x in addr.split(".")))[0] & mask, mask


class _Direction:
    """One direction through the relay: store-and-forward serialisers, then a fixed delay."""

    def __init__(self, delay: float, rates: Sequence[float]) -> None:
        self.delay = delay
        self.rates = list(rates)
        self.free_at = [0.0] * len(self.rates)   # when each serialiser finishes its last frame
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()

    def admit(self, now: float, pkt: bytes) -> None:
        t = now
        frame = len(pkt) + 14  # tbf and the model count the Ethernet header
        for i, rate in enumerate(self.rates):
            t = max(t, self.free_at[i]) + frame * 8 / rate
            self.free_at[i] = t
        self.queue.append((t + self.delay, pkt))


def run_relay(tun: str, client_net: str, to_client: float, to_origin: float,
              to_client_rates: Sequence[float] = (), to_origin_rates: Sequence[float] = ()
              ) -> None:
    """Delay each IPv4 packet read from ``tun`` as its direction's link would, then write it back.

    A packet whose destination is in ``client_net`` goes ``to_client``, any other
    ``to_origin``. Each direction is a chain of store-and-forward serialisers (one per shaped
    hop, ``rates`` in bit/s, in path order; empty = none) followed by the constant one-way
    delay -- the SimPy :class:`~netsim.link.Link` semantics. Why serialise here when ``tbf``
    shapes already: a token bucket lets an idle line's first ``burst`` bytes through at once,
    while a real line (and the model) spends ``size / rate`` on every frame; that matters for
    small transfers (a TLS handshake flight at 160 kbit/s). Departures per direction are
    monotonic, so one FIFO per direction is in due order and packet order is kept. Non-IPv4
    packets are dropped. Prints ``ready`` once attached; runs until killed."""
    net, mask = _ipv4_net(client_net)
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", tun.encode(), _IFF_TUN | _IFF_NO_PI))
    os.set_blocking(fd, False)
    down = _Direction(to_client, to_client_rates)
    up = _Direction(to_origin, to_origin_rates)
    directions = (down, up)
    print("ready", flush=True)
    while True:
        heads = [d.queue[0][0] for d in directions if d.queue]
        timeout = None if not heads else max(0.0, min(heads) - time.monotonic())
        # select() takes microseconds; poll()/epoll() would round the wait up to a millisecond
        if select.select([fd], [], [], timeout)[0]:
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(pkt) < 20 or pkt[0] >> 4 != 4:
                    continue
                dst = struct.unpack_from("!I", pkt, 16)[0]
                (down if dst & mask == net else up).admit(time.monotonic(), pkt)
        now = time.monotonic()
        for q in (d.queue for d in directions):
            while q and q[0][0] <= now:
                try:
                    os.write(fd, q.popleft()[1])
                except OSError:
                    pass  # the kernel refused one packet (e.g. no route): drop it, like a wire


# --- hop by hop: traffic that starts or ends in the middle node (a proxy, a cache) ------------

#: The four one-way hops of the testbed, in the order of :func:`run_hop_relay`'s ``hops``.
HOPS = ("access_to_origin", "access_to_client", "server_to_origin", "server_to_client")


def format_hops(hops: Sequence[tuple[float | None, float]], headroom: float | None) -> str:
    """``rate:delay,...`` for the relay's ``--hops``: each (rate bit/s or ``None``, delay s) of
    :data:`HOPS`; rates times ``headroom`` (``None``: no serialisers, ``tbf`` alone)."""
    return ",".join(f"{'none' if r is None or headroom is None else repr(r * headroom)}:{d!r}"
                    for r, d in hops)


def parse_hops(text: str) -> list[tuple[float | None, float]]:
    """The inverse of :func:`format_hops` (``none`` = no serialiser on that hop)."""
    out: list[tuple[float | None, float]] = []
    for part in text.split(","):
        rate, delay = part.split(":")
        out.append((None if rate == "none" else float(rate), float(delay)))
    if len(out) != len(HOPS):
        raise ValueError(f"--hops needs {len(HOPS)} rate:delay pairs, got {len(out)}")
    return out


class _Hop:
    """One direction of one hop: a store-and-forward serialiser (``rate`` bit/s, ``None`` for
    none) then a constant ``delay`` -- one SimPy :class:`~netsim.link.Link`."""

    def __init__(self, rate: float | None, delay: float) -> None:
        self.rate, self.delay = rate, delay
        self.free_at = 0.0

    def cross(self, t: float, frame: int) -> float:
        """Time at which a ``frame``-byte frame that reaches the hop at ``t`` leaves it."""
        if self.rate is not None:
            t = max(t, self.free_at) + frame * 8 / self.rate
            self.free_at = t
        return t + self.delay


def hop_path(src: int, dst: int, client: tuple[int, int], middle: frozenset[int]
             ) -> tuple[str, ...]:
    """The hops (names from :data:`HOPS`) a packet from ``src`` to ``dst`` crosses.

    Addresses are 32-bit integers; ``client`` is the client network (address, mask) and
    ``middle`` the middle node's own addresses. Forwarded packets cross both hops. Packets *to*
    the middle never reach the relay (they are delivered as they arrive, shaped by ``tbf``
    alone), so a packet *from* the middle carries its hop's round trip: its own hop, then
    ``<reverse hop>/delay``, the reverse direction's delay without its serialiser. A request
    and its answer then take the hop's round trip, as over a wire."""
    net, mask = client
    to_client = dst & mask == net
    if src in middle:
        return (("access_to_client", "access_to_origin/delay") if to_client
                else ("server_to_origin", "server_to_client/delay"))
    return ("server_to_client", "access_to_client") if to_client else (
        "access_to_origin", "server_to_origin")


def run_hop_relay(tun: str, client_net: str, middle: Sequence[str],
                  hops: Sequence[tuple[float | None, float]]) -> None:
    """Like :func:`run_relay`, but hop by hop, so that programs *in* the middle node (a proxy,
    a cache) see the link's delays too.

    ``hops`` gives (rate bit/s or ``None``, one-way delay s) for each of :data:`HOPS`; each
    packet crosses the hops :func:`hop_path` names, each a serialiser followed by its delay
    (the serialisers are shared by forwarded and middle traffic, as one wire would be).
    Departures are kept in a heap (delays differ per path), ties in arrival order.
    Prints ``ready`` once attached; runs until killed."""
    import heapq
    import itertools

    client = _ipv4_net(client_net)
    mids = frozenset(_ipv4_net(f"{a}/32")[0] for a in middle)
    links = {name: _Hop(rate, delay) for name, (rate, delay) in zip(HOPS, hops, strict=True)}
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", tun.encode(), _IFF_TUN | _IFF_NO_PI))
    # no checksum or segmentation offload: the middle's own packets must leave here complete
    # (a partial checksum would be written back and dropped by the receiver)
    fcntl.ioctl(fd, _TUNSETOFFLOAD, 0)
    os.set_blocking(fd, False)
    heap: list[tuple[float, int, bytes]] = []
    order = itertools.count()
    print("ready", flush=True)
    while True:
        timeout = None if not heap else max(0.0, heap[0][0] - time.monotonic())
        if select.select([fd], [], [], timeout)[0]:
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(pkt) < 20 or pkt[0] >> 4 != 4:
                    continue
                src, dst = struct.unpack_from("!II", pkt, 12)
                t = time.monotonic()
                for name in hop_path(src, dst, client, mids):
                    hop, _, delay_only = name.partition("/")
                    t = (t + links[hop].delay if delay_only
                         else links[hop].cross(t, len(pkt) + 14))
                heapq.heappush(heap, (t, next(order), pkt))
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            try:
                os.write(fd, heapq.heappop(heap)[2])
            except OSError:
                pass
