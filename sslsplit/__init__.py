"""SSL splitting: an untrusted proxy serves cached payloads, the origin sends handshakes, MACs and ids.

Modules: :mod:`sslsplit.wire` (proxy--server messages), :mod:`sslsplit.writer`
(the server's record writer), :mod:`sslsplit.store` (published payloads),
:mod:`sslsplit.splicer` (the proxy's sans-IO core), :mod:`sslsplit.cache`
(cache hierarchy), :mod:`sslsplit.aio` (cache-miss protocol, background loop),
:mod:`sslsplit.server_upstream` (forwarding to an existing HTTP server),
:mod:`sslsplit.server` and :mod:`sslsplit.proxy` (asyncio programs),
:mod:`sslsplit.experiments` (the loopback testbed and the paper's figures).
"""
