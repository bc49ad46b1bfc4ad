"""Building authentication tags: the Gennaro-Rohatgi backwards hash chain, signed.

Given a document ``D`` cut into ``n`` blocks ``B_1..B_n`` of ``block_size`` bytes (the last
one padded with zero bytes; the signed content length says where the document ends), the
signer walks *backwards*::

    h_{n+1} = 0^{hlen}                     (the terminator: hlen zero bytes)
    h_i     = H(B_i || h_{i+1})            for i = n, ..., 1
    Y_0     = Sign(label || TagInfo(h_1, n, T, E, path, ...))

The client receives ``Y_0`` first, verifies it with one public-key operation, and then each
record ``Y_i = B_i || h_{i+1}`` with one hash: ``H(Y_i)`` must equal the ``h_i`` it already
trusts, and ``Y_i`` hands it the next trusted value ``h_{i+1}``.  SINEX appends a Forward
Authenticator, hashed into a second chain (root ``f_1``) so that :meth:`TagInfo.at_sign`
can leave it out.

Everything here is pure: bytes and ``now`` in, bytes out.  :func:`sign_document` is the whole
signer; :func:`encode_stream` produces the ``Content-Encoding: sine`` body.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .algorithms import HashAlg, SigningKey, digest_size, hash_new
from .format import (
    ForwardAuthenticator,
    SeparateTag,
    Tag,
    TagInfo,
    block_count,
    push_forward_authenticator,
    push_tag,
)

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_LIFETIME",
    "SignedDocument",
    "hash_chain",
    "sign_document",
    "encode_stream",
    "stream_length",
]

DEFAULT_BLOCK_SIZE = 1024
DEFAULT_LIFETIME = 24 * 3600


def hash_chain(data: bytes, block_size: int, hash_alg: HashAlg) -> list[bytes]:
    """``[h_1, ..., h_n, h_{n+1}]`` for ``data``; ``h_{n+1}`` is the zero terminator.

    An empty ``data`` gives ``[terminator]``: ``n = 0`` and the root is the terminator.
    """
    n = block_count(len(data), block_size)
    hlen = digest_size(hash_alg)
    chain = [b""] * (n + 1)
    chain[n] = bytes(hlen)
    view = memoryview(data)
    if n:
        last = bytes(view[(n - 1) * block_size :]).ljust(block_size, b"\x00")
        chain[n - 1] = hash_new(hash_alg, last + chain[n]).digest()
    for i in range(n - 2, -1, -1):
        h = hash_new(hash_alg, view[i * block_size : (i + 1) * block_size])
        h.update(chain[i + 1])
        chain[i] = h.digest()
    return chain


@dataclass(frozen=True)
class SignedDocument:
    """The signer's output for one document: the tag and both chains' links.

    ``links`` are ``h_2..h_n``; ``fa_links`` are ``f_2..f_m``.  The document bytes are not
    kept: the server reads them from disk and checks their length against the tag.
    """

    tag: Tag
    links: tuple[bytes, ...]
    forward_authenticator: bytes = b""
    fa_links: tuple[bytes, ...] = ()

    @property
    def info(self) -> TagInfo:
        return self.tag.info

    def separate_tag(self) -> SeparateTag:
        return SeparateTag(self.tag, self.links, self.forward_authenticator)


def sign_document(
    document: bytes,
    path: str,
    key: SigningKey,
    now: float,
    *,
    lifetime: int = DEFAULT_LIFETIME,
    block_size: int = DEFAULT_BLOCK_SIZE,
    hash_alg: HashAlg = HashAlg.SHA256,
    forward_authenticator: ForwardAuthenticator | None = None,
) -> SignedDocument:
    """Sign ``document`` served at ``path``; ``T = floor(now)``, ``E = T + lifetime``."""
    if lifetime <= 0:
        raise ValueError("lifetime must be positive")
    chain = hash_chain(document, block_size, hash_alg)
    fa_bytes = b""
    fa_chain = [bytes(digest_size(hash_alg))]
    if forward_authenticator is not None and forward_authenticator.entries:
        fa_bytes = push_forward_authenticator(forward_authenticator)
        fa_chain = hash_chain(fa_bytes, block_size, hash_alg)
    timestamp = int(now)
    info = TagInfo(
        hash_alg=HashAlg(hash_alg),
        sig_alg=key.alg,
        block_size=block_size,
        timestamp=timestamp,
        expires=timestamp + lifetime,
        content_length=len(document),
        path=path,
        content_root=chain[0],
        fa_length=len(fa_bytes),
        fa_root=fa_chain[0],
    )
    tag = Tag(info, key.sign(info.signed_message()))
    return SignedDocument(tag, tuple(chain[1:-1]), fa_bytes, tuple(fa_chain[1:-1]))


def stream_length(signed: SignedDocument) -> int:
    """Length in bytes of :func:`encode_stream`'s output (the ``Content-Length``)."""
    info = signed.info
    n, m, hlen, bs = info.block_count, info.fa_block_count, info.digest_size, info.block_size
    records = n * bs + max(n - 1, 0) * hlen + m * bs + max(m - 1, 0) * hlen
    return len(push_tag(signed.tag)) + records


def encode_stream(
    document: bytes, signed: SignedDocument, records_per_chunk: int = 64
) -> Iterator[bytes]:
    """The ``Content-Encoding: sine`` body, in chunks of ``records_per_chunk`` records.

    ``Y_0 | B_1 h_2 | B_2 h_3 | ... | B_n | X_1 f_2 | ... | X_m``: the last record of each
    chain carries no link (the terminator is implicit) and its block is zero-padded.
    """
    info = signed.info
    if len(document) != info.content_length:
        raise ValueError("document length differs from the signed content length")
    yield push_tag(signed.tag)
    yield from _records(document, signed.links, info.block_size, records_per_chunk)
    yield from _records(signed.forward_authenticator, signed.fa_links, info.block_size,
                        records_per_chunk)


def _records(data: bytes, links: tuple[bytes, ...], bs: int, per_chunk: int) -> Iterator[bytes]:
    n = block_count(len(data), bs)
    view = memoryview(data)
    out = bytearray()
    for i in range(n):
        block = view[i * bs : (i + 1) * bs]
        out += block
        if i < n - 1:
            out += links[i]
        else:
            out += bytes(bs - len(block))
        if (i + 1) % per_chunk == 0:
            yield bytes(out)
            out.clear()
    if out:
        yield bytes(out)
