"""Inside the guardian: who answers each HTTP request of a connection, the application or the host.

The guardian opens every application-data record the client sends (``webalps.md`` §4.1: the
record layer routes every record through the co-server).  Per TLS connection a
:class:`RequestRouter` reads the opened plaintext as an HTTP/1.1 request stream (h11, server
role) and offers each *whole* request -- head and body -- to the guardian application:

* the application answers (a :data:`webalps_sim.app.Response`): the router serialises the
  response; the guardian seals it and the host only relays the records.  Neither the request
  nor the response is ever plaintext outside the guardian;
* the application returns ``None``: the request's bytes, exactly as the client sent them, go to
  the host, which parses and serves it as any HTTPS server would.

Sans-IO: :meth:`RequestRouter.feed` takes plaintext and returns :class:`Routed` (bytes for the
host, responses to seal).  A request is held until its end, because the application decides on
the whole request; so the host sees a request it serves only once it is complete (its bytes are
returned with the record that completed it; the earlier records give the host ``b""``).

The null application (:class:`webalps_sim.app.NullApp`) claims no request, so its router does
not parse at all: every opened byte goes to the host as it arrives.

Limits, on purpose:

* a body larger than :attr:`RequestRouter.max_body` is not buffered: the router stops routing
  and gives that request and *the rest of the connection* to the host (its application routes
  take small forms; the e-voting ballot is a few dozen bytes);
* bytes that are not HTTP/1.1 (h11 refuses them) also go to the host from then on, which
  answers 400 as it would without a guardian;
* pipelining that mixes host-served and guardian-served requests on one connection is not
  ordered: a guardian answer goes out as soon as its request is complete.  Browsers, curl and
  Python's clients do not pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus

import h11

from .app import GuardianApp, NullApp, Response

__all__ = ["Routed", "RequestRouter", "render_response", "GUARDIAN_SERVER_NAME"]

GUARDIAN_SERVER_NAME = b"webalps-guardian"
"""The ``server`` header of the responses the guardian writes."""


@dataclass(slots=True)
class Routed:
    """What one :meth:`RequestRouter.feed` produced."""

    to_host: bytes = b""
    """Plaintext the host may read: whole requests the application did not claim."""
    responses: list[bytes] = field(default_factory=list)
    """Serialised HTTP responses the guardian must seal and send, in order."""
    claimed: int = 0
    """How many requests the application answered."""
    close: bool = False
    """An answered request asked to close the connection after its response."""


def render_response(response: Response, *, head_only: bool = False,
                    close: bool = False) -> bytes:
    """HTTP/1.1 bytes of an application's ``(status, headers, body)``.

    The guardian owns the framing: any ``content-length``, ``transfer-encoding`` or
    ``connection`` field of the application is replaced by its own.
    """
    status, headers, body = response
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.1 {status} {phrase}".encode()]
    framing = {b"content-length", b"transfer-encoding", b"connection", b"server"}
    for name, value in headers:
        if name.lower() in framing or b"\r" in name + value or b"\n" in name + value:
            continue
        lines.append(name + b": " + value)
    lines.append(b"server: " + GUARDIAN_SERVER_NAME)
    lines.append(b"content-length: " + str(len(body)).encode())
    if close:
        lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + (b"" if head_only else body)


class RequestRouter:
    """Splits one connection's plaintext request stream between the application and the host."""

    def __init__(self, app: GuardianApp, max_body: int = 1 << 20) -> None:
        self.app = app
        self.max_body = max_body
        self.passthrough = isinstance(app, NullApp)
        """True once the router gave up routing: everything goes to the host.  True from the
        start for the null application, which claims nothing: its bytes go to the host at once,
        unparsed (parsing them would only delay them to the end of each request)."""
        self._conn = h11.Connection(h11.SERVER)
        self._raw = bytearray()  # bytes given to the current h11 connection, request not done
        self._request: h11.Request | None = None
        self._body = bytearray()

    def feed(self, data: bytes) -> Routed:
        """Route the next plaintext bytes of the client's stream."""
        routed = Routed()
        if self.passthrough:
            routed.to_host = data
            return routed
        to_host = bytearray()
        pending = data
        while pending:
            self._conn.receive_data(pending)
            self._raw += pending
            pending = b""
            try:
                pending = self._drain(to_host, routed)
            except h11.RemoteProtocolError:
                self._give_up(to_host)
        routed.to_host = bytes(to_host)
        return routed

    def _give_up(self, to_host: bytearray) -> None:
        to_host += self._raw
        self._raw.clear()
        self._body.clear()
        self.passthrough = True

    def _drain(self, to_host: bytearray, routed: Routed) -> bytes:
        """Process h11's events; bytes after a finished request are returned to be fed anew."""
        while not self.passthrough:
            event = self._conn.next_event()
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return b""
            if isinstance(event, h11.Request):
                self._request = event
                self._body.clear()
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self.max_body:
                    self._give_up(to_host)
                    return b""
            elif isinstance(event, h11.EndOfMessage):
                trailing = self._conn.trailing_data[0]
                request_bytes = bytes(self._raw[: len(self._raw) - len(trailing)])
                self._finish(request_bytes, to_host, routed)
                self._conn = h11.Connection(h11.SERVER)
                self._raw = bytearray()
                return trailing
            else:  # PAUSED or anything unexpected: not ours to understand
                self._give_up(to_host)
        return b""

    def _finish(self, request_bytes: bytes, to_host: bytearray, routed: Routed) -> None:
        request = self._request
        assert request is not None
        method = request.method.decode("ascii", "replace")
        target = request.target.decode("ascii", "replace")
        headers = [(bytes(n), bytes(v)) for n, v in request.headers]
        try:
            response = self.app.handle(method, target, headers, bytes(self._body))
        except Exception:  # noqa: BLE001 - an application bug must not reach the host in plaintext
            response = (500, [(b"content-type", b"text/plain")], b"guardian application error\n")
        self._body.clear()
        if response is None:
            to_host += request_bytes
            return
        close = request.http_version == b"1.0" or any(
            n == b"connection" and v.lower() == b"close" for n, v in headers
        )
        routed.responses.append(render_response(response, head_only=method == "HEAD",
                                                close=close))
        routed.claimed += 1
        routed.close = routed.close or close
