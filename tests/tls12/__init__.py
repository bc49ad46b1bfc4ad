"""Tests of the TLS 1.2 core (:mod:`tls12`), its asyncio adapter and the HTTPS file server."""
