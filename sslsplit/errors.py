"""Every error of SSL splitting, in one hierarchy rooted at :class:`SslSplitError`.

::

    SslSplitError
    ├── CacheMiss (LookupError)          no cache level, origin included, had a valid payload
    ├── PayloadMismatch (ValueError)     a payload that does not match its stub's digest id
    ├── TruncatedMessage (DecodeError)   the server's stream ended inside a message
    ├── SplicerStateError                an input the splicer's state does not allow
    │   ├── SplicerMisuse (ValueError)       local: supply()/resume() with nothing pending
    │   └── DataAfterEnd (DecodeError)       remote: the server sent bytes after its end
    └── BarnraisingError                 Barnraising (:mod:`sslsplit.barnraising.errors`)

The secondary bases say whom to blame and keep the callers' ``except`` clauses working:
``ValueError`` for the caller's own misuse, :class:`tls12.errors.DecodeError` for bytes the
server should not have sent (the proxy answers those like any TLS decoding failure),
``LookupError`` for a payload that cannot be found.  ``except SslSplitError`` catches them all.

The classes are re-exported where they are raised (:mod:`sslsplit.cache`,
:mod:`sslsplit.splicer`, :mod:`sslsplit.state`), so the existing imports keep working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tls12.errors import DecodeError

if TYPE_CHECKING:
    from .splicer import SplicerEvent
    from .state import SplicerInput, SplicerState

__all__ = [
    "SslSplitError",
    "CacheMiss",
    "PayloadMismatch",
    "TruncatedMessage",
    "SplicerStateError",
    "SplicerMisuse",
    "DataAfterEnd",
]


class SslSplitError(Exception):
    """Base of every SSL-splitting error (Barnraising's included)."""


class CacheMiss(SslSplitError, LookupError):
    """No level of the hierarchy, origin included, had a valid payload for an id."""


class PayloadMismatch(SslSplitError, ValueError):
    """A payload from a cache does not match the stub's digest id (a poisoned cache entry)."""


class TruncatedMessage(SslSplitError, DecodeError):
    """The server's stream ended inside a message; ``pending`` bytes of it had arrived."""

    def __init__(self, message: str, pending: int) -> None:
        super().__init__(message)
        self.pending = pending
        self.events: list[SplicerEvent] = []


class SplicerStateError(SslSplitError):
    """An input the splicer's transition table (:data:`sslsplit.state.SPLICER_TRANSITIONS`)
    has no entry for in the current state; the state is left as it was."""

    def __init__(self, message: str, state: SplicerState, event: SplicerInput) -> None:
        super().__init__(message)
        self.state = state
        self.event = event


class SplicerMisuse(SplicerStateError, ValueError):
    """Local misuse: e.g. :meth:`~sslsplit.splicer.Splicer.resume` with no payload pending."""


class DataAfterEnd(SplicerStateError, DecodeError):
    """Remote misbehaviour: the server's stream goes on after it ended."""
