"""The Barnraising broker without sockets: the join protocol over HTTP/1.1, and the DNS view.

Paper §5.1, Figure 6: volunteers join a site through the broker, and the broker points clients
at them through DNS.  Everything the broker *decides* is here, sans-IO -- bytes in, bytes out,
``now`` passed in -- so the tests drive it without a network and :mod:`.aio.broker` only moves
bytes between sockets and these objects:

* :class:`BrokerService` -- one broker's state: the :class:`~.registry.Registry` (the SQLite
  volunteer database, injected), :meth:`~BrokerService.dispatch` (one request of the join
  protocol to status, JSON body and ``Retry-After``; never raises),
  :meth:`~BrokerService.lookup` (the live addresses the DNS responder publishes for a name)
  and :meth:`~BrokerService.expire` (drop the volunteers whose lease ended);
* :class:`JoinConnection` -- one keep-alive HTTP/1.1 connection, framed by h11:
  ``receive_data(data, now)`` (``b""`` at end of stream), ``data_to_send()``, and
  :attr:`~JoinConnection.closed` once the adapter must close the socket.  Requests are answered
  one at a time, in order (pipelined ones too); every change is committed to SQLite by the
  registry before its reply is queued.

Limits that keep one bad client from hurting the others: request heads above
:data:`MAX_HEAD` bytes and bodies above :data:`~.protocol.MAX_BODY` are refused (400/413)
and the connection closed; anything that is not HTTP/1.1 gets a 400 and a close.  No input
makes the service raise.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import h11

from .errors import BodyTooLarge, MalformedMessage, ProtocolError, ServiceUnavailable
from .feedback import label_host
from .protocol import MAX_BODY, encode_error, encode_reply, parse_request

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["MAX_HEAD", "BrokerService", "JoinConnection"]

logger = logging.getLogger("sslsplit.barnraising.broker")
MAX_HEAD = 8192
"""Largest request head (request line and headers) in bytes."""


class BrokerService:
    """The broker's decisions over ``registry`` (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.requests = 0
        """Join-protocol requests dispatched (answered or refused)."""
        self.names = {name: site.name for site in registry.sites.values() for name in site.names}
        """Each served DNS name -> the site it belongs to."""
        self._dns_cache: dict[str, tuple[int, float, tuple[str, ...]]] = {}

    @property
    def expiry_period(self) -> float:
        """How often :meth:`expire` should run: a quarter lease, at most 1 s apart."""
        return min(1.0, self.registry.lease_seconds / 4)

    def expire(self, now: float) -> None:
        """Delete the volunteers whose lease ended before ``now``."""
        self.registry.expire(now)

    def lookup(self, name: str, now: float) -> tuple[str, ...] | None:
        """The DNS view: live volunteer addresses for served name ``name``, else ``None``.

        The tuple is cached until the live set changes (:attr:`.Registry.version`) or the
        earliest lease in it ends, so a query costs O(1) however many volunteers there are,
        and the *same* tuple comes back while nothing changed (the responder's answer caches
        key on it, :mod:`.zone`).
        """
        site = self.names.get(name)
        if site is None:
            return self._lookup_one(name, now)
        cached = self._dns_cache.get(site)
        if cached is not None and cached[0] == self.registry.version and now < cached[1]:
            return cached[2]
        live = self.registry.live(site, now)
        valid_until = min((v.expires for v in live), default=float("inf"))
        addresses = tuple(dict.fromkeys(v.host for v in live))  # one entry per address
        self._dns_cache[site] = (self.registry.version, valid_until, addresses)
        return addresses

    def _lookup_one(self, name: str, now: float) -> tuple[str, ...] | None:
        """``v127-0-0-2.mirror.example``: the one volunteer a label names, if it is live under a
        served name (the feedback loop's redirects, :mod:`.feedback`); else ``None``."""
        label, _, parent = name.partition(".")
        host = label_host(label) if parent in self.names else None
        if host is None:
            return None
        live = self.lookup(parent, now)
        return (host,) if live is not None and host in live else None

    def dispatch(self, method: str, target: str, body: bytes, source: str, now: float
                 ) -> tuple[int, bytes, float | None]:
        """Status, JSON body and Retry-After (seconds or ``None``) for one request from address
        ``source``; never raises."""
        self.requests += 1
        try:
            request = parse_request(method, target, body)
            return *encode_reply(self.registry.handle(request, source, now)), None
        except ProtocolError as exc:
            return *encode_error(exc), exc.retry_after
        except Exception:  # a bug: answer 503, log it, keep serving everyone else
            logger.exception("request %s %s failed", method, target[:80])
            return *encode_error(ServiceUnavailable("internal error in the broker")), None


class JoinConnection:
    """One HTTP/1.1 connection of the join protocol from address ``source`` (sans-IO)."""

    def __init__(self, service: BrokerService, source: str) -> None:
        self.service = service
        self.source = source
        self.closed = False
        """True once the connection is over: send what :meth:`data_to_send` holds, then close."""
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._out = bytearray()
        self._request: h11.Request | None = None
        self._body = bytearray()

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the client (``b""``: it closed); answers every request they complete."""
        if self.closed:
            return
        self._conn.receive_data(data)
        try:
            self._process(now)
        except h11.LocalProtocolError:  # cannot happen with well-formed replies: just close
            self.closed = True

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out

    def _process(self, now: float) -> None:
        conn = self._conn
        while not self.closed:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                self._fail(MalformedMessage(f"not an HTTP/1.1 request: {exc}"))
                return
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Request):
                self._request = event
                self._body.clear()
                length = dict(event.headers).get(b"content-length")
                if length is not None and int(length) > MAX_BODY:
                    self._fail(BodyTooLarge(f"body of {int(length)} bytes; at most {MAX_BODY}"))
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > MAX_BODY:
                    self._fail(BodyTooLarge(f"body larger than {MAX_BODY} bytes"))
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                request = self._request
                status, payload, retry = self.service.dispatch(
                    request.method.decode("ascii", "replace"),
                    request.target.decode("ascii", "replace"), bytes(self._body), self.source,
                    now)
                self._respond(status, payload, close=False, retry_after=retry)
                self._request = None
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    self.closed = True
                else:
                    conn.start_next_cycle()
            else:  # the client closed (between or within requests), or h11 paused
                self.closed = True

    def _fail(self, error: ProtocolError) -> None:
        """Answer ``error`` (when a response may still be sent) and end the connection."""
        self._respond(*encode_error(error), close=True)
        self.closed = True

    def _respond(self, status: int, payload: bytes, *, close: bool,
                 retry_after: float | None = None) -> None:
        conn = self._conn
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        if close:
            headers.append(("connection", "close"))
        if retry_after is not None:
            headers.append(("retry-after", str(max(1, math.ceil(retry_after)))))
        self._out += conn.send(h11.Response(status_code=status, headers=headers)) or b""
        self._out += conn.send(h11.Data(data=payload)) or b""
        self._out += conn.send(h11.EndOfMessage()) or b""
