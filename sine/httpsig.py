"""The signed head as an RFC 9421 HTTP Message Signature over RFC 9530 ``Content-Digest`` (sans-IO).

A SINE origin can sign the *head* of a response instead of a SINE tag: the signature covers
``@status``, ``Content-Type`` and ``Content-Digest`` (``sha-256=:<base64>:``, computed over the
content as sent, RFC 9530 §2), and for a MICE-encoded body also ``Content-Encoding``, the
``Digest: mi-sha256-03=...`` field that carries the top proof (so :class:`~sine.mice.MiceDecoder`
can release each record as it arrives, which ``Content-Digest`` alone cannot) and
``Unencoded-Digest``, the digest of the content before the coding.  ``Unencoded-Digest`` is not
in RFC 9530: it comes from draft-ietf-httpbis-unencoded-digest, with the same Dictionary syntax
and algorithms as ``Content-Digest``; the library has no notion of it, so it is produced and
checked here with the library's Content-Digest codec and covered as an ordinary field.

The signature base, the ``Signature-Input`` / ``Signature`` fields and the cryptography come from
the maintained ``http-message-signatures`` package (which uses ``http-sf`` for Structured
Fields).  Algorithms by SINE key type:

=================================  ==========================================================
SINE key (:mod:`sine.algorithms`)  RFC 9421 algorithm
=================================  ==========================================================
Ed25519                            ``ed25519`` (deterministic)
ECDSA P-256                        ``ecdsa-p256-sha256`` (``r || s``, 64 bytes)
RSA (SINE signs RSA-PSS-SHA256)    ``rsa-pss-sha512``: RFC 9421 §3.3.1 defines PSS only with
                                   SHA-512 (salt 64); the same RSA key, other parameters
``bytes`` (shared secret)          ``hmac-sha256`` (for the RFC's test vectors; not a SINE key)
=================================  ==========================================================

Nothing here reads a clock: ``now`` (seconds since the epoch) is passed in, for ``created`` when
signing and for the ``created`` / ``expires`` / ``max_age`` checks when verifying (the library's
own checks call ``datetime.now()``; :class:`_ClockVerifier` replaces them).  Every failure --
malformed fields, a bad signature, a component not covered, a digest that does not match --
raises :class:`~sine.errors.HttpSignatureError` (block 0, the head).
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import http_message_signatures as hms
from http_message_signatures import algorithms as hms_alg
from http_message_signatures.exceptions import HTTPMessageSignaturesException

from .algorithms import SigAlg, SigningKey, VerifyingKey
from .errors import HttpSignatureError, MiceIntegrityError
from .mice import CONTENT_CODING, RECORD_SIZES, MiceDecoder, pull_digest

__all__ = [
    "RESPONSE_COVERED",
    "MICE_COVERED",
    "PATH_COMPONENT",
    "Fields",
    "SignedHead",
    "key_id_for",
    "content_digest",
    "check_content_digest",
    "sign_response",
    "verify_response",
    "verify_request",
    "open_mice_response",
]

#: components signed for a plain response
RESPONSE_COVERED = ("@status", "content-type", "content-digest")
#: components signed for a MICE-encoded response
MICE_COVERED = (*RESPONSE_COVERED, "content-encoding", "digest", "unencoded-digest")
#: the request path, as a response signature covers it (RFC 9421 §2.4: a ``req`` component)
PATH_COMPONENT = '"@path";req'
#: the authority of the synthetic request a path-bound signature is computed with; ``@path``
#: reads only the path, so the name of the host never reaches the signature base
_NO_HOST = "http://sine.invalid"
_SKEW = 5  # seconds of clock skew tolerated for created / expires, as the library's default

_LIBRARY_ERRORS = (HTTPMessageSignaturesException, ValueError, TypeError, KeyError,
                   IndexError, OverflowError, AttributeError)


@dataclass
class Fields:
    """An ordered list of header field lines with the mapping interface the library needs
    (``items()`` keeps repeated lines; assignment replaces every line of that name)."""

    lines: list[tuple[str, str]] = field(default_factory=list)

    def items(self) -> Iterable[tuple[str, str]]:
        return list(self.lines)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(name for name, _ in self.lines))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(n.lower() == name.lower() for n, _ in self.lines)

    def __setitem__(self, name: str, value: str) -> None:
        del self[name]
        self.lines.append((name, value))

    def __delitem__(self, name: str) -> None:
        self.lines = [(n, v) for n, v in self.lines if n.lower() != name.lower()]

    def get(self, name: str) -> str | None:
        """All lines of ``name`` joined with ``", "``, or ``None``."""
        values = [v for n, v in self.lines if n.lower() == name.lower()]
        return ", ".join(values) if values else None


@dataclass
class _Request:
    method: str
    url: str
    headers: Fields


@dataclass
class _Response:
    status_code: int
    headers: Fields
    request: _Request | None = None


def _response(status: int, headers: Fields, request_path: str | None) -> _Response:
    """A response, with the request it answers when a ``req`` component needs its path."""
    if request_path is None:
        return _Response(status, headers)
    if not request_path.startswith("/"):
        raise ValueError("request_path must start with '/'")
    url = _NO_HOST + quote(request_path, safe="/")
    return _Response(status, headers, _Request("GET", url, Fields()))


@dataclass(frozen=True)
class SignedHead:
    """A verified signature: its label, signed parameters and the covered component values."""

    label: str
    key_id: str
    algorithm: str
    created: int | None
    covered: dict[str, str]
    expires: int | None = None

    def covers(self, component: str) -> bool:
        """Whether the plain component ``component`` (e.g. ``digest``) is covered; a
        parameterised one is looked up by its serialisation (``PATH_COMPONENT``)."""
        return f'"{component}"' in self.covered or component in self.covered


def key_id_for(key: VerifyingKey) -> str:
    """The ``keyid`` a SINE origin signs with: ``sine-`` and the first 16 hex digits of
    SHA-256 over the key's SubjectPublicKeyInfo, so a client that pins the public key knows
    the id without being told."""
    from cryptography.hazmat.primitives import serialization

    spki = key.public_key.public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sine-" + hashlib.sha256(spki).hexdigest()[:16]


def _algorithm(key: SigningKey | VerifyingKey | bytes) -> type[hms.HTTPSignatureAlgorithm]:
    if isinstance(key, bytes):
        return hms_alg.HMAC_SHA256
    return {SigAlg.ED25519: hms_alg.ED25519, SigAlg.ECDSA_P256_SHA256: hms_alg.ECDSA_P256_SHA256,
            SigAlg.RSA_PSS_SHA256: hms_alg.RSA_PSS_SHA512}[key.alg]


def content_digest(content: bytes) -> str:
    """``sha-256=:<base64 of SHA-256(content)>:`` (RFC 9530 §2, a Structured Dictionary)."""
    return str(hms.ContentDigest.create(bytes(content)))


def check_content_digest(value: str, content: bytes, name: str = "Content-Digest") -> None:
    """Check a ``Content-Digest`` (or ``Unencoded-Digest``) value against ``content``."""
    try:
        hms.ContentDigest.verify(value, bytes(content))
    except _LIBRARY_ERRORS as exc:
        raise HttpSignatureError(f"{name}: {exc}", 0) from None


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(int(seconds), tz=datetime.UTC)


class _KeyResolver(hms.HTTPSignatureKeyResolver):
    def __init__(self, key_id: str, private: Any = None, public: Any = None) -> None:
        self.key_id, self.private, self.public = key_id, private, public

    def resolve_private_key(self, key_id: str) -> Any:
        if key_id != self.key_id:
            raise KeyError(key_id)
        return self.private

    def resolve_public_key(self, key_id: str) -> Any:
        return self.public if key_id == self.key_id else None


def sign_response(
    status: int,
    fields: Sequence[tuple[str, str]],
    content: bytes,
    key: SigningKey | bytes,
    *,
    key_id: str,
    now: float,
    label: str = "sine",
    expires: float | None = None,
    covered: Sequence[str] | None = None,
    unencoded: bytes | None = None,
    request_path: str | None = None,
) -> list[tuple[str, str]]:
    """``fields`` plus ``Content-Digest`` (over ``content``, the bytes as sent),
    ``Unencoded-Digest`` (over ``unencoded``, when given) and ``Signature-Input`` /
    ``Signature``.  ``covered`` defaults to :data:`MICE_COVERED` when ``unencoded`` is given,
    else :data:`RESPONSE_COVERED`; a covered field missing from ``fields`` is a
    :class:`ValueError`.  ``request_path`` is the path of the request the response answers,
    needed when ``covered`` holds :data:`PATH_COMPONENT` (it binds the signature to the path,
    as SINE's tag does: a cache cannot answer ``/a`` with ``/b``'s signed response)."""
    headers = Fields(list(fields))
    if unencoded is not None:
        headers["Unencoded-Digest"] = content_digest(unencoded)
    if covered is None:
        covered = MICE_COVERED if unencoded is not None else RESPONSE_COVERED
    private = key if isinstance(key, bytes) else key.private_key
    signer = hms.HTTPMessageSigner(signature_algorithm=_algorithm(key),
                                   key_resolver=_KeyResolver(key_id, private=private))
    try:
        signer.sign(_response(status, headers, request_path), key_id=key_id, created=_utc(now),
                    expires=None if expires is None else _utc(expires), label=label,
                    covered_component_ids=tuple(covered), body=bytes(content))
    except HTTPMessageSignaturesException as exc:
        raise ValueError(f"cannot sign: {exc}") from None
    return headers.lines


class _ClockVerifier(hms.HTTPMessageVerifier):
    """The library's verifier with ``now`` passed in instead of read from the clock."""

    def __init__(self, now: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now = int(now)

    def validate_created_and_expires(self, sig_input: Any, max_age: Any = None) -> None:
        params = sig_input.params
        for name in ("created", "expires"):
            if name in params and type(params[name]) is not int:
                raise hms.InvalidSignature(f"{name} is not an integer")
        created, expires = params.get("created"), params.get("expires")
        if created is None:
            raise hms.InvalidSignature("no created parameter")
        if created > self.now + _SKEW:
            raise hms.InvalidSignature("created lies in the future")
        if expires is not None and expires < self.now - _SKEW:
            raise hms.InvalidSignature("signature expired")
        if max_age is not None and created + max_age.total_seconds() < self.now - _SKEW:
            raise hms.InvalidSignature("signature too old")


def _verify(
    message: _Request | _Response,
    key: VerifyingKey | bytes,
    key_id: str,
    now: float,
    content: bytes | None,
    require: Sequence[str],
    max_age: float | None,
) -> SignedHead:
    public = key if isinstance(key, bytes) else key.public_key
    if not isinstance(key, bytes):
        key.verifications += 1  # the count a VerifyingKey keeps (Table II), as its verify()
    verifier = _ClockVerifier(now, signature_algorithm=_algorithm(key),
                              key_resolver=_KeyResolver(key_id, public=public))
    age = None if max_age is None else datetime.timedelta(seconds=max_age)
    try:
        results = verifier.verify(message, max_age=age, require_components=tuple(require),
                                  body=None if content is None else bytes(content))
    except _LIBRARY_ERRORS as exc:
        raise HttpSignatureError(f"signature: {exc}", 0) from None
    result = results[0]  # the library refuses several signatures unless a tag selects one
    created = result.parameters.get("created")
    expires = result.parameters.get("expires")
    return SignedHead(result.label, str(result.parameters.get("keyid")),
                      result.algorithm.algorithm_id,
                      created if isinstance(created, int) else None,
                      dict(result.covered_components),
                      expires if isinstance(expires, int) else None)


def verify_response(
    status: int,
    fields: Sequence[tuple[str, str]],
    content: bytes | None,
    key: VerifyingKey | bytes,
    *,
    key_id: str,
    now: float,
    require: Sequence[str] = RESPONSE_COVERED,
    max_age: float | None = 86400.0,
    request_path: str | None = None,
) -> SignedHead:
    """Verify the one signature of a response.  With ``content`` the signed ``Content-Digest``
    must match it; with ``content=None`` only the head is checked (the caller then checks the
    body, e.g. through the signed MICE top proof).  ``request_path`` is the path the client
    asked for (what a covered :data:`PATH_COMPONENT` is checked against)."""
    try:
        message = _response(status, Fields(list(fields)), request_path)
    except ValueError as exc:
        raise HttpSignatureError(str(exc), 0) from None
    return _verify(message, key, key_id, now, content, require, max_age)


def verify_request(
    method: str,
    url: str,
    fields: Sequence[tuple[str, str]],
    key: VerifyingKey | bytes,
    *,
    key_id: str,
    now: float,
    require: Sequence[str] = (),
    max_age: float | None = None,
) -> SignedHead:
    """Verify the one signature of a request (used for the RFC 9421 Appendix B vectors)."""
    return _verify(_Request(method, url, Fields(list(fields))), key, key_id, now, None,
                   require, max_age)


def open_mice_response(
    status: int,
    fields: Sequence[tuple[str, str]],
    key: VerifyingKey,
    *,
    key_id: str,
    now: float,
    record_sizes: range = RECORD_SIZES,
    max_age: float | None = 86400.0,
    path: str | None = None,
) -> tuple[SignedHead, MiceDecoder]:
    """Verify the head of a MICE response (it must cover :data:`MICE_COVERED`) and return a
    decoder anchored at the *signed* top proof.  After the body, check ``Content-Digest``
    and ``Unencoded-Digest`` with :func:`check_content_digest` if wanted.

    With ``path`` (what a SINE client passes) the signature must also cover
    :data:`PATH_COMPONENT` for that path and carry an ``expires`` parameter (the document's
    ``E``: without it an old signed response would verify for ever); ``max_age`` may then be
    ``None``."""
    require = MICE_COVERED if path is None else (*MICE_COVERED, PATH_COMPONENT)
    head = verify_response(status, fields, None, key, key_id=key_id, now=now,
                           require=require, max_age=max_age, request_path=path)
    if path is not None and head.expires is None:
        raise HttpSignatureError("signature has no expires parameter", 0)
    coding = head.covered['"content-encoding"'].strip().lower()
    if coding != CONTENT_CODING:
        raise HttpSignatureError(f"Content-Encoding is {coding!r}, not {CONTENT_CODING}", 0)
    try:
        top = pull_digest(head.covered['"digest"'])
    except MiceIntegrityError as exc:
        raise HttpSignatureError(f"Digest: {exc}", 0) from None
    return head, MiceDecoder(top, record_sizes=record_sizes)
