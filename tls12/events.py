"""Events returned by ``Connection.receive_data`` (frozen, slotted dataclasses).

The application reads these in order; each one says what the bytes just fed
in meant.  Modelled on h11's ``_events.py`` and aioquic's ``quic/events.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import AlertDescription, AlertLevel

if TYPE_CHECKING:
    from .delegate import DelegateRequest

__all__ = [
    "Event",
    "HandshakeComplete",
    "ApplicationData",
    "AlertReceived",
    "ConnectionClosed",
    "DelegateNeeded",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every event."""


@dataclass(frozen=True, slots=True)
class HandshakeComplete(Event):
    """Both Finished messages were exchanged and verified."""

    cipher_suite: int
    """The negotiated :class:`tls12.suites.CipherSuite` value."""
    session_id: bytes
    resumed: bool
    extended_master_secret: bool
    server_name: str | None = None


@dataclass(frozen=True, slots=True)
class ApplicationData(Event):
    """Authenticated application bytes from one record."""

    data: bytes


@dataclass(frozen=True, slots=True)
class AlertReceived(Event):
    """The peer sent an alert.  Fatal alerts are followed by ``ConnectionClosed``."""

    level: AlertLevel
    description: AlertDescription | int


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The connection is closed: the peer's close_notify, a fatal alert, or our error.

    ``clean`` is True only after a close_notify, i.e. when no truncation attack
    could have happened.
    """

    clean: bool
    description: AlertDescription | int | None = None


@dataclass(frozen=True, slots=True)
class DelegateNeeded(Event):
    """The connection asks its delegate (seam 5, event mode): answer with
    ``conn.supply(request.id, answer)`` (:mod:`tls12.delegation`)."""

    request: DelegateRequest
