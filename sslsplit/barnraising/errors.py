"""Every error of Barnraising, in one hierarchy, by whom to blame.

::

    SslSplitError                      the root of the package (:mod:`sslsplit.errors`)
    └── BarnraisingError
        ├── URIError (ValueError)          a barnraising:// URI or site name off the grammar
        ├── ConfigError (ValueError)       a sites file or site option that cannot describe a site
        └── ProtocolError                  a join-protocol message the other side rejects
            ├── MalformedMessage, UnsupportedVersion, UnknownOperation, MethodNotAllowed,
            │   BodyTooLarge               the request itself is wrong (4xx)
            ├── UnknownSite, UnknownVolunteer, Forbidden, Banned, RateLimited
            │                              the request is well formed but refused (4xx)
            └── ServiceUnavailable         the broker cannot answer now (503)

``URIError`` and ``ConfigError`` are *local misuse*: the user's own input, raised before
anything is sent (they stay ``ValueError`` subclasses, like any bad argument).  A
:class:`ProtocolError` is what one side of the join protocol tells the other: each subclass
carries the wire ``code`` and HTTP ``status`` it travels as (class attributes), so the broker
raises it, :func:`.protocol.encode_error` puts it on the wire and :func:`.protocol.parse_reply`
raises the very same class in the client.  ``except BarnraisingError`` catches them all,
``except SslSplitError`` every error of SSL splitting and Barnraising.

The classes are re-exported where they are used (:mod:`.uri`, :mod:`.registry`,
:mod:`~sslsplit.barnraising.protocol`), so ``from sslsplit.barnraising.protocol import RateLimited`` keeps working.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import SslSplitError

__all__ = [
    "BarnraisingError",
    "URIError",
    "ConfigError",
    "ProtocolError",
    "MalformedMessage",
    "UnsupportedVersion",
    "UnknownOperation",
    "MethodNotAllowed",
    "BodyTooLarge",
    "UnknownSite",
    "UnknownVolunteer",
    "Forbidden",
    "Banned",
    "RateLimited",
    "ServiceUnavailable",
]


class BarnraisingError(SslSplitError):
    """Base of every Barnraising error (an :class:`~sslsplit.errors.SslSplitError`)."""


class URIError(BarnraisingError, ValueError):
    """A ``barnraising://`` URI (or a site name) that does not follow the grammar."""


class ConfigError(BarnraisingError, ValueError):
    """A sites file or site option that cannot describe a site."""


class ProtocolError(BarnraisingError):
    """A request (or reply) the protocol rejects; :attr:`code` and :attr:`status` go on the wire."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class MalformedMessage(ProtocolError):
    """Not JSON, not an object, a missing or unknown field, a value of the wrong type or range."""

    code, status = "malformed", 400


class UnsupportedVersion(ProtocolError):
    code, status = "unsupported_version", 400


class UnknownOperation(ProtocolError):
    code, status = "unknown_operation", 404


class MethodNotAllowed(ProtocolError):
    code, status = "method_not_allowed", 405


class BodyTooLarge(ProtocolError):
    code, status = "too_large", 413


class UnknownSite(ProtocolError):
    code, status = "unknown_site", 404


class UnknownVolunteer(ProtocolError):
    """No live volunteer with this id: the lease ran out or it was removed; join again."""

    code, status = "unknown_volunteer", 404


class Forbidden(ProtocolError):
    """A report with the wrong token, or a join declaring an address the volunteer does not hold."""

    code, status = "forbidden", 403


class Banned(ProtocolError):
    """The volunteer's address was reported and may not join again yet."""

    code, status = "banned", 403


class RateLimited(ProtocolError):
    """Too many joins from this address; ``retry_after`` says when to try again."""

    code, status = "rate_limited", 429


class ServiceUnavailable(ProtocolError):
    """The broker cannot answer now (e.g. its database failed); try again later."""

    code, status = "unavailable", 503
