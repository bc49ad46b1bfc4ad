"""What a host asks its guardian: tls12 delegate questions <-> guardian protocol messages (sans-IO).

A WebALPS host runs :class:`tls12.ServerConnection` with its secrets in the guardian.  The
connection asks its questions as :class:`tls12.delegate.DelegateRequest` values (an operation
name such as ``"derive"`` and the arguments of the :class:`tls12.delegate.SessionDelegate`
method of that name); this module turns each into the guardian request of
:mod:`webalps_sim.protocol` (:func:`message_for`) and the guardian's reply into the answer the
connection takes back (:meth:`Asker.answer_from`)::

    asker = Asker()
    message = asker.message_for(request)           # -> p.Derive, p.Seal, ...
    reply = <send message, receive the reply frame>
    answer = asker.answer_from(request, reply)     # KeyHandle, bytes, ... or an exception
    conn.supply(request.id, answer)

Both the blocking client (:class:`webalps_sim.aio.remote.RemoteDelegate`) and the host's asyncio
channel (:class:`webalps_sim.aio.channel.GuardianChannel`) use it, so the two cannot disagree on
what a reply means.  Failures come back as exception *values* (an adapter supplies them):

* an ``OPEN`` / ``DERIVE_FINISH`` record that does not open: :class:`RecordRejected`, a
  ``ValueError`` (the connection sends ``bad_record_mac``);
* ``DERIVE_FINISH`` with a wrong Finished: ``None`` (``decrypt_error``);
* ``BAD_KEY_EXCHANGE``: :class:`tls12.errors.IllegalParameter` (``illegal_parameter``);
* ``UNKNOWN_HANDLE`` for ``RESUME``: :class:`HandleLost`, a :class:`tls12.delegate.DelegateError`
  (the connection falls back to a full handshake);
* any other ``ERROR`` reply: :class:`GuardianRefused` (``internal_error``);
* a reply of the wrong type: :class:`GuardianProtocolError` -- the channel is out of step and
  must be dropped.

The guardian returns the server's Finished record sealed together with ``FINISH`` and
``DERIVE_FINISH`` replies; the :class:`Asker` keeps it per handle and answers the ``seal``
question for exactly that record without a request (:meth:`Asker.sealed_ahead`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tls12.delegate import DelegateError, DelegateRequest, EphemeralKey, FlightResult, KeyHandle
from tls12.errors import IllegalParameter, LocalProtocolError
from tls12.messages import HandshakeType, frame_handshake
from tls12.record import ContentType
from tls12.suites import SUITES, CipherSuite, KeyExchange

from . import protocol as p
from .errors import WebAlpsError

__all__ = [
    "WEBALPS_SUITES",
    "OPERATIONS",
    "Asker",
    "GuardianRefused",
    "GuardianProtocolError",
    "GuardianUnavailable",
    "HandleLost",
    "RecordRejected",
    "OpenAnswer",
    "prepare",
    "supply",
]


WEBALPS_SUITES: tuple[CipherSuite, ...] = tuple(
    s for s, prm in SUITES.items()
    if prm.block_size and prm.key_exchange in (KeyExchange.RSA, KeyExchange.ECDHE_RSA)
)
"""The suites a guardian serves: RSA or ECDHE_RSA key exchange (the guardian decrypts the
premaster, or makes and signs the ephemeral key), CBC records."""

OPERATIONS = frozenset({"derive_finish", "finish"})
"""The optional questions a guardian answers in one exchange (``tls12.delegate.EventDelegate``):
the real host and the SimPy model ask exactly these."""


class GuardianUnavailable(WebAlpsError, DelegateError):
    """The guardian cannot be reached, died mid-request, or did not answer in time."""


class GuardianRefused(WebAlpsError, DelegateError):
    """The guardian answered with an error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"guardian refused ({code}): {message}")
        self.code = code


class HandleLost(GuardianRefused):
    """The guardian no longer holds the handle (released, evicted, expired, or a new run)."""


class GuardianProtocolError(GuardianUnavailable):
    """A reply of the wrong type or shape: the channel is out of step and is dropped."""


class RecordRejected(WebAlpsError, ValueError):
    """The guardian would not open a record (one error for MAC, padding and sequence faults)."""


