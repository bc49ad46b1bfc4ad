"""The TLS state machine as data: one transition table per role, and its documentation.

A :class:`TransitionTable` maps *(state, input)* to a :class:`Transition`.
The input is a handshake message type (a :class:`tls12.messages.HandshakeType`
value, or a variant's own, e.g. Reverse SSL's PuzzleReply) or one of the
other record types, :class:`RecordInput`: ChangeCipherSpec, alert,
application data.  Each entry names

* ``handler`` -- the connection method that processes the input;
* ``next_states`` -- the states the handler may lead to.  A handler with one
  possible outcome returns ``None``; one with several returns the state it
  chose (:data:`SAME` stays where it is);
* ``parse`` -- the codec that turns the message body into what the handler
  receives (a :mod:`tls12.messages` ``pull_*`` function; ``pull_opaque`` for a
  body the handler interprets itself);
* ``hashed`` -- whether the handshake message enters the transcript.

:class:`tls12.connection.Connection` does the rest once, for every entry: it
rejects an input the table does not list for the current state with
``unexpected_message`` (RFC 5246 §7.2.2), parses the body with the entry's
codec (``decode_error`` and friends for a malformed one), appends the message
to the transcript before the handler runs (a handler that needs the transcript
*without* it -- Finished, Reverse SSL's KeyTransport -- asks for
``_transcript_before_message()``), and checks that the state the handler
chose is one the entry allows.  Handlers never assign ``self.state``.

A protocol variant derives its table with :meth:`TransitionTable.extend`:
new entries, or old ones with more allowed next states (Reverse SSL's
ClientHello handler may lead to its own states).

The state diagram in ``docs/tls12-state-machine.md`` is generated from the
tables by :mod:`tls12.handshake_docs`, so the documentation cannot drift from
the code (a test checks that the committed file equals the generator's output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .buffer import Buffer
from .messages import HandshakeType, pull_opaque

__all__ = [
    "HandshakeState",
    "RecordInput",
    "AnyState",
    "ANY_STATE",
    "Same",
    "SAME",
    "Transition",
    "TransitionTable",
    "input_name",
]


class HandshakeState(Enum):
    """Where a connection is in the handshake: the input it waits for next.

    The values are what :mod:`tls12.state` exports (under the enum's public name
    ``tls12.connection.HandshakeState``, which re-exports it); a protocol variant adds
    states in an ``Enum`` of its own, registered with
    :func:`tls12.state.register_state_enum`.
    """

    # server
    EXPECT_CLIENT_HELLO = "expect_client_hello"
    EXPECT_CLIENT_KEY_EXCHANGE = "expect_client_key_exchange"
    # client
    EXPECT_SERVER_HELLO = "expect_server_hello"
    EXPECT_CERTIFICATE = "expect_certificate"
    EXPECT_SERVER_KEY_EXCHANGE = "expect_server_key_exchange"
    EXPECT_SERVER_HELLO_DONE = "expect_server_hello_done"
    # both
    EXPECT_CHANGE_CIPHER_SPEC = "expect_change_cipher_spec"
    EXPECT_FINISHED = "expect_finished"
    ESTABLISHED = "established"
    CLOSED = "closed"


class RecordInput(Enum):
    """The inputs that are not handshake messages: the other record content types."""

    CHANGE_CIPHER_SPEC = "ChangeCipherSpec"
    ALERT = "alert"
    APPLICATION_DATA = "application data"


class AnyState(Enum):
    """Wildcard state of a table entry: the entry applies in every state without its own."""

    ANY = "any state"


ANY_STATE = AnyState.ANY


class Same(Enum):
    """Pseudo next state: the input leaves the state as it was."""

    SAME = "same state"


SAME = Same.SAME

Input = int | RecordInput
"""A handshake message type (int / IntEnum member) or a :class:`RecordInput`."""
StateKey = Enum
NextState = Enum


@dataclass(frozen=True)
class Transition:
    """One table entry: who handles the input and where the connection may go next."""

    handler: str
    """Name of the connection method; it receives what ``parse`` returns (for a record input:
    the record's fragment)."""
    next_states: tuple[NextState, ...]
    hashed: bool = True
    """Whether the base class hashes the message into the transcript (before the handler)."""

    parse: Callable[[Buffer], Any] = pull_opaque
    """Codec of the handshake message body (unused for record inputs)."""

    single: Enum | None = field(default=None, init=False, repr=False, compare=False)
    """The one next state, when there is exactly one and it is a concrete state (a fast path)."""

    def __post_init__(self) -> None:
        if not self.next_states:
            raise ValueError(f"transition to {self.handler} allows no next state")
        if len(self.next_states) == 1 and self.next_states[0] is not SAME:
            object.__setattr__(self, "single", self.next_states[0])

    def resolve(self, chosen: NextState | None, current: Enum) -> Enum:
        """The state to enter: ``chosen`` (``None`` when the entry has one next state), checked.

        ``ValueError`` if the handler chose a state the entry does not allow, or
        chose none where the entry allows several -- a bug in the handler, not
        the peer's fault.
        """
        if chosen is None:
            if len(self.next_states) != 1:
                raise ValueError(f"{self.handler} must return one of {_names(self.next_states)}")
            chosen = self.next_states[0]
        elif chosen not in self.next_states:
            raise ValueError(
                f"{self.handler} chose {_name(chosen)}; the table allows {_names(self.next_states)}"
            )
        return current if chosen is SAME else chosen


class TransitionTable(Mapping[tuple[Enum, Input], Transition]):
    """A read-only mapping (state or :data:`ANY_STATE`, input) -> :class:`Transition`."""

    def __init__(self, entries: Mapping[tuple[Enum, Input], Transition]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, key: tuple[Enum, Input]) -> Transition:
        return self._entries[key]

    def __iter__(self) -> Iterator[tuple[Enum, Input]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, state: Enum, received: Input) -> Transition | None:
        """The entry for ``received`` in ``state``, else the wildcard entry, else None."""
        entries = self._entries
        return entries.get((state, received)) or entries.get((ANY_STATE, received))

    def extend(
        self,
        entries: Mapping[tuple[Enum, Input], Transition] | None = None,
        *,
        more_next_states: Mapping[tuple[Enum, Input], tuple[Enum, ...]] | None = None,
    ) -> TransitionTable:
        """A new table: these ``entries`` added (or replaced), and existing entries widened."""
        merged = dict(self._entries)
        merged.update(entries or {})
        for key, extra in (more_next_states or {}).items():
            old = merged[key]
            merged[key] = Transition(
                old.handler, old.next_states + tuple(extra), old.hashed, old.parse
            )
        return TransitionTable(merged)

    def states(self) -> list[Enum]:
        """Every concrete state the table mentions, in first-mention order."""
        seen: dict[Enum, None] = {}
        for (state, _), t in self._entries.items():
            for s in (state, *t.next_states):
                if not isinstance(s, (AnyState, Same)):
                    seen.setdefault(s, None)
        return list(seen)

    def accepted(self, state: Enum) -> list[tuple[Input, Transition]]:
        """The inputs ``state`` accepts: its own entries, then the wildcard ones it lacks."""
        own = [(i, t) for (s, i), t in self._entries.items() if s is state]
        names = {i for i, _ in own}
        wild = [(i, t) for (s, i), t in self._entries.items() if s is ANY_STATE and i not in names]
        return own + wild


def input_name(received: Input) -> str:
    """A readable name for an input (``ClientHello``, ``ChangeCipherSpec``, ``type 99``)."""
    if isinstance(received, RecordInput):
        return received.value
    if isinstance(received, Enum):
        return "".join(w.capitalize() for w in received.name.split("_"))
    try:
        return input_name(HandshakeType(received))
    except ValueError:
        return f"type {received}"


def _name(state: Enum) -> str:
    return str(state.value)


def _names(states: tuple[Enum, ...]) -> str:
    return ", ".join(_name(s) for s in states)
