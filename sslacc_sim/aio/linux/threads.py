"""Which threads of a node run first: keepalives and takeovers under ``SCHED_FIFO``, the rest not.

The nodes, the switch's packet work (``ksoftirqd``) and the clients share two cores. A
keepalive that waits its turn for 200 ms makes the buddy take over from a healthy owner, so the
keepalive threads, the answers and the takeover run under ``SCHED_FIFO``
(:func:`realtime_thread`). A thread started by such a thread inherits its policy, so every
other thread is started with :func:`spawn`, which puts it back under the default policy first:
a connection's service or a LAN recorder left under ``SCHED_FIFO`` would run before the
kernel's own packet work and the clients, and delay every node's keepalives and every client's
bytes (the heir of a takeover used to serve the connections it restored so).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["realtime_thread", "normal_thread", "spawn"]


def realtime_thread(priority: int = 10) -> bool:
    """Put the calling thread (not the process) under ``SCHED_FIFO``. A FIFO thread runs as
    soon as it is ready and the interpreter lock is free (released at least every 5 ms).
    Returns ``False`` where the policy may not be set (no ``CAP_SYS_NICE``)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))  # 0: this thread
    except (PermissionError, OSError):
        return False
    return True


def normal_thread() -> None:
    """Put the calling thread back under the default policy (after :func:`realtime_thread`)."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (PermissionError, OSError):
        pass


def spawn(target: Callable[..., Any], *args: Any, name: str | None = None) -> threading.Thread:
    """Start ``target(*args)`` in a daemon thread under the default policy, whatever the
    policy of the thread that starts it; returns the started thread."""

    def run() -> None:
        normal_thread()
        target(*args)

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    return thread
