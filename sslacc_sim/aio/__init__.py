"""Everything of SSLACC that touches sockets, the clock, processes or the kernel.

* :mod:`.measure` -- times the real code of the package (checkpoint, delta, session
  codecs, state export and import, a loopback UDP round) into the
  :class:`~sslacc_sim.params.ClusterCosts` the SimPy models read
  (``python -m sslacc_sim.measure``);
* :mod:`.linux` -- the real two-node failover: network namespaces, ``TCP_REPAIR``, the node
  program (``python -m sslacc_sim.aio.linux.node``) and the run that kills a node under curl.

The package imports none of its modules, so that ``python -m sslacc_sim.aio.linux.node``
starts without loading the rest; import the modules themselves.
"""

__all__: list[str] = []
