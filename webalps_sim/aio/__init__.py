"""WebALPS's adapters to the real world: everything that touches sockets, threads or processes.

* :mod:`webalps_sim.aio.guardian` -- the guardian process: a Unix-socket server with a thread
  per host connection around the sans-IO :class:`webalps_sim.service.GuardianService`;
* :mod:`webalps_sim.aio.remote` -- the host's end of the guardian channel, a
  :class:`tls12.delegate.SessionDelegate` over a blocking Unix socket;
* :mod:`webalps_sim.aio.host` -- the untrusted host: asyncio HTTP, HTTPS and WebALPS servers;
* :mod:`webalps_sim.aio.loadgen` -- the closed-loop load generator of the measurements;
* :mod:`webalps_sim.aio.testbed` -- starts a CA, guardians and hosts as processes for the
  experiments.

The programs keep their short names: ``python -m webalps_sim.guardian``, ``webalps_sim.host``
and ``webalps_sim.load`` are entry points that import ``main`` from here.
"""
