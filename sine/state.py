"""The state machine of the streaming verifier: an :class:`~enum.Enum` and its transition table.

:class:`sine.verifier.StreamVerifier` holds a :class:`State` and changes it only through
:func:`transition`, which looks the pair ``(state, input)`` up in :data:`TRANSITIONS`.  A pair
the table does not list is a misuse of the API: :func:`transition` raises
:class:`~sine.errors.LocalProtocolError` and the verifier closes (as h11's ``_state.py``).

Inputs are what the caller feeds (:attr:`Input.DATA`, :attr:`Input.EOF`) and what the verifier
concludes from the bytes (:attr:`Input.TAG_OK`, :attr:`Input.CONTENT_DONE`,
:attr:`Input.FA_DONE`, :attr:`Input.FAIL`).  A successful document walks::

    TAG --TAG_OK--> CONTENT --CONTENT_DONE--> FORWARD --FA_DONE--> DONE --EOF--> DONE

Two listed pairs lead to :attr:`State.CLOSED` because the *peer* broke the format: bytes after
the last block (``DONE, DATA``: :class:`~sine.errors.TrailingData`) and the end of the body
before it (``TAG/CONTENT/FORWARD, EOF``: :class:`~sine.errors.TruncatedDocument`); the verifier
raises those remote errors when the table says ``CLOSED``.  :attr:`State.CLOSED` accepts no input.
"""

from __future__ import annotations

from enum import Enum, auto

from .errors import LocalProtocolError

__all__ = ["State", "Input", "TRANSITIONS", "transition"]


class State(Enum):
    """Where a verifier is in the document (``TAG`` = block 0, ``FORWARD`` = SINEX FA chain)."""

    TAG = auto()
    CONTENT = auto()
    FORWARD = auto()
    DONE = auto()
    CLOSED = auto()


class Input(Enum):
    """What moves a verifier: bytes or end of body from the caller, or a verdict on the bytes."""

    DATA = auto()
    EOF = auto()
    TAG_OK = auto()
    CONTENT_DONE = auto()
    FA_DONE = auto()
    FAIL = auto()


#: ``(state, input) -> next state``; every pair not listed raises :class:`LocalProtocolError`.
TRANSITIONS: dict[tuple[State, Input], State] = {
    (State.TAG, Input.DATA): State.TAG,
    (State.CONTENT, Input.DATA): State.CONTENT,
    (State.FORWARD, Input.DATA): State.FORWARD,
    (State.DONE, Input.DATA): State.CLOSED,  # trailing bytes
    (State.TAG, Input.EOF): State.CLOSED,  # truncated
    (State.CONTENT, Input.EOF): State.CLOSED,  # truncated
    (State.FORWARD, Input.EOF): State.CLOSED,  # truncated
    (State.DONE, Input.EOF): State.DONE,
    (State.TAG, Input.TAG_OK): State.CONTENT,
    (State.CONTENT, Input.CONTENT_DONE): State.FORWARD,
    (State.FORWARD, Input.FA_DONE): State.DONE,
    (State.TAG, Input.FAIL): State.CLOSED,
    (State.CONTENT, Input.FAIL): State.CLOSED,
    (State.FORWARD, Input.FAIL): State.CLOSED,
    (State.DONE, Input.FAIL): State.CLOSED,
}


def transition(state: State, what: Input) -> State:
    """The state after ``what`` in ``state``; :class:`LocalProtocolError` if the table has no
    such pair (every input in :attr:`State.CLOSED`, a verdict out of order)."""
    try:
        return TRANSITIONS[state, what]
    except KeyError:
        if state is State.CLOSED:
            raise LocalProtocolError("verifier is closed after an error") from None
        raise LocalProtocolError(f"{what.name} not allowed in {state.name}") from None
