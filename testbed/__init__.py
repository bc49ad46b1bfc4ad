"""What is neither protocol nor model: programs, command-line plumbing, run tooling, traces, lab.

The third floor of the testbed, above the protocol core (:mod:`tls12`) and the SimPy building
blocks (:mod:`netsim`), below the five paper packages, which may use it:

* :mod:`testbed.cli` — the command-line plumbing every program shares (``--help``, exit codes,
  one-line errors, certificates, logging);
* :mod:`testbed.apps` — programs built on the library: the HTTPS file server
  (``python -m testbed.https_server``), the demo (``python -m testbed.demo``), the test harness;
* :mod:`testbed.results` and :mod:`testbed.sweep` — run tooling: result folders with run
  metadata and input provenance, parameter sweeps on Dask;
* :mod:`testbed.traces` — the access-log catalogue, parsers, preprocessing and statistics
  (``python -m testbed.traces``);
* :mod:`testbed.linux` — the root-only Linux lab: network namespaces, shaped veth links, the
  delay relay (``python -m testbed.linux.linktestbed``).

It imports :mod:`tls12` and :mod:`netsim` and no paper package.
"""
