"""The guardian channel's state machine: which request may follow which, per key handle.

The guardian keeps one *channel* per key handle (:mod:`webalps_sim.service`).  Its state says
what the host may ask about that handle; every request the service accepts is first looked up
here, and an input the table does not list for the current state is a
:class:`ChannelStateError` -- the guardian refuses the request (``ERROR``, ``UNSUPPORTED``) and
the channel stays as it was, so a refused ``OPEN`` batch advances nothing.

States (:class:`ChannelState`):

* ``NEW`` -- no channel yet: only ``DERIVE``, ``DERIVE_FINISH`` and ``RESUME`` create one
  (``RELEASE`` of an unknown handle is answered ``OK``: the guardian forgot it already);
* ``KEYED`` -- keys derived (a full handshake's ``DERIVE``, or ``RESUME``), the client's
  Finished not yet verified: the handshake's records (the client's Finished, the server's)
  may be opened and sealed, Finished values computed and checked, but **no application
  data** goes either way -- the paper's guardian does not serve a client that has not proved
  it holds the keys;
* ``ESTABLISHED`` -- the client's Finished was verified (``CHECK_FINISHED`` or ``FINISH``
  answered right, or ``DERIVE_FINISH`` succeeded): application data flows both ways;
* ``RELEASED`` -- ``RELEASE`` dropped the channel; the handle is unknown from now on.

Inputs (:class:`ChannelInput`) are the requests, with ``SEAL`` and ``OPEN`` split by the
records' content type (application data or not), and one outcome:
``CLIENT_FINISHED_VERIFIED``, which the service feeds after a Finished check answered right.
``RESUME_FROM`` is the resumption request seen from the channel it resumes.

The direction rules (the guardian opens only client records, seals only server records) and
the sequence-number rule are checks on a request's fields, not on its order, and stay in the
service.  :func:`describe` gives the table as a Markdown list.
"""

from __future__ import annotations

from enum import Enum

from .errors import WebAlpsError

__all__ = ["ChannelState", "ChannelInput", "ChannelStateError", "TRANSITIONS", "advance",
           "describe"]


class ChannelState(Enum):
    NEW = "new"
    KEYED = "keyed"
    ESTABLISHED = "established"
    RELEASED = "released"


class ChannelInput(Enum):
    DERIVE = "DERIVE"
    DERIVE_FINISH = "DERIVE_FINISH"
    RESUME = "RESUME"
    RESUME_FROM = "RESUME (of this session)"
    VERIFY_DATA = "VERIFY_DATA"
    CHECK_FINISHED = "CHECK_FINISHED"
    FINISH = "FINISH"
    CLIENT_FINISHED_VERIFIED = "client's Finished verified"
    SEAL_HANDSHAKE = "SEAL of handshake or alert records"
    SEAL_APPLICATION = "SEAL of application data"
    OPEN_HANDSHAKE = "OPEN of handshake or alert records"
    OPEN_APPLICATION = "OPEN of application data"
    RELEASE = "RELEASE"


_S, _In = ChannelState, ChannelInput

#: What a channel in either keyed state accepts and stays in that state.
_HANDSHAKE_WORK = (_In.RESUME_FROM, _In.VERIFY_DATA, _In.CHECK_FINISHED, _In.FINISH, _In.SEAL_HANDSHAKE,
                   _In.OPEN_HANDSHAKE)

TRANSITIONS: dict[tuple[ChannelState, ChannelInput], ChannelState] = {
    (_S.NEW, _In.DERIVE): _S.KEYED,
    (_S.NEW, _In.RESUME): _S.KEYED,
    (_S.NEW, _In.DERIVE_FINISH): _S.ESTABLISHED,
    (_S.NEW, _In.RELEASE): _S.RELEASED,
    **{(_S.KEYED, i): _S.KEYED for i in _HANDSHAKE_WORK},
    (_S.KEYED, _In.CLIENT_FINISHED_VERIFIED): _S.ESTABLISHED,
    (_S.KEYED, _In.RELEASE): _S.RELEASED,
    **{(_S.ESTABLISHED, i): _S.ESTABLISHED for i in _HANDSHAKE_WORK},
    (_S.ESTABLISHED, _In.CLIENT_FINISHED_VERIFIED): _S.ESTABLISHED,
    (_S.ESTABLISHED, _In.SEAL_APPLICATION): _S.ESTABLISHED,
    (_S.ESTABLISHED, _In.OPEN_APPLICATION): _S.ESTABLISHED,
    (_S.ESTABLISHED, _In.RELEASE): _S.RELEASED,
}
"""``(state, input) -> next state``; a pair that is not here is refused."""

_REASONS: dict[tuple[ChannelState, ChannelInput], str] = {
    (_S.KEYED, _In.SEAL_APPLICATION): "application data before the client's Finished was verified",
    (_S.KEYED, _In.OPEN_APPLICATION): "application data before the client's Finished was verified",
}
"""Why some refusals happen, in the words the guardian's ``ERROR`` reply uses."""


class ChannelStateError(WebAlpsError):
    """A request out of order for its channel: ``state`` and ``input`` name the refused pair."""

    def __init__(self, state: ChannelState, channel_input: ChannelInput) -> None:
        reason = _REASONS.get((state, channel_input),
                              f"{channel_input.value} is not accepted in state {state.value}")
        super().__init__(reason)
        self.state = state
        self.input = channel_input


def advance(state: ChannelState, channel_input: ChannelInput) -> ChannelState:
    """The state after ``channel_input`` in ``state``; :class:`ChannelStateError` if refused."""
    try:
        return TRANSITIONS[state, channel_input]
    except KeyError:
        raise ChannelStateError(state, channel_input) from None


def describe() -> str:
    """The table as Markdown, one line per state (for the documentation)."""
    lines = []
    for state in ChannelState:
        moves = [f"{i.value} -> {TRANSITIONS[state, i].value}"
                 for i in ChannelInput if (state, i) in TRANSITIONS]
        lines.append(f"* **{state.value}**: " + ("; ".join(moves) or "(final)"))
    return "\n".join(lines)

