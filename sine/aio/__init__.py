"""SINE on sockets: every module of the package that touches asyncio, sockets or TLS.

* :mod:`sine.aio.server` -- :class:`~sine.aio.server.OriginServer`, asyncio listeners around
  the socket-free :class:`sine.origin.Origin`, and the ``python -m sine.server`` command line;
* :mod:`sine.aio.client` -- :class:`~sine.aio.client.SineClient`, the verifying HTTP client
  (``python -m sine.fetch`` calls its :func:`~sine.aio.client.fetch_and_report`);
* :mod:`sine.aio.tree_fetch` -- the client's tree and MICE modes and its byte-range windows;
* :mod:`sine.aio.http` -- the one HTTP/1.1 client connection they all speak through;
* :mod:`sine.aio.runner` -- the link experiments' client-namespace runner
  (``python -m sine.aio run-plan PLAN.json``, see :mod:`sine.aio.__main__`).

The protocol itself (codecs, signer, verifier, state machine) stays sans-IO at the top of
:mod:`sine`; nothing here is imported by it.  This ``__init__`` imports nothing, so that
``import sine.aio.server`` does not start the client as well.
"""
