"""Entry point of ``python -m reverse_ssl.client``, the Reverse SSL client and load generator.

The client lives in :mod:`reverse_ssl.aio.client` (one connection, or closed-loop load from
:func:`reverse_ssl.aio.stream.closed_loop_load`).  This module only calls
:func:`reverse_ssl.aio.client.main`.
"""

from __future__ import annotations

import sys

from .aio.client import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
