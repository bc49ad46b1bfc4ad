"""Web access logs: the catalogue, the parsers, the preprocessing and the statistics.

* :mod:`testbed.traces.logparse` — vectorised, chunked access-log parsers (CLF/Combined, EPA,
  WorldCup98 CSV, LP DAAC, SDSC) that count malformed lines instead of failing;
* :mod:`testbed.traces.workload` — GET/200 selection, RFC 3986 canonical URLs, (URL, size)
  objects and daytime chunks;
* :mod:`testbed.traces.stats` — redundancy / inherent compressibility, repetition vs window,
  request-size CDFs (the numbers in each trace's ``SOURCE.md``);
* :mod:`testbed.traces.catalogue` — the trace manifest, ``fetch`` and the command line
  ``python -m testbed.traces``.
"""
