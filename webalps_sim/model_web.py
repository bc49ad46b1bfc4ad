"""The simulated web clients of the WebALPS SimPy model (:mod:`webalps_sim.model_driver`).

* :class:`PlainStream` -- a sans-IO plain byte stream with the :mod:`tls12` API, so the plain
  HTTP baseline runs through the same :class:`netsim.drive.Driver` as TLS;
* :class:`Fetch` -- the client application: one HTTP/1.0 GET per connection, the response kept.
"""

from __future__ import annotations

from typing import Any

from netsim.drive import Side, Started
from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete

__all__ = ["PlainStream", "Fetch"]


class PlainStream:
    """A sans-IO plain byte stream with the ``tls12`` API (the HTTP baseline): bytes in come
    back as ``ApplicationData``, the peer's FIN as ``ConnectionClosed(clean=True)``."""

    plain = True

    def __init__(self) -> None:
        self._out = bytearray()
        self.closed = False

    def receive_data(self, data: bytes) -> list[Any]:
        return [ApplicationData(data)] if data else [ConnectionClosed(clean=True)]

    def send_data(self, data: bytes) -> None:
        self._out += data

    def close(self) -> None:
        self.closed = True

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


class Fetch:
    """Client application: one HTTP/1.0 GET (on :class:`Started` for a plain stream, on
    :class:`HandshakeComplete` for TLS); keeps the response and ends with the connection."""

    def __init__(self, path: str = "/file") -> None:
        self.request = f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode()
        self.response = bytearray()
        self.closed = False

    @property
    def body(self) -> bytes:
        _, sep, body = bytes(self.response).partition(b"\r\n\r\n")
        return body if sep else b""

    def __call__(self, side: Side, event: Any) -> None:
        plain = getattr(side.obj, "plain", False)
        if isinstance(event, HandshakeComplete) or (plain and isinstance(event, Started)):
            side.obj.send_data(self.request)  # type: ignore[attr-defined]  # SansIO declares no send_data; these sides are connections that have it
        elif isinstance(event, ApplicationData):
            self.response += event.data
        elif isinstance(event, ConnectionClosed):
            self.closed = True
            side.shutdown()
