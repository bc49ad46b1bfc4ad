"""Entry point of ``python -m webalps_sim.campaign``.

The code lives in :mod:`webalps_sim.aio.campaign`: the fault campaign (a guardian killed,
frozen or fed garbage at random instants while clients download through a WebALPS host), since
it starts processes and runs threads.  This module only imports its ``main``.
"""

from __future__ import annotations

import sys

from webalps_sim.aio.campaign import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
