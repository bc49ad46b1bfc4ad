"""SSL splitting on sockets: the asyncio adapters around the sans-IO cores.

Everything in this subpackage touches sockets, threads or an event loop; the logic lives in
the cores one floor down (:mod:`sslsplit.wire`, :mod:`sslsplit.writer`,
:mod:`sslsplit.splicer`, :mod:`sslsplit.cache`), which these modules only feed bytes.

* :mod:`.payloads` -- the cache-miss protocol (``GET /payload/<encoding>/<id>``), streams that
  keep what arrived before a reset, and a background event loop for synchronous callers;
  its names are re-exported here (``from sslsplit.aio import BackgroundLoop``);
* :mod:`.server` -- the splitting origin server, ``python -m sslsplit.server``;
* :mod:`.server_upstream` -- the server's client of an existing HTTP origin (``--upstream``);
* :mod:`.proxy` -- the untrusted splitting proxy, ``python -m sslsplit.proxy``;
* :mod:`.volunteer` -- the Barnraising volunteer, ``python -m sslsplit.volunteer URI``;
* :mod:`.testbed` -- the loopback testbed: real servers, proxies and clients in one process;
* :mod:`.cli` -- what the programs share: closing servers, waiting for SIGINT/SIGTERM.

The programs keep their documented names: ``sslsplit/server.py``, ``proxy.py`` and
``volunteer.py`` are entry points that only import ``main`` from here.
"""

from .payloads import (
    BackgroundLoop,
    PayloadClient,
    PayloadServerStats,
    ResetAwareReader,
    open_connection,
    payload_path,
    serve_payloads,
    start_server,
)

__all__ = [
    "serve_payloads",
    "PayloadClient",
    "PayloadServerStats",
    "payload_path",
    "BackgroundLoop",
    "ResetAwareReader",
    "open_connection",
    "start_server",
]
