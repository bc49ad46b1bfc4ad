"""Entry point of ``python -m webalps_sim.guardian``.

The code lives in :mod:`webalps_sim.aio.guardian`: the guardian process (a Unix-socket server
that serves every host connection from one thread, within configurable bounds) and its command
line.
This module only imports its ``main``.
"""

from __future__ import annotations

import sys

from webalps_sim.aio.guardian import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
