"""Entry point of ``python -m webalps_sim.host``.

The code lives in :mod:`webalps_sim.aio.host`: the untrusted host (asyncio HTTP, HTTPS and WebALPS servers) and its command line.
This module only imports its ``main``.
"""

from __future__ import annotations

import sys

from webalps_sim.aio.host import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
