"""Small helpers shared by the command-line programs."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Iterable

__all__ = ["hostport", "close_servers", "wait_for_signal"]


def hostport(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``:PORT`` means 127.0.0.1) for argparse."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


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
