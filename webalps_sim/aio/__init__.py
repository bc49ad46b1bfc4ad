"""WebALPS's adapters to the real world: everything that touches sockets, threads or processes.

* :mod:`webalps_sim.aio.guardian` -- the guardian process: a Unix-socket server, one
  ``selectors`` thread for every host connection, around the sans-IO
  :class:`webalps_sim.service.GuardianService`, with configured limits;
* :mod:`webalps_sim.aio.channel` -- the host's end of the guardian channel on its event loop:
  pipelined requests matched by id, a time limit per question;
* :mod:`webalps_sim.aio.remote` -- a blocking client of the same protocol (a
  :class:`tls12.delegate.SessionDelegate`), for tests and tools;
* :mod:`webalps_sim.aio.host` -- the untrusted host: asyncio HTTP, HTTPS and WebALPS servers
  (plain HTTP beside TLS in one process with ``--http-port``);
* :mod:`webalps_sim.aio.loadgen` -- the closed-loop load generator of the measurements;
* :mod:`webalps_sim.aio.campaign` -- the fault campaign: the guardian killed, frozen or fed
  garbage at seeded random instants while clients download (``python -m webalps_sim.campaign``);
* :mod:`webalps_sim.aio.testbed` -- starts a CA, guardians and hosts as processes for the
  experiments.

The programs keep their short names: ``python -m webalps_sim.guardian``, ``webalps_sim.host``
and ``webalps_sim.load`` are entry points that import ``main`` from here.
"""
