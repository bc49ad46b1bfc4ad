"""The exception root of SSLACC: every error the package defines is a :class:`SslaccError`.

Catch :class:`SslaccError` to catch anything the model or the real cluster refused.  Each
subclass keeps the built-in base its callers already catch, so ``except ValueError`` around a
delta or ``except OSError`` around a repair step still works:

* :class:`sslacc_sim.buckets.ClusterError` (``RuntimeError``): local misuse of the cluster;
* :class:`sslacc_sim.delta.DeltaError` (``ValueError``): a delta cannot be made or applied;
* :class:`sslacc_sim.updates.BatchError` (``ValueError``): a malformed batch of updates;
* :class:`sslacc_sim.model_load.LoadError` (``ValueError``): impossible load settings;
* :class:`sslacc_sim.params.CostsWarning` (``UserWarning``): costs not measured by this run;
* :class:`sslacc_sim.aio.linux.mirror.MirrorError` (``RuntimeError``): a bad frame on the
  cluster link;
* :class:`sslacc_sim.aio.linux.repair.RepairError` (``OSError``): the kernel refused a repair
  step;
* :class:`sslacc_sim.aio.linux.failover.FailoverFailed` (``RuntimeError``): a real failover
  run did not end with a byte-identical file.

This module imports nothing, so every module of the package (the SimPy models and the Linux
adapters alike) can derive from the root.
"""

from __future__ import annotations

__all__ = ["SslaccError"]


class SslaccError(Exception):
    """Root of every exception SSLACC defines."""
