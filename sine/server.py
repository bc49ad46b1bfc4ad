"""Entry point of ``python -m sine.server``, the SINE origin server.

The server lives in :mod:`sine.aio.server` (asyncio listeners, command line) around the
socket-free :class:`sine.origin.Origin`; this module only imports
:func:`sine.aio.server.main`.
"""

from __future__ import annotations

import sys

from sine.aio.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
