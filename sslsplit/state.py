"""The proxy's splicer as a state machine: an enum of states and a transition table.

The :class:`~sslsplit.splicer.Splicer` turns the server's message stream into client records
(paper §3.3).  Two things decide what it may do next: whether it stopped at a digest stub and
waits for the payload, and whether the server's stream has ended.  Five states cover them::

    OPEN ──STUB──▶ AWAITING_PAYLOAD ──PAYLOAD──▶ OPEN
     │                  │
    EOF                EOF
     ▼                  ▼
    CLOSING ──STUB──▶ CLOSING_AWAITING_PAYLOAD ──PAYLOAD──▶ CLOSING ──END──▶ ENDED

The inputs (:class:`SplicerInput`) come from three places: the server (``DATA``, ``EOF``:
:meth:`~sslsplit.splicer.Splicer.receive_data` with bytes or with ``b""``), the caller
(``PAYLOAD``: :meth:`~sslsplit.splicer.Splicer.supply` or ``resume``; in batch mode
``supply_many``) and the splicer itself (``STUB``: it reached a digest stub and returns
:class:`~sslsplit.splicer.PayloadNeeded` -- in batch mode a run with digest stubs, and
:class:`~sslsplit.splicer.PayloadsNeeded`;
``END``: every record is out after the end of stream, it returns
:class:`~sslsplit.splicer.StreamEnded`).

:func:`advance` is the only way the splicer changes state.  A pair the table does not list
raises, by whom to blame (h11's local/remote split): a server input (bytes after the end of
the stream) raises :class:`~sslsplit.errors.DataAfterEnd`, a :class:`tls12.errors.DecodeError`;
any other input raises :class:`~sslsplit.errors.SplicerMisuse`, a ``ValueError``.  The state
is left as it was: a caller that called ``resume()`` too early may go on.

Sans-IO like the splicer: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from .errors import DataAfterEnd, SplicerMisuse, SplicerStateError

__all__ = [
    "SplicerState",
    "SplicerInput",
    "SPLICER_TRANSITIONS",
    "SERVER_INPUTS",
    "advance",
    "SplicerStateError",
    "SplicerMisuse",
    "DataAfterEnd",
]


class SplicerState(Enum):
    """Where the splicer is in the server's stream."""

    OPEN = "open"
    """The server's stream goes on; every message so far became a record."""
    AWAITING_PAYLOAD = "awaiting_payload"
    """Stopped at a digest stub; later messages wait until its payload is supplied."""
    CLOSING = "closing"
    """The server's stream ended; buffered messages are still being spliced."""
    CLOSING_AWAITING_PAYLOAD = "closing_awaiting_payload"
    """The stream ended while (or after) the splicer stopped at a digest stub."""
    ENDED = "ended"
    """:class:`~sslsplit.splicer.StreamEnded` was returned: every record is out."""


class SplicerInput(Enum):
    """What moves the splicer (module docstring: who sends each)."""

    DATA = "data"
    EOF = "eof"
    STUB = "stub"
    PAYLOAD = "payload"
    END = "end"


S, In = SplicerState, SplicerInput

SPLICER_TRANSITIONS: Mapping[tuple[SplicerState, SplicerInput], SplicerState] = {
    (S.OPEN, In.DATA): S.OPEN,
    (S.OPEN, In.EOF): S.CLOSING,
    (S.OPEN, In.STUB): S.AWAITING_PAYLOAD,
    (S.AWAITING_PAYLOAD, In.DATA): S.AWAITING_PAYLOAD,  # buffered until the payload comes
    (S.AWAITING_PAYLOAD, In.EOF): S.CLOSING_AWAITING_PAYLOAD,
    (S.AWAITING_PAYLOAD, In.PAYLOAD): S.OPEN,
    (S.CLOSING, In.EOF): S.CLOSING,  # b"" again: the same answer again
    (S.CLOSING, In.STUB): S.CLOSING_AWAITING_PAYLOAD,
    (S.CLOSING, In.END): S.ENDED,
    (S.CLOSING_AWAITING_PAYLOAD, In.EOF): S.CLOSING_AWAITING_PAYLOAD,
    (S.CLOSING_AWAITING_PAYLOAD, In.PAYLOAD): S.CLOSING,
    (S.ENDED, In.EOF): S.ENDED,
}
"""``(state, input) -> next state``; every pair not listed is an error (:func:`advance`)."""

del S, In

SERVER_INPUTS = frozenset({SplicerInput.DATA, SplicerInput.EOF})
"""Inputs that come from the server: an illegal one is the server's fault (a DecodeError)."""

_HINTS = {
    SplicerInput.DATA: "data after the end of the server's stream",
    SplicerInput.PAYLOAD: "no PayloadNeeded is pending",
}


def advance(state: SplicerState, event: SplicerInput) -> SplicerState:
    """The state after ``event`` in ``state``; raises if the table has no such transition."""
    try:
        return SPLICER_TRANSITIONS[state, event]
    except KeyError:
        pass
    message = f"{_HINTS.get(event, event.name)} (splicer {state.name}, input {event.name})"
    error = DataAfterEnd if event in SERVER_INPUTS else SplicerMisuse
    raise error(message, state, event) from None
