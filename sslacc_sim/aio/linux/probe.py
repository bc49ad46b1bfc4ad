"""The campaign's client-side probe: every TCP segment to and from the service, headers only.

``python -m sslacc_sim.aio.linux.node sniff`` runs :func:`record_frames` in the client's
namespace; the campaign reads each client's phase at the fault and its wait for the next byte
from the rows (:func:`~sslacc_sim.aio.linux.loadstats.flows_at`). Those numbers are only as good
as the record is complete: a frame the probe never read could make a connection look
unfinished at the fault or leave its gap unmeasured. Checked against tcpdump on the same
interface (3 trials, 102 connections), the record had every server byte before the fault.
What keeps it so, and what says when it is not:

* each read asks the kernel for :data:`HEADER_READ` bytes, enough for the Ethernet, IP and TCP
  headers, so a 64 KiB segment costs no more to read than an ACK (the payload's length comes
  from the IP header's total length: :func:`~sslacc_sim.aio.linux.sniff.parse_frame` reads a
  frame cut after its headers);
* the frames still queued when the probe is told to stop are read before it stops (a probe
  that lagged behind the load would otherwise lose its backlog);
* the socket's buffer is large (``node sniff``: 128 MiB);
* :func:`packet_drops` reads the kernel's count of frames the socket had no room for
  (``PACKET_STATISTICS``); ``node sniff`` prints it, and the campaign reports it per trial.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from .sniff import _PACKET_OUTGOING, _SO_TIMESTAMPNS, SYN, _received_at, parse_frame

__all__ = ["HEADER_READ", "record_frames", "packet_drops"]

#: Bytes read of each frame: Ethernet (14), IP (at most 60) and TCP (at most 60) headers.
HEADER_READ = 160
_SOL_PACKET = 263
_PACKET_STATISTICS = 6


def packet_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped for want of room in ``sock``'s buffer since the last call
    (``PACKET_STATISTICS``: reading it resets the count)."""
    _, drops = struct.unpack("II", sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8))
    return int(drops)


Row = tuple[float, str, int, int, int, int, int, int]


def record_frames(sock: socket.socket, service: tuple[str, int], stop: Callable[[], bool],
                  *, incoming_only: bool = False) -> list[Row]:  # fmt: skip
    """Every segment between clients and ``service`` heard on ``sock`` until ``stop()`` (checked
    every 0.2 s), then every frame still queued, as rows ``(time, source MAC hex, client port,
    seq, payload length, flags, window, ack)``; a client's own segments have ``"client"`` for a
    MAC, their acknowledgement for ``seq``, their window scaled by the shift their SYN
    announced and their own sequence number for ``ack`` (the columns swap: ``seq`` is what a
    client row is read for). ``time.monotonic()``: one clock for every namespace.
    ``incoming_only``: skip the frames the host sends (on a switch port: keep what the node
    behind it sent, not what the switch forwards to it; ``sock`` must take every protocol, as
    a bridge port's frames reach no protocol-bound socket)."""
    seen: list[Row] = []
    shift: dict[int, int] = {}
    # the kernel's receive time of each frame, not when this loop got to it (it lags under
    # load): SO_TIMESTAMPNS gives the wall clock, turned into time.monotonic() by the offset
    # between the two clocks
    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    sock.settimeout(0.2)
    while not stop():
        try:
            got = sock.recvmsg(HEADER_READ, 64)
        except (TimeoutError, InterruptedError):
            continue
        except OSError:  # ENETDOWN, once, when the interface goes down (a fenced port)
            time.sleep(0.05)
            continue
        _take(got, service, incoming_only, shift, seen)
    until = time.monotonic()
    sock.setblocking(False)
    while True:  # the backlog: the frames that came before the stop, none after it
        try:
            got = sock.recvmsg(HEADER_READ, 64)
        except InterruptedError:
            continue
        except OSError:  # BlockingIOError: nothing more queued
            break
        if _received_at(got[1]) > until:
            break
        _take(got, service, incoming_only, shift, seen)
    return seen


def _take(got: tuple[bytes, list[tuple[int, int, bytes]], int, object], service: tuple[str, int],
          incoming_only: bool, shift: dict[int, int], seen: list[Row]) -> None:  # fmt: skip
    """One frame read by :func:`record_frames`: a row if it is a segment to or from
    ``service``."""
    frame, ancillary, _, address = got
    if incoming_only and isinstance(address, tuple) and address[2] == _PACKET_OUTGOING:
        return
    seg = parse_frame(frame, cut=True)
    if seg is None:
        return
    now = _received_at(ancillary)
    if seg.src == service:
        seen.append((now, seg.src_mac.hex(), seg.dst[1], seg.seq, seg.size, seg.flags,
                     seg.window, seg.ack))  # fmt: skip
    elif seg.dst == service:
        port = seg.src[1]
        if seg.flags & SYN:
            wscale = seg.options.get(3)
            shift[port] = wscale[0] if wscale else 0
            # a SYN's window is never scaled and it acknowledges nothing: only when it was
            # sent (a connection begun after a fault is not one the fault hit)
            seen.append((now, "client", port, 0, 0, seg.flags, 0, seg.seq))
            return
        seen.append((now, "client", port, seg.ack, seg.size, seg.flags,
                     seg.window << shift.get(port, 0), seg.seq))  # fmt: skip
