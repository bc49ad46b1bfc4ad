"""Entry point of ``python -m reverse_ssl.server``, the Reverse SSL echo server.

The server lives in :mod:`reverse_ssl.aio.server` (command line, statistics, pool refilling);
its connections are the asyncio streams of :mod:`reverse_ssl.aio.stream`.  This module only
calls :func:`reverse_ssl.aio.server.main`.
"""

from __future__ import annotations

import sys

from .aio.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
