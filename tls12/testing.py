"""Helpers for tests, benchmarks and teaching: connect two sans-IO endpoints in memory.

A sans-IO connection never touches a socket, so two of them can talk through a plain loop
that hands the bytes one produces to the other.  This module is that loop, written once:

* :func:`pipe` moves bytes between a client and a server until neither has anything left to
  send, and returns what each side saw (:class:`PipeEvents`).  It stops with
  :class:`PipeLivelock` if the two are still talking after ``max_rounds`` round trips, so a
  bug that makes two endpoints answer each other forever fails fast with a clear message
  instead of hanging a test.  Optional ``to_client`` / ``to_server`` functions rewrite the
  bytes in flight: a middlebox (an SSL-splitting splicer, a tampering relay) sits there;
* :func:`credentials` makes an RSA or ECDSA key with a self-signed certificate, once per
  process and kind (RSA key generation costs tens of milliseconds; a test suite asks
  hundreds of times);
* :func:`seeded_rng` is a deterministic ``rng(n) -> bytes`` for the ``rng`` field of
  :class:`tls12.ServerConfig` / :class:`tls12.ClientConfig`: the same seed gives the same
  randoms, so a handshake is reproducible byte for byte.

A complete handshake and one message each way::

    from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
    from tls12.testing import credentials, pipe, seeded_rng

    server = ServerConnection(ServerConfig(credentials=credentials(), rng=seeded_rng(1)))
    client = ClientConnection(ClientConfig(rng=seeded_rng(2)))
    events = pipe(client, server)          # the handshake
    client.send_data(b"hello")
    events = pipe(client, server)
    print(events.server_events)            # [ApplicationData(data=b'hello')]

Anything with ``receive_data(bytes) -> list[events]`` and ``data_to_send() -> bytes`` is an
endpoint (:class:`Endpoint`): the :mod:`tls12` connections, the Reverse SSL connections, a
small adapter around another TLS library.  This module imports only the standard library,
``cryptography`` and :mod:`tls12` -- no pytest -- so benchmarks and notebooks may use it too.
It does no I/O: no sockets, clocks or global random state.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol

from cryptography.hazmat.primitives.asymmetric import ec

from .certs import Credentials, generate_self_signed, self_signed_certificate

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "Endpoint",
    "KeyKind",
    "PipeEvents",
    "PipeLivelock",
    "AnsweringServer",
    "credentials",
    "pipe",
    "seeded_rng",
]

DEFAULT_MAX_ROUNDS = 50
"""Round trips :func:`pipe` allows before it calls the exchange a livelock.

