"""A sans-IO TLS 1.2 implementation whose record layer and handshake are open to experiment.

Server and client connections take bytes and return events (see
:mod:`tls12.connection`); asyncio adapters are in :mod:`tls12.aio`.  The seams
that the testbed's protocols use are documented in :mod:`tls12.keys` (private
key operations), :mod:`tls12.record` (record writer), :mod:`tls12.state`
(export/import) and the handshake modules (customisation points).
:mod:`tls12.trace` is what a connection reports it did (a qlog-like event log, and
the same view of bare record bytes for parties without a connection);
:mod:`tls12.testing` connects two connections in memory for tests and teaching;
:mod:`tls12.keylog` is the debugging switch that writes the NSS key log Wireshark reads
(``ServerConfig(keylog=...)``, ``SSLKEYLOGFILE`` in the programs; off by default);
the programs built on the library (the HTTPS file server, the demo) live in
:mod:`testbed.apps`.
"""

from .client_connection import ClientConnection
from .config import ClientConfig, ServerConfig
from .errors import AlertDescription, LocalProtocolError, RemoteProtocolError, TLSError
from .events import AlertReceived, ApplicationData, ConnectionClosed, Event, HandshakeComplete
from .server_connection import ServerConnection
from .session import InMemorySessionStore, Session
from .suites import CipherSuite

__all__ = [
    "ServerConnection",
    "ClientConnection",
    "ServerConfig",
    "ClientConfig",
    "CipherSuite",
    "Session",
    "InMemorySessionStore",
    "Event",
    "HandshakeComplete",
    "ApplicationData",
    "AlertReceived",
    "ConnectionClosed",
    "AlertDescription",
    "TLSError",
    "LocalProtocolError",
    "RemoteProtocolError",
]
