"""Entry point of ``python -m sslacc_sim.measure``, the measured costs of the cluster's own code.

The measurement lives in :mod:`sslacc_sim.aio.measure` (it reads the clock and opens a UDP
socket pair): :func:`~sslacc_sim.aio.measure.measure_cluster_costs`, the costs file with its
provenance, and the command line.  ``make reproduce`` runs this program before the notebooks.
This module only calls :func:`sslacc_sim.aio.measure.main`.
"""

from __future__ import annotations

import sys

from sslacc_sim.aio.measure import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
