"""The delay stage of :mod:`netsim.linktestbed`: a TUN relay that holds packets as a link would.

``tc``'s ``netem`` is not available on the machines this testbed targets, so propagation delay
(and per-frame serialisation, see :func:`run_relay`) is added in user space: the middle
namespace routes every forwarded IPv4 packet into a TUN device, and :func:`run_relay`, started
there by ``python -m netsim.linktestbed relay``, reads each packet, holds it for its direction's
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

__all__ = ["run_relay"]

_TUNSETIFF = 0x400454CA
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
