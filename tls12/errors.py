"""Typed errors of the TLS 1.2 core, classified by blame.

Every error that ends a connection carries the :class:`AlertDescription` that
the connection sends (or received) as a class attribute, in the manner of
aioquic's ``tls.py``.  Two families:

* :class:`LocalProtocolError` -- *we* misused the API (sending before the
  handshake finished, writing after close).  No alert goes on the wire.
* :class:`RemoteProtocolError` -- the *peer* misbehaved.  The connection
  queues a fatal alert with the class's ``description``, moves to the closed
  state and raises the error from ``receive_data``.

All decryption failures -- bad MAC, bad padding, bad length -- are one
:class:`BadRecordMAC`, so that no padding/MAC oracle leaks (RFC 5246 §7.2.2).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = [
    "AlertLevel",
    "AlertDescription",
    "TLSError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "AlertReceivedError",
    "UnexpectedMessage",
    "BadRecordMAC",
    "RecordOverflow",
    "HandshakeFailure",
    "BadCertificate",
    "IllegalParameter",
    "DecodeError",
    "DecryptError",
    "ProtocolVersionError",
    "InsufficientSecurity",
    "InternalError",
    "UnsupportedExtension",
    "UnrecognizedName",
]


class AlertLevel(IntEnum):
    WARNING = 1
    FATAL = 2


class AlertDescription(IntEnum):
    """TLS 1.2 alert descriptions (RFC 5246 §7.2, RFC 6066, RFC 7301)."""

    CLOSE_NOTIFY = 0
    UNEXPECTED_MESSAGE = 10
    BAD_RECORD_MAC = 20
    DECRYPTION_FAILED_RESERVED = 21
    RECORD_OVERFLOW = 22
    DECOMPRESSION_FAILURE = 30
    HANDSHAKE_FAILURE = 40
    NO_CERTIFICATE_RESERVED = 41
    BAD_CERTIFICATE = 42
    UNSUPPORTED_CERTIFICATE = 43
    CERTIFICATE_REVOKED = 44
    CERTIFICATE_EXPIRED = 45
    CERTIFICATE_UNKNOWN = 46
    ILLEGAL_PARAMETER = 47
    UNKNOWN_CA = 48
    ACCESS_DENIED = 49
    DECODE_ERROR = 50
    DECRYPT_ERROR = 51
    EXPORT_RESTRICTION_RESERVED = 60
    PROTOCOL_VERSION = 70
    INSUFFICIENT_SECURITY = 71
    INTERNAL_ERROR = 80
    INAPPROPRIATE_FALLBACK = 86
    USER_CANCELED = 90
    NO_RENEGOTIATION = 100
    UNSUPPORTED_EXTENSION = 110
    UNRECOGNIZED_NAME = 112
    NO_APPLICATION_PROTOCOL = 120


class TLSError(Exception):
    """Base class of every error raised by :mod:`tls12`."""

    description: AlertDescription = AlertDescription.INTERNAL_ERROR


class LocalProtocolError(TLSError):
    """The local application misused the API; nothing was sent to the peer."""


class RemoteProtocolError(TLSError):
    """The peer violated the protocol; a fatal alert with ``description`` was queued.

    ``events`` holds what the same ``receive_data`` call decoded *before* the
    violation (authenticated application data, for instance), so an adapter can
    still deliver it.
    """

    events: list[Any] = []  # noqa: RUF012 - replaced per instance; subclasses narrow the type


class AlertReceivedError(TLSError):
    """The peer sent a fatal alert (its description is in ``description``)."""

    def __init__(self, description: AlertDescription | int, message: str = "") -> None:
        try:
            self.description = AlertDescription(description)
        except ValueError:
            self.description = AlertDescription.INTERNAL_ERROR
        self.raw_description = int(description)
        super().__init__(message or f"peer sent fatal alert {self.raw_description}")


class UnexpectedMessage(RemoteProtocolError):
    description = AlertDescription.UNEXPECTED_MESSAGE


class BadRecordMAC(RemoteProtocolError):
    description = AlertDescription.BAD_RECORD_MAC


class RecordOverflow(RemoteProtocolError):
    description = AlertDescription.RECORD_OVERFLOW


class HandshakeFailure(RemoteProtocolError):
    description = AlertDescription.HANDSHAKE_FAILURE


class BadCertificate(RemoteProtocolError):
    description = AlertDescription.BAD_CERTIFICATE


class IllegalParameter(RemoteProtocolError):
    description = AlertDescription.ILLEGAL_PARAMETER


class DecodeError(RemoteProtocolError):
    description = AlertDescription.DECODE_ERROR


class DecryptError(RemoteProtocolError):
    description = AlertDescription.DECRYPT_ERROR


class ProtocolVersionError(RemoteProtocolError):
    description = AlertDescription.PROTOCOL_VERSION


class InsufficientSecurity(RemoteProtocolError):
    description = AlertDescription.INSUFFICIENT_SECURITY


class InternalError(RemoteProtocolError):
    description = AlertDescription.INTERNAL_ERROR


class UnsupportedExtension(RemoteProtocolError):
    description = AlertDescription.UNSUPPORTED_EXTENSION


class UnrecognizedName(RemoteProtocolError):
    description = AlertDescription.UNRECOGNIZED_NAME
