"""asyncio adapters: drive the sans-IO :mod:`tls12` connections over real sockets.

The core never touches a socket; this package is the only place in :mod:`tls12` that does,
with two adapters of one API:

* :mod:`tls12.aio.stream` -- :func:`serve` and :func:`connect` give the application a
  :class:`TLSStream` (``read``, ``write``, ``drain``, ``close``, byte counters) over asyncio's
  ``StreamReader`` / ``StreamWriter``: the one to read and to teach with;
* :mod:`tls12.aio.protocol` -- :class:`TLSProtocol` and :func:`serve_protocol`: the same
  :class:`TLSStream` to the application, driven one level down on an ``asyncio``
  ``BufferedProtocol`` (no stream objects, the handshake in callbacks, no task before it is
  done): what the project's servers use.

Their robustness rules (fatal errors never crash a server, bounded buffers both ways,
timeouts in the adapter, delegates answered by event) are told in each module.
"""

from __future__ import annotations

from .protocol import ProtocolHandler, TLSProtocol, serve_protocol
from .stream import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_READ_SIZE,
    Answer,
    Handler,
    HandshakeTimeout,
    SansIOConnection,
    TLSStream,
    connect,
    serve,
)

__all__ = [
    "DEFAULT_READ_SIZE",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "SansIOConnection",
    "TLSStream",
    "HandshakeTimeout",
    "Handler",
    "Answer",
    "serve",
    "connect",
    "TLSProtocol",
    "ProtocolHandler",
    "serve_protocol",
]
