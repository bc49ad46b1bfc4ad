"""Entry point of ``python -m sslsplit.server``, the SSL-splitting origin server.

The code lives in :mod:`sslsplit.aio.server`: the splitting server (:class:`~sslsplit.aio.server.SplittingServer`, sockets around the sans-IO record writer :mod:`sslsplit.writer`) and its command line.  This module only calls
:func:`sslsplit.aio.server.main`; run ``python -m sslsplit.server --help``.
"""

from __future__ import annotations

import sys

from .aio.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