class OpenAnswer(list[bytes]):
    """The plaintexts of an ``open`` question, with the records the guardian sealed by itself
    (its application answered a request): queue ``sealed`` (``count`` records) on the
    connection *before* supplying the plaintexts, then close it if ``close``."""

    count: int  # type: ignore[assignment]  # the attribute hides list.count (public name)

    def __init__(self, plaintexts: tuple[bytes, ...], sealed: bytes, count: int, close: bool) -> None:
        super().__init__(plaintexts)
        self.sealed = sealed
        self.count = count
        self.close = close


def _error(reply: p.Error, request: DelegateRequest) -> BaseException | None:
    """The answer an ``ERROR`` reply stands for (``None`` only for a wrong Finished)."""
    code = reply.code
    if code in (p.ErrorCode.BAD_RECORD, p.ErrorCode.SEQUENCE) and request.op in ("open", "derive_finish"):
        return RecordRejected("bad record MAC")
    if code == p.ErrorCode.BAD_FINISHED and request.op == "derive_finish":
        return None
    if code == p.ErrorCode.BAD_KEY_EXCHANGE:
        return IllegalParameter(f"invalid ECDH public value ({reply.message})")
    if code == p.ErrorCode.UNKNOWN_HANDLE:
        return HandleLost(code, reply.message)
    return GuardianRefused(code, reply.message)


class Asker:
    """Turns one host's questions into guardian requests and replies into answers.

    Keeps the sealed server Finished records that came with ``FINISH`` / ``DERIVE_FINISH``
    replies until the ``seal`` question that wants them (or :meth:`forget`)."""

    def __init__(self) -> None:
        self._finished: dict[int, tuple[int, bytes, bytes]] = {}
        """handle id -> (seq, Finished message, sealed record)."""

    def sealed_ahead(self, request: DelegateRequest) -> bytes | None:
        """The sealed record for a ``seal`` of exactly the server Finished kept for it."""
        if request.op != "seal":
            return None
        handle, from_client, records = request.args
        ready = self._finished.get(handle.id)
        if ready is None or from_client or len(records) != 1:
            return None
        r = records[0]
        if (r.content_type, r.seq, r.plaintext) != (ContentType.HANDSHAKE, ready[0], ready[1]):
            return None
        del self._finished[handle.id]
        return ready[2]

    def forget(self, handle_id: int) -> None:
        self._finished.pop(handle_id, None)

    def clear(self) -> None:
        self._finished.clear()

    def message_for(self, request: DelegateRequest) -> p.Message:
        """The guardian request that answers ``request`` (``ValueError`` for an unknown op)."""
        build = _BUILDERS.get(request.op)
        if build is None:
            raise ValueError(f"no guardian request for {request.op!r}")
        kwargs = dict(request.kwargs)
        return build(*request.args, **kwargs)

    def answer_from(self, request: DelegateRequest, reply: object) -> Any:
        """What the connection is supplied for ``reply`` (an exception value on failure)."""
        if isinstance(reply, p.Error):
            return _error(reply, request)
        expected = _REPLIES[request.op]
        if not isinstance(reply, expected):
            return GuardianProtocolError(
                f"{type(reply).__name__} in reply to {request.op} (expected {expected.__name__})")
        return getattr(self, "_" + request.op)(request, reply)

    # -- replies -------------------------------------------------------------------------

    def _derive(self, request: DelegateRequest, reply: p.HandleReply) -> KeyHandle:
        return KeyHandle(reply.handle_id, reply.cipher_suite)

    _resume = _derive

    def _ephemeral(self, request: DelegateRequest, reply: p.EphemeralReply) -> EphemeralKey:
        return EphemeralKey(KeyHandle(reply.handle_id, reply.cipher_suite), reply.public,
                            reply.signature)

    def _verify_data(self, request: DelegateRequest, reply: p.DataReply) -> bytes:
        return reply.data

    def _check_finished(self, request: DelegateRequest, reply: p.BoolReply) -> bool:
        return reply.value

    def _finish(self, request: DelegateRequest, reply: p.FinishReply) -> bytes | None:
        if not reply.ok:
            return None
        handle = request.args[0]
        message = frame_handshake(HandshakeType.FINISHED, reply.verify_data)
        self._finished[handle.id] = (reply.seq, message, reply.sealed)
        return reply.verify_data

    def _derive_finish(self, request: DelegateRequest, reply: p.DerivedReply) -> FlightResult:
        handle = KeyHandle(reply.handle_id, reply.cipher_suite)
        ours = frame_handshake(HandshakeType.FINISHED, reply.verify_data)
        self._finished[handle.id] = (reply.seq, ours, reply.sealed)
        return FlightResult(handle, reply.client_finished, reply.verify_data)

    def _seal(self, request: DelegateRequest, reply: p.Sealed) -> bytes:
        return reply.records

    def _open(self, request: DelegateRequest, reply: p.Opened) -> Any:
        records = request.args[2]
        if len(reply.plaintexts) != len(records):
            return GuardianProtocolError(
                f"{len(reply.plaintexts)} plaintexts for {len(records)} records")
        return OpenAnswer(reply.plaintexts, reply.sealed, reply.sealed_count, reply.close)


