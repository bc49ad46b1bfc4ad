"""Typed errors for SINE, sorted by blame.

* :class:`LocalProtocolError` -- the caller misused the API (wrong state, bad argument).
* :class:`RemoteProtocolError` -- the bytes that arrived are wrong.  Every remote error names
  the first bad *block*: ``0`` is the tag itself (the signed header ``Y_0``), ``1..n`` are the
  document blocks ``B_1..B_n`` and ``n+1..n+m`` are the Forward-Authenticator blocks of SINEX.

A verifier that raised a :class:`RemoteProtocolError` has released exactly the blocks before
``error.block`` and nothing else; it is closed afterwards.
"""

from __future__ import annotations

__all__ = [
    "SineError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "TagFormatError",
    "SignatureInvalid",
    "UntrustedTag",
    "DigestMismatch",
    "TagExpired",
    "TagNotYetValid",
    "WrongResource",
    "BlockMismatch",
    "BadPadding",
    "TruncatedDocument",
    "TrailingData",
    "MiceIntegrityError",
    "HttpSignatureError",
]


class SineError(Exception):
    """Base class of every error raised by the :mod:`sine` package."""


class LocalProtocolError(SineError):
    """The local caller broke the API contract (not the peer's fault)."""


class RemoteProtocolError(SineError):
    """The received tag or document is not what the origin signed.

    ``block`` is the index of the first bad block (0 = the tag ``Y_0``).
    """

    def __init__(self, message: str, block: int) -> None:
        super().__init__(f"block {block}: {message}")
        self.block = block
        #: verifier events completed in the failing call before the error (all authentic)
        self.events: list[object] = []


class TagFormatError(RemoteProtocolError):
    """The tag bytes do not parse (bad magic, unknown algorithm, inconsistent lengths)."""


class SignatureInvalid(RemoteProtocolError):
    """The public-key signature over the tag does not verify."""


class UntrustedTag(RemoteProtocolError):
    """No trust anchor applies: no public key given and no trusted digest for this resource."""


class DigestMismatch(RemoteProtocolError):
    """SINEB/SINEX: the tag's AT_sign digest differs from the one obtained over a trusted path."""


class TagExpired(RemoteProtocolError):
    """``now`` is at or after the tag's expiry ``E`` (e.g. a replayed old tag)."""


class TagNotYetValid(RemoteProtocolError):
    """The tag's timestamp ``T`` lies further in the future than the allowed clock skew."""


class WrongResource(RemoteProtocolError):
    """The tag was signed for another path than the one requested (swapped documents)."""


class BlockMismatch(RemoteProtocolError):
    """``H(B_i || h_{i+1}) != h_i``: block ``i`` (or the next link of the chain) was altered."""


class BadPadding(RemoteProtocolError):
    """The padding of the last block is not all zero bytes."""


class TruncatedDocument(RemoteProtocolError):
    """The stream ended before the ``n`` signed blocks arrived; ``block`` is the first missing one."""


class TrailingData(RemoteProtocolError):
    """Bytes arrived after the last signed block."""


class MiceIntegrityError(RemoteProtocolError):
    """MICE (``mi-sha256-03``): the encoded body or its top proof fails; ``record`` (= ``block``)
    is the first bad record, 0 for the record-size header or the ``Digest`` value."""

    @property
    def record(self) -> int:
        return self.block


class HttpSignatureError(RemoteProtocolError):
    """An RFC 9421 signature, or a digest field it covers, is malformed or does not verify
    (``block`` 0: the signed head)."""
