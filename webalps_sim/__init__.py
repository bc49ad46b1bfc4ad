"""WebALPS: a trusted co-server (guardian) that holds every TLS secret for an untrusted host.

Reproduces *Securing Web Servers against Insider Attack* (the WebALPS prototype) on
:mod:`tls12`: the guardian process plays the secure coprocessor, the host relays handshake
messages and records, a cost model stands in for the IBM 4758's speed, and the e-voting guardian
of the paper's section 5 runs inside the guardian.

The trust boundary, one module per concern:

* :mod:`webalps_sim.guardian` -- the guardian process (``python -m webalps_sim.guardian``): key
  pair and certificate request at first start, then a Unix-socket server;
* :mod:`webalps_sim.service` -- what the guardian does with each request: RSA, keys, Finished,
  every record's protection, sequence numbers, and the application's requests;
* :mod:`webalps_sim.router` -- inside the guardian, which HTTP requests its application answers;
* :mod:`webalps_sim.app` -- the guardian-application interface and registry, the cost-model hook;
* :mod:`webalps_sim.protocol` -- the host<->guardian frames (sans-IO codecs);
* :mod:`webalps_sim.remote` -- the host's end: a :class:`tls12.delegate.SessionDelegate` over the
  socket;
* :mod:`webalps_sim.host` -- the untrusted host (``python -m webalps_sim.host``): HTTP, HTTPS or
  WebALPS, static files with h11;
* :mod:`webalps_sim.ca` and :mod:`webalps_sim.measure` -- the WebALPS CA
  (``python -m webalps_sim.ca``) and the measured hash it binds into guardian certificates.
"""
