"""Web access logs: the catalogue, the preprocessing and the statistics.

The parsers themselves are generic building blocks of the simulation floor
(:mod:`netsim.logparse`: vectorised, chunked CLF/Combined, EPA, WorldCup98 CSV, LP DAAC and SDSC
parsers that count malformed lines instead of failing); this package builds on them:

* :mod:`testbed.traces.workload` — GET/200 selection, RFC 3986 canonical URLs, (URL, size)
  objects and daytime chunks;
* :mod:`testbed.traces.stats` — redundancy / inherent compressibility, repetition vs window,
  request-size CDFs (the numbers in each trace's ``SOURCE.md``);
* :mod:`testbed.traces.catalogue` — the trace manifest, ``fetch`` and the command line
  ``python -m testbed.traces``.
"""
