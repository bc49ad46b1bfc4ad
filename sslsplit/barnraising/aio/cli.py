"""What the Barnraising programs share at start-up: the broker
(``python -m sslsplit.barnraising.broker``) and the volunteer (``python -m sslsplit.volunteer``).

Both take ``--listen HOST:PORT`` where port 0 asks the system for a free port (the program
prints the one it got), log at INFO with ``-v`` and WARNING otherwise, run one asyncio service
until SIGINT or SIGTERM and then close it in order.  Argument types and one-line error
reporting are the testbed's own (:mod:`testbed.cli`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from testbed import cli

from ...aio.cli import wait_for_signal

__all__ = ["listen_address", "run_service", "serve_until_signal"]


def listen_address(text: str) -> tuple[str, int]:
    """``argparse`` type of ``--listen``: ``HOST:PORT`` as :func:`testbed.cli.hostport`, except
    that port 0 is allowed and means "any free port"."""
    host, sep, digits = text.rpartition(":")
    if sep and digits == "0":
        return cli.hostport(f"{host}:1")[0], 0
    return cli.hostport(text)


async def serve_until_signal(close: Callable[[], Awaitable[None]]) -> None:
    """Wait for SIGINT or SIGTERM, then ``await close()`` (also when the wait is cancelled)."""
    try:
        await wait_for_signal()
    finally:
        await close()


def run_service(verbose: bool, main: Coroutine[Any, Any, None]) -> int:
    """Configure logging (INFO with ``verbose``, else WARNING), run ``main`` on a new event
    loop and return exit status 0; errors propagate to :func:`testbed.cli.run_main`."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    asyncio.run(main)
    return 0
