"""How a bucket-layout member reaches another member's process outside its mirror links.

* :func:`refused`: whether the other's kernel refuses a connection to its listener -- its
  process has died while its host lives (what :meth:`Member._verdict
  <sslacc_sim.aio.linux.member.Member._verdict>` judges at once);
* :func:`send_frame_to`: one frame on a link of its own, acknowledged (a ``dead`` notice);
* :func:`carrier`: whether this node's own LAN port still has a link partner (a fenced or cut
  port has none).
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from .mirror import ACK, send_frame

__all__ = ["refused", "send_frame_to", "carrier", "PROBE_S"]

#: Seconds the probe of a mirror's listener waits for its answer (:func:`refused`).
PROBE_S = 0.05


def refused(address: tuple[str, int], timeout: float = PROBE_S) -> bool:
    """Whether the kernel at ``address`` refuses a connection there, or resets it at once: the
    process that listened has died, its host lives (a ``SIGKILL``, a crash of the program).
    ``False`` when it is accepted (a process listens, running or stopped: the kernel answers
    for it) or nothing answers within ``timeout`` (a dead host: the keepalives decide)."""
    try:
        probe = socket.create_connection(address, timeout=timeout)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    with probe:
        try:
            return probe.recv(1) == b""  # the listener closed while the probe was queued
        except ConnectionResetError:
            return True
        except OSError:
            return False  # no answer within the timeout: a listener is there


def send_frame_to(peer: tuple[str, int], header: dict[str, object]) -> None:
    """Send one frame to ``peer`` on a link of its own and wait for its acknowledgement (a
    peer that does not answer within a second is reported: it may be dying too)."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            with socket.create_connection(peer, timeout=1.0) as link:
                send_frame(link, header)
                if link.recv(1) != ACK:
                    raise ConnectionError("no acknowledgement")
            return
        except ConnectionRefusedError:  # a newcomer about to listen: tried again for a second
            if time.monotonic() < deadline:
                time.sleep(0.02)
                continue
            print(f"ERROR {header['type']} frame to {peer}: refused", file=sys.stderr, flush=True)
            return
        except OSError as exc:
            print(f"ERROR {header['type']} frame to {peer}: {exc!r}", file=sys.stderr, flush=True)
            return


def carrier(dev: str) -> bool:
    """Whether ``dev`` has a link partner: a veth whose switch port was taken down (the fence)
    or whose own end is down (a cut) has none."""
    try:
        return (Path("/sys/class/net") / dev / "carrier").read_text().strip() == "1"
    except OSError:
        return False  # down interfaces refuse the read (EINVAL)
