"""Which threads of a node run first: keepalives and takeovers under ``SCHED_FIFO``, the rest not;
and a node's threads ahead of other programs on the machine (:func:`ahead_of_other_work`).

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

__all__ = ["NODE_NICE", "ahead_of_other_work", "realtime_thread", "normal_thread", "spawn"]

#: The nice value of every thread of a node program. A ``SCHED_FIFO`` keepalive thread still
#: needs the interpreter lock, and the thread holding it runs under the default policy: when
#: the clients start (32 processes on two cores) that thread waits for the CPU behind them, and
#: the keepalive with it -- priority inversion on the lock. A member healthy but silent for
#: 0.2 s at a load's start was judged dead and taken over (master-kill campaign trial 36). At
#: -10 a node's threads weigh about nine times as much as a client's with the scheduler.
NODE_NICE = -10


def ahead_of_other_work(nice: int = NODE_NICE) -> bool:
    """Give every thread of this process the nice value ``nice`` (on Linux a nice value is per
    thread, and a thread inherits its starter's: those running now are set one by one, those
    started later inherit it). Returns ``False`` where it may not be set (no
    ``CAP_SYS_NICE``): the node then runs as before."""
    try:
        for task in os.listdir("/proc/self/task"):
            os.setpriority(os.PRIO_PROCESS, int(task), nice)
    except (PermissionError, OSError):
        return False
    return True


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
