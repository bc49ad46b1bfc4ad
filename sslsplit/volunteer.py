"""Entry point of ``python -m sslsplit.volunteer``, the Barnraising volunteer.

The code lives in :mod:`sslsplit.aio.volunteer`: the volunteer (:class:`~sslsplit.aio.volunteer.Volunteer`: a splitting proxy configured by the broker, sharing its cache with its peers) and its command line.  This module only calls
:func:`sslsplit.aio.volunteer.main`; run ``python -m sslsplit.volunteer --help``.
"""

from __future__ import annotations

import sys

from .aio.volunteer import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