A full TLS 1.2 handshake takes three round trips in this loop (ClientHello; the server's
flight; the client's Finished and the server's answer), a Reverse SSL handshake with a puzzle
five; fifty leaves room for application data going back and forth.
"""

KeyKind = Literal["rsa", "ecdsa"]
"""The key types :func:`credentials` makes: RSA (what :mod:`tls12` servers sign and decrypt
with) or ECDSA on P-256 / P-384 (for tests that a server refuses a key it cannot use)."""


class Endpoint(Protocol):
    """What :func:`pipe` needs of each side: the sans-IO shape of :mod:`tls12` connections."""

    def receive_data(self, data: bytes) -> list[Any]:
        """Take bytes from the peer; return the events they caused."""
        ...

    def data_to_send(self) -> bytes:
        """Return (and forget) the bytes waiting to go to the peer; ``b""`` when none."""
        ...


class PipeEvents(NamedTuple):
    """The events each side of a :func:`pipe` returned: ``(client_events, server_events)``."""

    client_events: list[Any]
    server_events: list[Any]


class PipeLivelock(RuntimeError):
    """The two endpoints were still sending to each other after ``max_rounds`` round trips.

    A well-behaved exchange goes quiet: each handshake flight and each message is answered a
    bounded number of times.  Endless traffic means one side answers everything (an alert
    loop, a renegotiation loop, a filter that keeps injecting bytes).
    """

    def __init__(self, rounds: int, to_server: int, to_client: int) -> None:
        self.rounds = rounds
        self.to_server = to_server
        self.to_client = to_client
        super().__init__(
            f"endpoints still talking after {rounds} round trips "
            f"(last round: {to_server} bytes to the server, {to_client} bytes to the client); "
            "raise max_rounds if the exchange is really that long"
        )


def pipe(
    client: Endpoint,
    server: Endpoint,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    to_server: Callable[[bytes], bytes] | None = None,
    to_client: Callable[[bytes], bytes] | None = None,
) -> PipeEvents:
    """Move bytes between ``client`` and ``server`` until both are quiet; return their events.

    One round trip: the client's pending bytes go to the server, then the server's pending
    bytes (including its answer) go to the client.  The loop ends after the first round in
    which neither side had anything to send.  ``to_server`` / ``to_client``, when given,
    replace the bytes in flight by what they return (a middlebox between the two; returning
    ``b""`` drops them).  Exceptions from either endpoint propagate unchanged, so a test can
    expect the error a bad peer must cause.

    Raises :class:`PipeLivelock` if the endpoints still exchange bytes after ``max_rounds``
    round trips, and :class:`ValueError` if ``max_rounds`` is not positive.
    """
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1, not {max_rounds}")
    client_events: list[Any] = []
    server_events: list[Any] = []
    for _ in range(max_rounds):
        up = client.data_to_send()
        if up and to_server is not None:
            up = to_server(up)
        if up:
            server_events += server.receive_data(up)
        down = server.data_to_send()
        if down and to_client is not None:
            down = to_client(down)
        if down:
            client_events += client.receive_data(down)
        if not up and not down:
            return PipeEvents(client_events, server_events)
    raise PipeLivelock(max_rounds, len(up), len(down))


@functools.cache
def credentials(
    kind: KeyKind = "rsa", *, bits: int = 2048, common_name: str = "localhost"
) -> Credentials:
    """A private key and a self-signed certificate for ``common_name``, localhost and 127.0.0.1.

    Made once per process for each ``(kind, bits, common_name)`` and then returned again (the
    result is immutable).  ``kind="rsa"`` makes an RSA key of ``bits`` bits with
    :func:`tls12.certs.generate_self_signed` (what the servers use); ``kind="ecdsa"`` an EC
    key on P-256 (``bits=256``) or P-384 (``bits=384``), whose
    :attr:`~tls12.certs.Credentials.private_key` is then an ``EllipticCurvePrivateKey``: the
    :mod:`tls12` cipher suites authenticate with RSA only, so such credentials serve tests
    of how a program refuses them.  Raises :class:`ValueError` for an unknown kind or size.
    """
    if kind == "rsa":
        return generate_self_signed(common_name, key_size=bits)
    if kind == "ecdsa":
        curves: dict[int, ec.EllipticCurve] = {256: ec.SECP256R1(), 384: ec.SECP384R1()}
        if bits not in curves:
            raise ValueError(f"ECDSA keys are 256 or 384 bits, not {bits}")
        return _ecdsa_self_signed(common_name, curves[bits])
    raise ValueError(f"unknown key kind {kind!r} (expected 'rsa' or 'ecdsa')")


def _ecdsa_self_signed(common_name: str, curve: ec.EllipticCurve) -> Credentials:
    key = ec.generate_private_key(curve)
    # an EC key where Credentials expects RSA: documented, for tests of refusal
    return Credentials((self_signed_certificate(key, common_name),), key)  # type: ignore[arg-type]  # an EC key on purpose, for tests of refusal


def seeded_rng(seed: int | bytes | str) -> Callable[[int], bytes]:
    """A deterministic ``rng(n) -> n bytes``: SHA-256 of ``seed`` and a counter, as a stream.

    The same seed always gives the same stream, and the stream does not depend on how it is
    cut into calls (``rng(16) + rng(16)`` equals ``rng(32)`` of a fresh generator).  Not for
    keys that protect anything: its output is predictable by design.  ``seed`` may be an
    ``int`` (non-negative), ``bytes`` or ``str``; they are told apart, so ``1``, ``b"1"`` and
    ``"1"`` give different streams.  Raises :class:`ValueError` for a negative ``int`` and
    :class:`TypeError` for anything else.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, bytes, str)):
        raise TypeError(f"seed must be int, bytes or str, not {type(seed).__name__}")
    if isinstance(seed, int):
        if seed < 0:
            raise ValueError(f"seed must be non-negative, not {seed}")
        key = b"int:" + str(seed).encode()
    elif isinstance(seed, str):
        key = b"str:" + seed.encode()
    else:
        key = b"bytes:" + seed
    counter = 0
    buffer = b""

    def rng(n: int) -> bytes:
        nonlocal counter, buffer
        if n < 0:
            raise ValueError(f"cannot make {n} bytes")
        while len(buffer) < n:
            buffer += hashlib.sha256(key + b"/" + counter.to_bytes(8, "big")).digest()
            counter += 1
        out, buffer = buffer[:n], buffer[n:]
        return out

    return rng


class AnsweringServer:
    """A server connection that asks by event, with a delegate answering at once behind it.

    The smallest adapter of the event-driven delegate seam (:mod:`tls12.delegation`): every
    :class:`tls12.events.DelegateNeeded` question is answered with ``request.call(delegate)``
    (a failure becomes the answer, as a remote adapter would supply it) and the events that
    follow are returned in order.  It stands where a :class:`ServerConnection` stands in
    :func:`pipe`; any other attribute is the connection's.  ``hold(request)`` returning True
    keeps a question unanswered in :attr:`held` (answer it later with :meth:`answer`), which
    is how a test makes a delegate slow.
    """

    def __init__(self, conn: Any, delegate: Any, hold: Callable[[Any], bool] | None = None) -> None:
        self.conn = conn
        self.delegate = delegate
        self.hold = hold
        self.held: list[Any] = []
        self.asked: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def _answered(self, events: list[Any]) -> list[Any]:
        from tls12.events import DelegateNeeded

        out: list[Any] = []
        queue = list(events)
        while queue:
            event = queue.pop(0)
            if not isinstance(event, DelegateNeeded):
                out.append(event)
                continue
            self.asked.append(event.request)
            if self.hold is not None and self.hold(event.request):
                self.held.append(event.request)
                continue
            try:
                queue += self.answer(event.request)
            except Exception as exc:
                # the events before the error belong to it, as receive_data reports them
                before = (out + [e for e in queue if not isinstance(e, DelegateNeeded)]
                          + list(getattr(exc, "events", [])))
                exc.events = before  # type: ignore[attr-defined]  # any exception carries them, as RemoteProtocolError.events

                raise
        return out

    def answer(self, request: Any) -> list[Any]:
        """Answer ``request`` now; the connection's events (questions included, unanswered)."""
        try:
            answer = request.call(self.delegate)
        except Exception as exc:  # noqa: BLE001 - a failed operation is an answer too
            answer = exc
        if request in self.held:
            self.held.remove(request)
        events: list[Any] = self.conn.supply(request.id, answer)
        return events

    def receive_data(self, data: bytes, **kwargs: Any) -> list[Any]:
        return self._answered(self.conn.receive_data(data, **kwargs))

    def data_to_send(self) -> bytes:
        from tls12.events import DelegateNeeded

        self._answered([DelegateNeeded(r) for r in self.conn.take_requests()])
        data: bytes = self.conn.data_to_send()
        return data

