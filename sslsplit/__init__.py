"""SSL splitting: an untrusted proxy serves cached payloads, the origin sends handshakes, MACs and ids.

Modules: :mod:`sslsplit.wire` (proxy--server messages), :mod:`sslsplit.writer`
(the server's record writer), :mod:`sslsplit.store` (published payloads),
:mod:`sslsplit.splicer` (the proxy's sans-IO core), :mod:`sslsplit.cache`
(cache hierarchy), :mod:`sslsplit.aio` (cache-miss protocol, background loop),
:mod:`sslsplit.server_upstream` (forwarding to an existing HTTP server),
:mod:`sslsplit.server` and :mod:`sslsplit.proxy` (asyncio programs),
:mod:`sslsplit.testbed` (the loopback testbed), :mod:`sslsplit.experiments` (the paper's
figures, one function each, measured and modelled).

Models of §6.3, built on :mod:`netsim`: :mod:`sslsplit.costmodel` (server bytes per request,
structural and linear), :mod:`sslsplit.replay` (trace replay through a cost model),
:mod:`sslsplit.latency` (Figure 12's ADSL testbed in SimPy) and
:mod:`sslsplit.trace_experiments` (trace statistics and the workloads the figures replay);
:mod:`sslsplit.paper_points` holds the published numbers.
"""
