"""Small helpers shared by the command-line programs of :mod:`sslsplit`.

Argument types and one-line error reporting are shared by every program of the testbed and
live in :mod:`testbed.cli`; ``hostport`` is re-exported here for the existing imports.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterable

from testbed.cli import hostport

__all__ = ["hostport", "close_servers", "wait_for_signal"]


async def close_servers(servers: Iterable[asyncio.AbstractServer]) -> None:
    """Stop listening on every server, then wait until each has closed."""
    servers = list(servers)
    for server in servers:
        server.close()
    for server in servers:
        await server.wait_closed()


async def wait_for_signal() -> None:
    """Return at SIGINT or SIGTERM (a program's orderly stop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
