"""Barnraising's operations and a volunteer's lease as a state machine: enums and a table.

**Operations.**  The join protocol (:mod:`~sslsplit.barnraising.protocol`) has five, :class:`Operation`; each is
the last segment of its request path (``POST /barnraising/1/join``).

**A lease.**  The broker hands a joining volunteer an id and a lease (§5.1).  Seen from one
volunteer id, the broker's books have two states::

              JOIN               RENEW
    ABSENT ─────────▶ LIVE ◀──────────┐
       ▲                │ └───────────┘
       └────────────────┘
        LEAVE, REPORT, EXPIRE

``ABSENT`` covers an id never handed out, one that left, one the origin reported and one
whose lease ran out: the broker keeps nothing of them.  Leaving twice is harmless (the reply
says nothing was removed); renewing an absent id is the one illegal move, and the volunteer
must join again.  The registry (:mod:`.registry`) asks :func:`lease_after` before it renews;
a pair the table does not list raises :class:`~.errors.UnknownVolunteer`, the error that
travels back to the volunteer.

Sans-IO: no I/O, no clock (the registry decides ``LIVE`` from the expiry time and ``now``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, StrEnum

from .errors import UnknownVolunteer

__all__ = ["Operation", "LeaseState", "LeaseEvent", "LEASE_TRANSITIONS", "lease_after"]


class Operation(StrEnum):
    """The five operations of the join protocol; the value is the last segment of the path
    (``POST /barnraising/1/join``).  A ``StrEnum``, so it is written and compared as that text."""

    JOIN = "join"
    RENEW = "renew"
    LEAVE = "leave"
    REPORT = "report"
    LOOKUP = "lookup"


class LeaseState(Enum):
    """A volunteer id in the broker's books."""

    ABSENT = "absent"
    """Never handed out, left, reported or expired: nothing is kept."""
    LIVE = "live"
    """In the site's DNS answers until its lease ends."""


class LeaseEvent(Enum):
    """What changes a lease: four of the operations (lookup changes none) and the lease's end."""

    JOIN = "join"
    RENEW = "renew"
    LEAVE = "leave"
    REPORT = "report"
    EXPIRE = "expire"


LEASE_TRANSITIONS: Mapping[tuple[LeaseState, LeaseEvent], LeaseState] = {
    (LeaseState.ABSENT, LeaseEvent.JOIN): LeaseState.LIVE,
    (LeaseState.LIVE, LeaseEvent.RENEW): LeaseState.LIVE,
    (LeaseState.LIVE, LeaseEvent.LEAVE): LeaseState.ABSENT,
    (LeaseState.ABSENT, LeaseEvent.LEAVE): LeaseState.ABSENT,  # leaving twice: removed=false
    (LeaseState.LIVE, LeaseEvent.REPORT): LeaseState.ABSENT,
    (LeaseState.LIVE, LeaseEvent.EXPIRE): LeaseState.ABSENT,
}
"""``(state, event) -> next state``; a pair not listed raises (:func:`lease_after`)."""


def lease_after(state: LeaseState, event: LeaseEvent, volunteer_id: str, site: str
                ) -> LeaseState:
    """The lease of ``volunteer_id`` in ``site`` after ``event``; :class:`UnknownVolunteer`
    (sent back to the volunteer: join again) for a move the table does not allow."""
    try:
        return LEASE_TRANSITIONS[state, event]
    except KeyError:
        raise UnknownVolunteer(f"no live volunteer {volunteer_id} in {site}; "
                               "its lease ended or it was removed: join again") from None
