"""The nodes' report lines on standard output, each written whole.

The orchestrators (:mod:`~sslacc_sim.aio.linux.failover`, the campaign, the tests) read a
node's stdout line by line and parse the JSON after ``RESTORED`` and ``RESUMED``. A node's
threads report concurrently (a takeover, a verdict on a silent mirror, a fence), and
``print`` writes the text and the newline separately, so two threads' lines could run into
one (the test of two deaths close together saw ``MIRROR DEAD ...RESTORED {...}``). Every report
line goes through :func:`say`, under one lock.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["say"]

_LOCK = threading.Lock()


def say(line: str) -> None:
    """Write ``line`` and its newline to stdout in one piece, and flush."""
    with _LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
