"""WebALPS: a trusted co-server (guardian) that holds every TLS secret for an untrusted host.

Reproduces *Securing Web Servers against Insider Attack* (the WebALPS prototype) on
:mod:`tls12`: the guardian process plays the secure coprocessor, the host relays handshake
messages and records, a cost model stands in for the IBM 4758's speed, and the e-voting guardian
of the paper's section 5 runs inside the guardian.

The rooms, as in every paper package:

* sans-IO core -- :mod:`webalps_sim.protocol` (the host<->guardian messages) over
  :mod:`webalps_sim.codec` (frames and field codecs), :mod:`webalps_sim.service` (what the
  guardian does with each request: RSA, keys, Finished, every record's protection, sequence
  numbers, the application's requests), :mod:`webalps_sim.router` (which HTTP requests the
  guardian's application answers), :mod:`webalps_sim.app` (the guardian-application interface
  and registry, the cost-charger hook);
* :mod:`webalps_sim.state` -- the guardian channel's state machine: an enum and the transition
  table the service consults for every request;
* :mod:`webalps_sim.aio` -- everything with sockets, threads or processes: the guardian server,
  the host's remote delegate, the host's servers, the load generator, the sleeping cost
  chargers, the process testbed of the experiments;
* :mod:`webalps_sim.model_throughput` -- the SimPy model of Figure 4 (requests/s against load);
* :mod:`webalps_sim.experiments` -- the tables and figures as DataFrames;
* :mod:`webalps_sim.errors` -- :class:`~webalps_sim.errors.WebAlpsError`, the one exception root;
* files on disk -- :mod:`webalps_sim.identity` (the guardian's key, request and chain),
  :mod:`webalps_sim.ca` and :mod:`webalps_sim.measure` (the WebALPS CA,
  ``python -m webalps_sim.ca``, and the measured hash it binds into guardian certificates),
  :mod:`webalps_sim.costmodel` (the 4758's service times and counters),
  :mod:`webalps_sim.sealed` and :mod:`webalps_sim.evoting` (the e-voting guardian).

Programs: ``python -m webalps_sim.guardian``, ``webalps_sim.host``, ``webalps_sim.load``
(entry points of :mod:`webalps_sim.aio`), ``webalps_sim.ca``, ``webalps_sim.evoting`` and
``webalps_sim.experiments``.
"""
