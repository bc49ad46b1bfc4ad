"""Entry point of ``python -m sslsplit.proxy``, the untrusted SSL-splitting proxy.

The code lives in :mod:`sslsplit.aio.proxy`: the proxy (:class:`~sslsplit.aio.proxy.SplittingProxy`, sockets around the sans-IO :mod:`sslsplit.splicer`) and its command line.  This module only calls
:func:`sslsplit.aio.proxy.main`; run ``python -m sslsplit.proxy --help``.
"""

from __future__ import annotations

import sys

from .aio.proxy import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
