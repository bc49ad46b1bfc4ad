"""Real failover on Linux: the SSLACC idea with kernel TCP, real processes and an unmodified curl.

The SimPy model of :mod:`sslacc_sim` shows cluster-then-commit in simulated time; this
package does it for real, in network namespaces (issue 11, section 3):

* :mod:`~sslacc_sim.aio.linux.netns` builds the LAN (a client and nodes A, B, C on a bridge that
  floods every frame to every port; the virtual IP starts on A) and the cluster links A–B, B–C;
* :mod:`~sslacc_sim.aio.linux.repair` reads a TCP connection with ``TCP_REPAIR`` on one node and
  rebuilds it on another;
* :mod:`~sslacc_sim.aio.linux.mirror` is the cluster link's protocol and the buddy's copy of a
  connection's state;
* :mod:`~sslacc_sim.aio.linux.service` serves one connection (GETs, uploads, keep-alive;
  cluster, then commit, under a lease); :mod:`~sslacc_sim.aio.linux.primary` is the owner of the address (many connections,
  keepalives, self-fencing); :mod:`~sslacc_sim.aio.linux.backup` the buddy (any link error is a
  death; fence, restore, claim, serve on); :mod:`~sslacc_sim.aio.linux.takeover` rebuilds one
  connection from the mirrored state and what the LAN carried
  (:mod:`~sslacc_sim.aio.linux.sniff`);
* :mod:`~sslacc_sim.aio.linux.node` is the node program (``python -m sslacc_sim.aio.linux.node``);
  :mod:`~sslacc_sim.aio.linux.cluster` starts, breaks and removes a whole cluster by hand
  (``python -m sslacc_sim.aio.linux.cluster up|kill|wake|down|cleanup``);
  :mod:`~sslacc_sim.aio.linux.claim` holds the takeover's fast steps (the port fence, the
  standby address, the gratuitous ARP);
* :mod:`~sslacc_sim.aio.linux.failover` runs curl against A, kills A at a chosen point and checks
  that curl still gets a byte-identical file from B, timing the gap;
* :mod:`~sslacc_sim.aio.linux.campaign` kills, hangs or double-kills the owner at random instants
  under concurrent unmodified clients (:mod:`~sslacc_sim.aio.linux.clients`, whose
  responses :mod:`~sslacc_sim.aio.linux._responses` judges) and checks every response byte for byte (:mod:`~sslacc_sim.aio.linux.loadstats` reads its captures).

These modules are adapters (sockets, processes, the kernel), unlike the sans-IO cores and
SimPy models of the rest of the package. They need Linux and root. Import the modules
themselves (``from sslacc_sim.aio.linux.failover import measure_failover``): the package imports
none of them, so that ``python -m sslacc_sim.aio.linux.node`` starts without loading the rest.
"""

__all__: list[str] = []
