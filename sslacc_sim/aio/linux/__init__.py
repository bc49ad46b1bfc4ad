"""Real failover on Linux: the SSLACC idea with kernel TCP, real processes and an unmodified curl.

The SimPy model of :mod:`sslacc_sim` shows cluster-then-commit in simulated time; this
package does it for real, in network namespaces (issue 11, section 3):

* :mod:`~sslacc_sim.aio.linux.netns` builds the LAN (client, node A with the virtual IP, node B)
  and the cluster link between the nodes;
* :mod:`~sslacc_sim.aio.linux.repair` reads a TCP connection with ``TCP_REPAIR`` on A and
  rebuilds it on B;
* :mod:`~sslacc_sim.aio.linux.mirror` is the cluster link's protocol and B's copy of the state;
* :mod:`~sslacc_sim.aio.linux.node` is the node program (``python -m sslacc_sim.aio.linux.node``);
* :mod:`~sslacc_sim.aio.linux.failover` runs curl against A, kills A mid-connection and checks
  that curl still gets a byte-identical file from B, timing the gap.

These modules are adapters (sockets, processes, the kernel), unlike the sans-IO cores and
SimPy models of the rest of the package. They need Linux and root. Import the modules
themselves (``from sslacc_sim.aio.linux.failover import measure_failover``): the package imports
none of them, so that ``python -m sslacc_sim.aio.linux.node`` starts without loading the rest.
"""

__all__: list[str] = []
