"""Programs built on the TLS library, not part of it: the HTTPS file server and the demo.

:mod:`tls12` is the protocol alone (sans-IO connections, records, key schedule) plus its
asyncio adapter :mod:`tls12.aio`; this subpackage holds the applications that use it, one
responsibility per module:

* :mod:`testbed.apps.file_handler` -- the HTTP/1.1 side (h11): request target to file under the
  root, status codes, streaming with backpressure, head/body record coalescing;
* :mod:`testbed.apps.stats` -- per-connection socket byte counts (:class:`ServerStats`);
* :mod:`testbed.apps.server` -- :func:`start_server`: the two above behind :func:`tls12.aio.serve`;
* :mod:`testbed.apps.harness` -- :class:`BackgroundServer`, the server in a thread, for tests,
  benchmarks and the demo;
* :mod:`testbed.apps.https_cli` -- the command line (``python -m testbed.https_server``);
* :mod:`testbed.apps.demo` -- curl downloads for every suite (``python -m testbed.demo``).

The commands ``python -m testbed.https_server`` and ``python -m testbed.demo`` are thin entry
points into :mod:`~testbed.apps.https_cli` and :mod:`~testbed.apps.demo`.  Import from the module
that holds a name (``from testbed.apps.harness import BackgroundServer``); this package
re-exports nothing, so importing it does not load asyncio.
"""