def _ephemeral_id(ephemeral: KeyHandle | None) -> int:
    return 0 if ephemeral is None else ephemeral.id


def _derive(encrypted_premaster: bytes, client_version: int, client_random: bytes,
            server_random: bytes, cipher_suite: int, session_hash: bytes | None, *,
            ephemeral: KeyHandle | None = None) -> p.Derive:
    return p.Derive(encrypted_premaster, client_version, client_random, server_random,
                    cipher_suite, session_hash, _ephemeral_id(ephemeral))


def _derive_finish(encrypted_premaster: bytes, client_version: int, client_random: bytes,
                   server_random: bytes, cipher_suite: int, transcript: bytes,
                   extended_master_secret: bool, record_version: int, finished_fragment: bytes,
                   *, ephemeral: KeyHandle | None = None) -> p.DeriveFinish:
    return p.DeriveFinish(encrypted_premaster, client_version, client_random, server_random,
                          cipher_suite, extended_master_secret, transcript, record_version,
                          finished_fragment, _ephemeral_id(ephemeral))


_BUILDERS: dict[str, Callable[..., p.Message]] = {
    "derive": _derive,
    "derive_finish": _derive_finish,
    "ephemeral": lambda group, scheme, cr, sr, suite: p.Ephemeral(group, scheme, cr, sr, suite),
    "resume": lambda h, cr, sr: p.Resume(h.id, h.cipher_suite, cr, sr),
    "verify_data": lambda h, fc, th: p.VerifyData(h.id, h.cipher_suite, fc, th),
    "check_finished": lambda h, fc, th, vd: p.CheckFinished(h.id, h.cipher_suite, fc, th, vd),
    "finish": lambda h, ch, cvd, sh: p.Finish(h.id, h.cipher_suite, ch, cvd, sh, 0x0303),
    "seal": lambda h, fc, records: p.Seal(
        h.id, h.cipher_suite, fc, tuple((r.content_type, r.version, r.seq, r.plaintext) for r in records)),
    "open": lambda h, fc, records: p.Open(h.id, h.cipher_suite, fc, tuple(records)),
}

_REPLIES: dict[str, type] = {
    "derive": p.HandleReply, "resume": p.HandleReply, "ephemeral": p.EphemeralReply,
    "verify_data": p.DataReply, "check_finished": p.BoolReply, "finish": p.FinishReply,
    "derive_finish": p.DerivedReply, "seal": p.Sealed, "open": p.Opened,
}


def prepare(conn: Any, answer: object) -> None:
    """What must reach the connection *before* ``answer`` is supplied: for an ``open`` whose
    reply carries records the guardian sealed by itself, those records (they hold the next
    write sequence numbers, :meth:`tls12.ServerConnection.queue_sealed`), and close_notify
    behind them if the client asked that answer to end the connection."""
    if isinstance(answer, OpenAnswer) and answer.count:
        try:
            conn.queue_sealed(answer.sealed, answer.count)
            if answer.close:
                conn.close()
        except LocalProtocolError:
            pass  # the connection is over already; nothing more goes to its client


def supply(conn: Any, request: DelegateRequest, answer: object) -> list[Any]:
    """:func:`prepare`, then ``conn.supply``: the connection's events."""
    prepare(conn, answer)
    return conn.supply(request.id, answer)  # type: ignore[no-any-return]  # conn is Any (a tls12 connection); supply returns its events
