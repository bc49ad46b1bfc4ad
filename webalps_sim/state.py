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

**The handle table** (:class:`HandleTable`): where the guardian keeps what it holds per key
handle -- a session's channel, or an ECDHE ephemeral key waiting for its ClientKeyExchange --
least recently used first.  It bounds them three ways:

* **a size limit** -- adding an entry beyond ``limit`` evicts the least recently *used* one
  (an idle cached session goes before a connection that is serving requests);
* **an idle lifetime** -- an entry not used for ``lifetime`` seconds is dropped the next time
  the table is touched (entries are ordered by last use, so the expired ones are at the
  front and a sweep costs only what it drops);
* **an owner** -- every entry belongs to the host connection that created it, and
  :meth:`HandleTable.drop_owner` drops them all when that connection closes: a host that
  restarts cannot leave orphans behind.

Whatever leaves the table by eviction, expiry or owner is passed to ``on_drop(handle_id)``,
where the guardian frees the secrets; :meth:`HandleTable.pop` (the host's own ``RELEASE``) does
not call it (the caller frees).  Time is injected (``clock``, seconds, non-decreasing): this
module reads no clock of its own.  An entry dropped for any reason is simply unknown
afterwards: the guardian answers ``UNKNOWN_HANDLE``.

The table is a read-only :class:`collections.abc.Mapping` of handle id -> value for
inspection (``table[id]`` and ``id in table`` neither touch nor expire); the guardian uses
:meth:`HandleTable.use`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from enum import Enum
from typing import Generic, TypeVar

from .errors import WebAlpsError

__all__ = ["ChannelState", "ChannelInput", "ChannelStateError", "TRANSITIONS", "advance",
           "describe", "HandleTable"]

V = TypeVar("V")


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


# -- the handle table ----------------------------------------------------------------------


class _Entry(Generic[V]):
    __slots__ = ("value", "owner", "last_used")

    def __init__(self, value: V, owner: Hashable, last_used: float) -> None:
        self.value = value
        self.owner = owner
        self.last_used = last_used


class HandleTable(Mapping[int, V]):
    """Handle id -> value, bounded by ``limit`` entries and ``lifetime`` idle seconds."""

    def __init__(self, limit: int, lifetime: float, clock: Callable[[], float],
                 on_drop: Callable[[int], None]) -> None:
        if limit < 1:
            raise ValueError(f"the handle limit must be at least 1, not {limit}")
        if not lifetime > 0:
            raise ValueError(f"the handle lifetime must be positive, not {lifetime}")
        self.limit = limit
        self.lifetime = lifetime
        self._clock = clock
        self._on_drop = on_drop
        self._entries: OrderedDict[int, _Entry[V]] = OrderedDict()
        self._owned: dict[Hashable, set[int]] = {}
        self.evicted = 0
        """How many entries the size limit pushed out (for tests and logs)."""
        self.expired = 0
        """How many entries idled past their lifetime."""

    # -- Mapping (inspection: no touch, no expiry) --------------------------------------

    def __getitem__(self, handle_id: int) -> V:
        return self._entries[handle_id].value

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, handle_id: object) -> bool:
        return handle_id in self._entries

    # -- the guardian's operations -------------------------------------------------------

    def add(self, handle_id: int, value: V, owner: Hashable) -> None:
        """Insert as the most recently used entry; evict the least recently used beyond the
        limit (never the one just added)."""
        now = self._clock()
        self.expire(now)
        self._entries[handle_id] = _Entry(value, owner, now)
        self._owned.setdefault(owner, set()).add(handle_id)
        while len(self._entries) > self.limit:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            self.evicted += 1

    def use(self, handle_id: int) -> V | None:
        """The value, now the most recently used; ``None`` if unknown (or just expired)."""
        now = self._clock()
        self.expire(now)
        entry = self._entries.get(handle_id)
        if entry is None:
            return None
        entry.last_used = now
        self._entries.move_to_end(handle_id)
        return entry.value

    def pop(self, handle_id: int) -> V | None:
        """Remove an entry without ``on_drop`` (the caller frees it); ``None`` if unknown."""
        entry = self._entries.pop(handle_id, None)
        if entry is None:
            return None
        self._disown(handle_id, entry.owner)
        return entry.value

    def expire(self, now: float | None = None) -> int:
        """Drop every entry idle for ``lifetime`` seconds or more; how many were dropped."""
        if now is None:
            now = self._clock()
        deadline = now - self.lifetime
        dropped = 0
        while self._entries:
            handle_id, entry = next(iter(self._entries.items()))
            if entry.last_used > deadline:
                break
            self._drop(handle_id)
            dropped += 1
        self.expired += dropped
        return dropped

    def drop_owner(self, owner: Hashable) -> int:
        """Drop every entry ``owner`` created (its host connection closed); how many."""
        handle_ids = self._owned.pop(owner, set())
        for handle_id in handle_ids:
            self._entries.pop(handle_id, None)
            self._on_drop(handle_id)
        return len(handle_ids)

    def owned_by(self, owner: Hashable) -> int:
        """How many entries ``owner`` holds now."""
        return len(self._owned.get(owner, ()))

    def _drop(self, handle_id: int) -> None:
        entry = self._entries.pop(handle_id)
        self._disown(handle_id, entry.owner)
        self._on_drop(handle_id)

    def _disown(self, handle_id: int, owner: Hashable) -> None:
        owned = self._owned.get(owner)
        if owned is not None:
            owned.discard(handle_id)
            if not owned:
                del self._owned[owner]
