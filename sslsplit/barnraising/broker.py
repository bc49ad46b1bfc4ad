"""``python -m sslsplit.barnraising.broker``: the Barnraising broker's command line.

The broker itself is :mod:`sslsplit.barnraising.aio.broker` (sockets around the sans-IO
:mod:`sslsplit.barnraising.service`); run ``python -m sslsplit.barnraising.broker --help``.
"""

from __future__ import annotations

import sys

from .aio.broker import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
