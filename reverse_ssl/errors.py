"""Typed errors of Reverse SSL, classified by blame like :mod:`tls12.errors`.

Every error of the package derives from :class:`ReverseSSLError` (catch it to
catch anything Reverse SSL itself refused) and, through its second base, from
the :mod:`tls12.errors` class the connection machinery knows how to answer.

* Local misuse (no alert on the wire): :class:`OneTimeKeyReused` -- our own
  code asked a one-time key to sign a second message; the key refuses.
* Remote misbehaviour (subclasses of :class:`tls12.errors.RemoteProtocolError`,
  so the connection sends the fatal alert named by ``description`` and
  closes): every reason the paper gives for refusing a handshake has its own
  class, so a test -- or an operator reading a log -- sees *why*.

Client-side refusals (the server misbehaved): :class:`BadOfflineSignature`
(wrong W), :class:`ForgedOneTimeSignature`, :class:`ReusedOneTimeKey`.
Server-side refusals (the client's puzzle reply is bad):
:class:`WrongPreimage`, :class:`ModulusOutOfRange`, :class:`MissingSelfSignature`,
:class:`BadSelfSignature`, :class:`PuzzleReplayed`.
"""

from __future__ import annotations

from tls12.errors import (
    AlertDescription,
    DecryptError,
    IllegalParameter,
    LocalProtocolError,
    RemoteProtocolError,
)

__all__ = [
    "ReverseSSLError",
    "OneTimeKeyReused",
    "ReverseSSLRefused",
    "BadOfflineSignature",
    "ForgedOneTimeSignature",
    "ReusedOneTimeKey",
    "PuzzleRefused",
    "WrongPreimage",
    "ModulusOutOfRange",
    "MissingSelfSignature",
    "BadSelfSignature",
    "PuzzleReplayed",
]


class ReverseSSLError(Exception):
    """Root of every exception Reverse SSL defines."""


class OneTimeKeyReused(LocalProtocolError, ReverseSSLError):
    """A one-time signing key was asked to sign a second message (refused, nothing signed)."""


class ReverseSSLRefused(RemoteProtocolError, ReverseSSLError):
    """Base class: the peer's Reverse SSL handshake message was refused."""


class BadOfflineSignature(DecryptError, ReverseSSLRefused):
    """The RSA signature W over the one-time public key does not verify (wrong W)."""

    description = AlertDescription.DECRYPT_ERROR


class ForgedOneTimeSignature(DecryptError, ReverseSSLRefused):
    """The one-time signature over the transcript does not verify."""

    description = AlertDescription.DECRYPT_ERROR


class ReusedOneTimeKey(IllegalParameter, ReverseSSLRefused):
    """The server signed with a one-time public key this client has already seen."""

    description = AlertDescription.ILLEGAL_PARAMETER


class PuzzleRefused(ReverseSSLRefused):
    """Base class of the reasons a puzzle reply is refused (Figure 3)."""

    description = AlertDescription.ACCESS_DENIED


class WrongPreimage(IllegalParameter, PuzzleRefused):
    """Second construction: the hash pre-image x does not satisfy H(x || y) = H(m)."""

    description = AlertDescription.ACCESS_DENIED


class ModulusOutOfRange(IllegalParameter, PuzzleRefused):
    """The client's RSA modulus n is not inside [m - 2^K, m + 2^K]."""

    description = AlertDescription.ACCESS_DENIED


class MissingSelfSignature(IllegalParameter, PuzzleRefused):
    """The puzzle reply carries no self-signature although the server requires one."""

    description = AlertDescription.ACCESS_DENIED


class BadSelfSignature(DecryptError, PuzzleRefused):
    """The self-signature s does not verify under the client's own (n, e)."""

    description = AlertDescription.ACCESS_DENIED


class PuzzleReplayed(IllegalParameter, PuzzleRefused):
    """This modulus already solved a puzzle on this server (a replayed solution)."""

    description = AlertDescription.ACCESS_DENIED
