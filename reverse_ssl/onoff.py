"""Online/offline signatures (Even, Goldreich and Micali; §3 of the paper).

The expensive RSA signature is moved to *before* the message exists::

    offline:  (sk, pk) <- one-time keygen;   W = RSA-Sign_SK(pk)        store (sk, pk, W)
    online:   w = OTS-Sign_sk(M)                                        signature = (w, pk, W)
    verify:   RSA-Verify_PK(pk, W)  and then  OTS-Verify_pk(M, w)

The server keeps a pool of offline tokens (:mod:`reverse_ssl.aio.pool`); a
handshake only pays the online step -- a few microseconds of look-ups.  When
the pool is empty the signer falls back to a plain RSA signature over M
(scheme ``RSA_FALLBACK``), which costs a full private-key operation; the
metrics of the pool count it.

W signs ``LABEL || scheme || SHA-256(pk)`` with RSA PKCS#1 v1.5 / SHA-256, so a
token of one scheme can never be replayed as a token of another.

Wire format (one block inside the server's KeyTransport message)::

    struct {
        uint8  scheme;                  /* OTSScheme */
        opaque public_key<0..2^24-1>;   /* empty for RSA_FALLBACK */
        opaque offline_sig<1..2^16-1>;  /* W, or the RSA signature itself */
        opaque one_time_sig<0..2^24-1>; /* w, empty for RSA_FALLBACK */
    } OnlineOfflineSignature;
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from . import ots
from .errors import BadOfflineSignature, ForgedOneTimeSignature
from .ots import OneTimeSigner, OTSScheme

__all__ = [
    "LABEL",
    "OfflineToken",
    "OnlineOfflineSignature",
    "make_offline_token",
    "sign_online",
    "sign_fallback",
    "verify",
    "pull_online_offline_signature",
    "push_online_offline_signature",
]

LABEL = b"reverse-ssl one-time public key\x00"


def _pk_message(scheme: OTSScheme, public_key: bytes) -> bytes:
    return LABEL + bytes([scheme]) + hashlib.sha256(public_key).digest()


@dataclass(eq=False)
class OfflineToken:
    """The stored triple (sk, pk, W) of the offline phase."""

    signer: OneTimeSigner
    offline_signature: bytes

    @property
    def scheme(self) -> OTSScheme:
        return self.signer.scheme

    @property
    def public_key(self) -> bytes:
        return self.signer.public_key


@dataclass(frozen=True)
class OnlineOfflineSignature:
    """The triple (w, pk, W) that travels to the verifier."""

    scheme: OTSScheme
    public_key: bytes
    offline_signature: bytes
    one_time_signature: bytes


def make_offline_token(
    private_key: rsa.RSAPrivateKey, rng: Callable[[int], bytes], scheme: OTSScheme = OTSScheme.LAMPORT
) -> OfflineToken:
    """Offline phase: a one-time key and the RSA signature W over it (one private-key operation)."""
    signer = ots.keygen(scheme, rng)
    w = private_key.sign(_pk_message(scheme, signer.public_key), padding.PKCS1v15(), hashes.SHA256())
    return OfflineToken(signer, w)


def sign_online(token: OfflineToken, message: bytes) -> OnlineOfflineSignature:
    """Online phase: the one-time signature of ``message`` (the token becomes used)."""
    sig = token.signer.sign(message)
    return OnlineOfflineSignature(token.scheme, token.public_key, token.offline_signature, sig)


def sign_fallback(private_key: rsa.RSAPrivateKey, message: bytes) -> OnlineOfflineSignature:
    """No token ready: a plain RSA signature over ``message`` (a full private-key operation)."""
    sig = private_key.sign(message, padding.PKCS1v15(), hashes.SHA256())
    return OnlineOfflineSignature(OTSScheme.RSA_FALLBACK, b"", sig, b"")


def verify(public_key: rsa.RSAPublicKey, message: bytes, sig: OnlineOfflineSignature) -> None:
    """Check W, then the one-time signature; raise the typed error naming what failed."""
    if sig.scheme is OTSScheme.RSA_FALLBACK:
        try:
            public_key.verify(sig.offline_signature, message, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise BadOfflineSignature("RSA signature over the transcript does not verify") from None
        return
    try:
        public_key.verify(
            sig.offline_signature, _pk_message(sig.scheme, sig.public_key), padding.PKCS1v15(), hashes.SHA256()
        )
    except InvalidSignature:
        raise BadOfflineSignature("W does not verify: the one-time key is not signed by the server") from None
    if not ots.verify(sig.scheme, sig.public_key, message, sig.one_time_signature):
        raise ForgedOneTimeSignature("the one-time signature over the transcript does not verify")


def pull_online_offline_signature(buf: Buffer) -> OnlineOfflineSignature:
    """Read one signature block (the caller checks for trailing bytes after its message)."""
    raw_scheme = buf.pull_uint8()
    try:
        scheme = OTSScheme(raw_scheme)
    except ValueError:
        raise DecodeError(f"unknown one-time signature scheme {raw_scheme}") from None
    public_key = buf.pull_vector(3)
    offline = buf.pull_vector(2, 1)
    one_time = buf.pull_vector(3)
    if scheme is OTSScheme.RSA_FALLBACK:
        if public_key or one_time:
            raise DecodeError("RSA fallback signature carries a one-time key")
    elif len(public_key) != ots.public_key_size(scheme) or len(one_time) != ots.signature_size(scheme):
        raise DecodeError(f"wrong one-time key or signature length for {scheme.name}")
    return OnlineOfflineSignature(scheme, public_key, offline, one_time)


def push_online_offline_signature(w: Writer, sig: OnlineOfflineSignature) -> None:
    w.push_uint8(sig.scheme)
    w.push_vector(3, sig.public_key)
    w.push_vector(2, sig.offline_signature)
    w.push_vector(3, sig.one_time_signature)
