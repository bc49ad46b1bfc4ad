"""Entry point of ``python -m webalps_sim.load``.

The code lives in :mod:`webalps_sim.aio.loadgen`: the closed-loop load generator (sockets, threads) and its command line.
This module only imports its ``main``.
"""

from __future__ import annotations

import sys

from webalps_sim.aio.loadgen import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
