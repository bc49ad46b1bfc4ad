"""The connection side of seam 5 (:mod:`tls12.delegate`): asking the delegate, inline or by event.

A delegated server connection needs its delegate at a handful of points: the ephemeral key of
an ECDHE ServerKeyExchange, the keys from the ClientKeyExchange (or the whole client flight),
the Finished values, a session to resume, and the protection of every record.  Each such point
is written once, as a question and what to do with the answer::

    return self._ask("derive", args, then=self._derived)

* with a delegate object that answers at once (:class:`tls12.delegate.LocalDelegate`) the
  question is a method call and ``then`` runs at once -- the connection behaves exactly as a
  plain method call would;
* with :class:`tls12.delegate.EventDelegate` nothing is called: the question becomes a
  :class:`tls12.delegate.DelegateRequest`, ``receive_data`` returns it as a
  :class:`tls12.events.DelegateNeeded` event, and ``then`` runs when the adapter calls
  :meth:`Delegation.supply` -- maybe much later, after other connections' answers.  The
  handler that asked returns :data:`PENDING`; the state transition of the message it was
  handling waits for the answer, and so does every byte behind it (they stay buffered).

Records: an encrypted record is opened before it is handled, by one ``open`` question for it
and the application-data records buffered behind it (:meth:`Delegation._ask_open`).  Its
content type is judged *first*, by the transition table: application data before the client's
Finished is ``unexpected_message`` at once, and the delegate is never asked to open it (a
guardian would refuse, and the client would see no alert).  In event mode, the records the
connection writes after its ChangeCipherSpec wait unsealed; they are numbered and turned into
``seal`` questions when the connection next asks something, at the end of ``receive_data`` /
``supply``, or by :meth:`Delegation.take_requests` (after ``send_data`` / ``close``).  A seal
does not stop the connection: its bytes take a slot in the output, and
:meth:`tls12.connection.Connection.data_to_send` returns only what is sealed, in order.  While
an ``open`` is unanswered no record is numbered, because a delegate that answers a request
itself (a WebALPS guardian application) seals its answer at the next sequence numbers and the
adapter hands it in with ``queue_sealed`` before it supplies the opened plaintexts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .delegate import (
    DelegatedReadCipher,
    DelegateError,
    DelegateRequest,
    EventDelegate,
    KeyHandle,
)
from .errors import (
    BadRecordMAC,
    InternalError,
    LocalProtocolError,
    ProtocolVersionError,
    RemoteProtocolError,
    UnexpectedMessage,
)
from .events import DelegateNeeded, Event
from .handshake_table import HandshakeState, RecordInput
from .record import ContentType, OutgoingRecord

if TYPE_CHECKING:
    from .handshake_table import Transition, TransitionTable
    from .record import RecordReader, WriteProtection

__all__ = ["Delegation", "PENDING", "MAX_SEAL_RECORDS"]


class _Pending:
    """The answer is not here yet (see :data:`PENDING`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()
"""What a handler returns when it asked the delegate by event: its transition waits."""

Then = Callable[[Any], Any]
_T = TypeVar("_T")


MAX_SEAL_RECORDS = 32
"""Records per ``seal`` question at most (512 KiB of plaintext): a bulk write becomes several
questions, each small enough for a remote delegate's frame limit, answered in order."""

_RECORD_INPUTS = {
    int(ContentType.APPLICATION_DATA): RecordInput.APPLICATION_DATA,
    int(ContentType.ALERT): RecordInput.ALERT,
    int(ContentType.CHANGE_CIPHER_SPEC): RecordInput.CHANGE_CIPHER_SPEC,
}
_APPLICATION_DATA = int(ContentType.APPLICATION_DATA)


def unwrap(answer: object, *, record: bool = False) -> Any:
    """The answer, or the right exception if the delegate failed.

    ``record``: a ``ValueError`` means the record did not open (``bad_record_mac``).  A
    :class:`RemoteProtocolError` is raised as it is (its own alert); anything else failed on
    our side (``internal_error``)."""
    if not isinstance(answer, BaseException):
        return answer
    if isinstance(answer, RemoteProtocolError):
        raise answer
    if record and isinstance(answer, ValueError):
        raise BadRecordMAC("bad record MAC") from None
    raise InternalError(f"the delegate failed: {answer!r}") from answer


class Delegation:
    """Mixin of :class:`tls12.connection.Connection`: questions to the delegate and their answers."""

    if TYPE_CHECKING:  # provided by Connection
        _delegate: Any
        _events: list[Event]
        _output: bytearray
        _write: WriteProtection
        _reader: RecordReader
        _hs_buffer: bytearray
        _key_handle: KeyHandle | None
        state: Enum
        TRANSITIONS: TransitionTable
        context: Any

        def _process_records(self, limit: int | None) -> tuple[list[Event], int, int]: ...
        def _fatal(self, description: Any) -> None: ...
        def _finish_message(self, transition: Transition, msg_type: int, chosen: object) -> None: ...

    def _init_delegation(self) -> None:
        self._request_ids = itertools.count(1)
        self._blocking: tuple[DelegateRequest, Then] | None = None
        self._after_message: tuple[Transition, int] | None = None
        self._unsealed: list[tuple[int, list[bytes]]] = []
        self._seal_later = False
        """Event mode, our ChangeCipherSpec sent: written records wait for a ``seal`` question."""
        self._held: list[int | bytes] = []
        """Output behind the first unanswered seal: slot ids and bytes, in wire order."""
        self._slots: dict[int, bytes | None] = {}
        self._untaken: list[DelegateRequest] = []

    # --- public API -----------------------------------------------------------

    @property
    def asks_by_event(self) -> bool:
        """Whether questions to the delegate are returned as events (``EventDelegate``)."""
        return isinstance(self._delegate, EventDelegate)

    @property
    def waiting_for(self) -> DelegateRequest | None:
        """The question whose answer the connection needs before it reads on, if any."""
        return self._blocking[0] if self._blocking is not None else None

    @property
    def unsealed_slots(self) -> int:
        """How many seal questions are unanswered (their bytes hold back the output)."""
        return sum(1 for v in self._slots.values() if v is None)

    def take_requests(self) -> list[DelegateRequest]:
        """Questions not yet returned as events: seals of what ``send_data`` / ``close`` /
        ``abort`` wrote, and those of a call that raised.  Call it after any of those."""
        self._flush_unsealed()
        requests, self._untaken = self._untaken, []
        return requests

    def supply(self, request_id: int, answer: object) -> list[Event]:
        """Answer question ``request_id`` (an exception if the delegate failed); the events the
        connection can now produce, as ``receive_data`` returns them (with new questions).

        A late answer to a connection that closed meanwhile is ignored (``[]``).  Raises
        :class:`tls12.errors.RemoteProtocolError` (the alert queued) as ``receive_data`` does.
        """
        if request_id in self._slots:
            self._fill_slot(request_id, answer)
            return []
        blocking = self._blocking
        if blocking is None or blocking[0].id != request_id:
            if self.state is HandshakeState.CLOSED:
                return []
            raise LocalProtocolError(f"no question {request_id} is waiting for an answer")
        self._blocking = None
        if self.state is HandshakeState.CLOSED:
            return []  # the peer left meanwhile: nothing to go on with
        try:
            chosen = blocking[1](answer)
            if chosen is not PENDING and self._after_message is not None:
                (transition, msg_type), self._after_message = self._after_message, None
                self._finish_message(transition, msg_type, chosen)
        except RemoteProtocolError as exc:
            self._fatal(exc.description)
            exc.events = self._events
            self._events = []
            raise
        return self._process_records(None)[0]

    # --- asking ---------------------------------------------------------------

    def _offers(self, op: str) -> bool:
        delegate = self._delegate
        if isinstance(delegate, EventDelegate):
            return delegate.offers(op)
        return callable(getattr(delegate, op, None))

    def _ask(self, op: str, args: tuple[Any, ...], then: Callable[[Any], _T],
             kwargs: tuple[tuple[str, Any], ...] = ()) -> _T:
        """Ask the delegate; ``then(answer)`` now (inline) or on :meth:`supply` (event mode).

        Inline, a ``ValueError`` (a record that does not open) and a :class:`DelegateError`
        (an unknown handle) are handed to ``then`` as answers, as an adapter would supply them.
        """
        delegate = self._delegate
        if not isinstance(delegate, EventDelegate):
            try:
                answer = getattr(delegate, op)(*args, **dict(kwargs))
            except (ValueError, DelegateError) as exc:
                answer = exc
            return then(answer)
        if op != "open":
            self._flush_unsealed()  # ours first: they have the earlier sequence numbers
        request = DelegateRequest(next(self._request_ids), op, args, kwargs)
        self._blocking = (request, then)
        self._untaken.append(request)
        # cast: PENDING stands in for then's result; the transition waits for supply()
        return cast(_T, PENDING)

    def _delegate_events(self, events: list[Event]) -> list[Event]:
        """``events`` plus a :class:`DelegateNeeded` for each question not yet returned."""
        if not isinstance(self._delegate, EventDelegate):
            return events
        self._flush_unsealed()
        if self._untaken:
            events += [DelegateNeeded(r) for r in self._untaken]
            self._untaken = []
        return events

    # --- opening --------------------------------------------------------------

    def _ask_open(self) -> bool:
        """Open the next buffered record ahead (with the application data behind it), after
        judging its content type; True while the answer is awaited."""
        cipher = self._reader.cipher
        if not isinstance(cipher, DelegatedReadCipher):
            return False
        records = self._reader.peek_records(1)
        if not records:
            return False
        content_type, version, fragment = records[0]
        seq = self._reader.seq
        if cipher.has(seq, fragment):
            return False
        received = _RECORD_INPUTS.get(content_type)
        if received is not None and self.TRANSITIONS.lookup(self.state, received) is None:
            raise UnexpectedMessage(f"{received.value} in state {self.state.value}")
        if self._reader.version is not None and version != self._reader.version:
            raise ProtocolVersionError(f"record version 0x{version:04x}")
        batch = [(seq, content_type, version, fragment)]
        if content_type == _APPLICATION_DATA:
            following = self._reader.peek_fragments(content_type, version, cipher.MAX_BATCH)[1:]
            batch += [(seq + 1 + i, content_type, version, f) for i, f in enumerate(following)]
        return self._ask_open_batch(cipher, batch) is PENDING

    def _ask_open_batch(self, cipher: DelegatedReadCipher,
                        batch: list[tuple[int, int, int, bytes]]) -> Any:
        d = cipher.direction

        def opened(answer: object) -> Any:
            if isinstance(answer, ValueError) and len(batch) > 1:
                # the error belongs to the first bad record: deliver the good ones before it
                return self._ask_open_batch(cipher, batch[:1])
            plaintexts = unwrap(answer, record=True)
            if len(plaintexts) != len(batch):
                raise InternalError(f"the delegate opened {len(plaintexts)} of {len(batch)} records")
            cipher.fill(batch, plaintexts)
            return None

        return self._ask("open", (d.handle, d.from_client, batch), opened)

    # --- sealing --------------------------------------------------------------

    def _hold_for_seal(self, content_type: int, fragments: list[bytes]) -> None:
        """Event mode: keep written records until they are numbered and sealed together."""
        self._unsealed.append((content_type, fragments))

    def _flush_unsealed(self) -> None:
        """Number the records waiting to be sealed and ask to seal them, all in one question (a
        response and its close_notify together); not while an ``open`` is unanswered (see the
        module docstring)."""
        if not self._unsealed or (self._blocking is not None and self._blocking[0].op == "open"):
            return
        version = self.context.version
        waiting, self._unsealed = self._unsealed, []
        records = [OutgoingRecord(ct, version, self._write.next_seq(), f)
                   for ct, fragments in waiting for f in fragments]
        direction = self._write.direction  # type: ignore[attr-defined]  # delegated mode: _write is a DelegatedWriteProtection
        for start in range(0, len(records), MAX_SEAL_RECORDS):
            batch = records[start : start + MAX_SEAL_RECORDS]
            request = DelegateRequest(next(self._request_ids), "seal",
                                      (direction.handle, direction.from_client, batch))
            self._slots[request.id] = None
            self._held.append(request.id)
            self._untaken.append(request)

    def _queue_output(self, data: bytes) -> None:
        """Bytes for the wire, behind any unanswered seal."""
        if self._held:
            self._held.append(bytes(data))
        else:
            self._output += data

    def _fill_slot(self, request_id: int, answer: object) -> None:
        if isinstance(answer, BaseException):
            # nothing can be sent after a record that could not be sealed: the connection is over
            self._slots.clear()
            self._held.clear()
            self.state = HandshakeState.CLOSED
            raise InternalError(f"the delegate could not seal: {answer!r}") from answer
        # cast: a seal's answer is the sealed bytes (SessionDelegate.seal)
        self._slots[request_id] = bytes(cast(bytes, answer))
        held = self._held
        while held:
            head = held[0]
            if isinstance(head, bytes):
                self._output += head
            else:
                sealed = self._slots[head]
                if sealed is None:
                    break
                del self._slots[head]
                self._output += sealed
            held.pop(0)
