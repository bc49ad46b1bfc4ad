"""SSL splitting: an untrusted proxy serves cached payloads, the origin sends handshakes, MACs and ids.

Modules: :mod:`sslsplit.wire` (proxy--server messages), :mod:`sslsplit.writer`
(the server's record writer), :mod:`sslsplit.store` (published payloads),
:mod:`sslsplit.splicer` (the proxy's sans-IO core), :mod:`sslsplit.cache`
(cache hierarchy), :mod:`sslsplit.payload_http` (cache-miss protocol),
:mod:`sslsplit.server` and :mod:`sslsplit.proxy` (asyncio programs),
:mod:`sslsplit.experiments` (the paper's figures).
"""
