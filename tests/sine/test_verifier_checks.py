"""The SINE stream verifier's checks at their boundaries, and the blame each refusal carries.

Written to kill the mutants ``make mutation`` (group ``sine``) found alive: the clock-skew
bound, the tag parser's early refusals and its waiting for more bytes, the padding check, the
block numbers a truncation or trailing bytes are blamed on inside the Forward-Authenticator
chain, a signer's malformed Forward Authenticator, the events' contents and the counters, and
the message of every refusal.  Documents are signed with real keys; the "bad signer" cases
build a tag by hand over bytes :func:`sine.tag.sign_document` would never produce (a non-zero
pad, a malformed Forward Authenticator) -- exactly what a verifier must not trust.
"""

from __future__ import annotations

import struct

import pytest

from sine.algorithms import HashAlg, SigningKey
from sine.errors import (
    BadPadding,
    BlockMismatch,
    DigestMismatch,
    LocalProtocolError,
    RemoteProtocolError,
    SignatureInvalid,
    TagExpired,
    TagFormatError,
    TagNotYetValid,
    TrailingData,
    TruncatedDocument,
    WrongResource,
)
from sine.format import (
    MAX_SIGNATURE,
    MAX_TAG_INFO,
    ForwardAuthenticator,
    SeparateTag,
    Tag,
    TagInfo,
    push_separate_tag,
    push_tag,
    push_tag_info,
)
from sine.tag import SignedDocument, encode_stream, hash_chain, sign_document
from sine.verifier import (
    BlockVerified,
    DocumentVerified,
    ForwardAuthenticatorVerified,
    StreamVerifier,
    TagVerified,
)
from tests.sine.chain_backends import chain_backend  # noqa: F401  (autouse: C and Python)

NOW = 1_700_000_000.0
DOC = bytes(range(256)) * 21 + b"tail"  # 5380 bytes: 6 blocks of 1 KiB
FA = ForwardAuthenticator(tuple((f"/page{i:02d}", bytes([i]) * 32) for i in range(12)))


def feed(v: StreamVerifier, body: bytes, step: int = 700) -> tuple[bytes, list[object]]:
    out, events = bytearray(), []
    for i in range(0, len(body), step):
        for e in v.receive_data(body[i : i + step]):
            events.append(e)
            if isinstance(e, BlockVerified):
                out += e.data
    events += v.receive_eof()
    return bytes(out), events


def refusal(v: StreamVerifier, body: bytes, step: int = 700) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        feed(v, body, step)
    return info.value


def _expect(err: RemoteProtocolError, cls: type, block: int, message: str) -> None:
    assert type(err) is cls, (type(err), err)
    assert err.block == block
    assert str(err) == f"block {block}: {message}"


def _signed_by_hand(key: SigningKey, doc_bytes: bytes, content_length: int, fa_bytes: bytes,
                    bs: int = 64, path: str = "/d") -> tuple[SignedDocument, bytes]:
    """A tag and stream body over the given bytes, without sign_document's checks.

    ``doc_bytes`` longer than ``content_length`` puts its extra bytes in the last block's pad.
    """
    alg = HashAlg.SHA256
    chain = hash_chain(doc_bytes, bs, alg)
    fa_chain = hash_chain(fa_bytes, bs, alg) if fa_bytes else [bytes(32)]
    info = TagInfo(hash_alg=alg, sig_alg=key.alg, block_size=bs, timestamp=int(NOW),
                   expires=int(NOW) + 3600, content_length=content_length, path=path,
                   content_root=chain[0], fa_length=len(fa_bytes), fa_root=fa_chain[0])
    signed = SignedDocument(Tag(info, key.sign(info.signed_message())), tuple(chain[1:-1]),
                            fa_bytes, tuple(fa_chain[1:-1]))

    def records(data: bytes, links: tuple[bytes, ...]) -> bytes:
        blocks = [data[i : i + bs] for i in range(0, len(data), bs)]
        out = b"".join(b + h for b, h in zip(blocks[:-1], links, strict=True))
        return out + blocks[-1].ljust(bs, b"\0") if blocks else out

    body = push_tag(signed.tag) + records(doc_bytes, signed.links) + records(fa_bytes, signed.fa_links)
    return signed, body


# --- time -------------------------------------------------------------------------------------------


def test_clock_skew_of_300_seconds_is_inclusive(ed_key: SigningKey) -> None:
    """A tag stamped up to 300 s in the verifier's future is accepted, 301 s is not."""
    pk = ed_key.verifying_key()
    ok = sign_document(DOC, "/d", ed_key, NOW + 300)
    data, _ = feed(StreamVerifier("/d", NOW, public_key=pk), b"".join(encode_stream(DOC, ok)))
    assert data == DOC
    early = sign_document(DOC, "/d", ed_key, NOW + 301)
    err = refusal(StreamVerifier("/d", NOW, public_key=pk), b"".join(encode_stream(DOC, early)))
    _expect(err, TagNotYetValid, 0, f"timestamp {int(NOW) + 301} is in the future")


def test_expiry_and_resource_messages(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW, lifetime=100)
    body = b"".join(encode_stream(DOC, signed))
    pk = ed_key.verifying_key()
    err = refusal(StreamVerifier("/d", NOW + 100, public_key=pk), body)
    _expect(err, TagExpired, 0, f"expired at {int(NOW) + 100}, now {NOW + 100:.0f}")
    err = refusal(StreamVerifier("/other", NOW, public_key=pk), body)
    _expect(err, WrongResource, 0, "tag is for '/d', not '/other'")


# --- trust anchors and the events they report ------------------------------------------------------


def test_trust_anchor_refusals_name_their_reason(ed_key: SigningKey, ec_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = b"".join(encode_stream(DOC, signed))
    with pytest.raises(LocalProtocolError, match="^need a public key or a trusted digest$"):
        StreamVerifier("/d", NOW)
    _expect(refusal(StreamVerifier("/d", NOW, trusted_digest=bytes(32)), body),
            DigestMismatch, 0, "AT_sign differs from the trusted digest")
    _expect(refusal(StreamVerifier("/d", NOW, public_key=ec_key.verifying_key()), body),
            SignatureInvalid, 0, "signature algorithm differs from the key's")
    other = SigningKey.generate(ed_key.alg).verifying_key()
    _expect(refusal(StreamVerifier("/d", NOW, public_key=other), body),
            SignatureInvalid, 0, "bad signature")


@pytest.mark.parametrize("anchor", ["signature", "digest"])
def test_events_carry_the_tag_and_the_document(anchor: str, ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = b"".join(encode_stream(DOC, signed))
    digest = signed.info.at_sign()
    kw = {"public_key": ed_key.verifying_key()} if anchor == "signature" else {"trusted_digest": digest}
    v = StreamVerifier("/d", NOW, **kw)  # type: ignore[arg-type]
    data, events = feed(v, body)
    first, last = events[0], events[-1]
    assert isinstance(first, TagVerified) and isinstance(last, DocumentVerified)
    assert (first.info, first.method, first.at_sign) == (signed.info, anchor, digest)
    assert last.info == signed.info
    assert data == DOC
    assert (v.blocks_verified, v.released_bytes) == (6, len(DOC))
    # Only a signature makes the Forward Authenticator trustworthy (a digest does not cover it).
    assert v.fa_trusted is (anchor == "signature")


def test_a_closed_verifier_says_so(ed_key: SigningKey) -> None:
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    with pytest.raises(TagFormatError):
        v.receive_data(struct.pack("!I", MAX_TAG_INFO + 1))
    for call in (lambda: v.receive_data(b"more"), v.receive_eof):
        with pytest.raises(LocalProtocolError, match="^verifier is closed after an error$"):
            call()


# --- the tag parser -----------------------------------------------------------------------------------------


def test_tag_parser_refuses_early_and_otherwise_waits(ed_key: SigningKey) -> None:
    """An oversized info length is refused from its 4 bytes alone; the largest allowed one
    makes the verifier wait; a signature length is checked as soon as its 2 bytes are in."""
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    with pytest.raises(TagFormatError) as info:
        v.receive_data(struct.pack("!I", MAX_TAG_INFO + 1))
    _expect(info.value, TagFormatError, 0, "tag info too long")
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    assert v.receive_data(struct.pack("!I", MAX_TAG_INFO)) == []
    assert v.buffered == 4
    info_bytes = push_tag_info(sign_document(DOC, "/d", ed_key, NOW).info)
    for sig_len in (0, MAX_SIGNATURE + 1, 0xFFFF):
        v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
        with pytest.raises(TagFormatError) as info:
            v.receive_data(struct.pack("!I", len(info_bytes)) + info_bytes + struct.pack("!H", sig_len))
        _expect(info.value, TagFormatError, 0, "signature length out of range")


@pytest.mark.parametrize("sig_len", [1, MAX_SIGNATURE])
def test_signature_lengths_at_the_bounds_parse(sig_len: int, ed_key: SigningKey) -> None:
    """1 and MAX_SIGNATURE bytes are well-formed lengths: the tag parses and the signature
    then fails to verify (bad signature, not a format error)."""
    signed = sign_document(DOC, "/d", ed_key, NOW)
    tag = Tag(signed.info, bytes(sig_len))
    body = push_tag(tag) + b"".join(encode_stream(DOC, signed))[len(push_tag(signed.tag)) :]
    err = refusal(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), body)
    _expect(err, SignatureInvalid, 0, "bad signature")


def test_one_byte_at_a_time(ed_key: SigningKey) -> None:
    """The parser must wait, not guess, whenever a length or the tag is incomplete."""
    signed = sign_document(DOC[:700], "/d", ed_key, NOW, block_size=128)
    body = b"".join(encode_stream(DOC[:700], signed))
    data, events = feed(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), body, 1)
    assert data == DOC[:700] and isinstance(events[-1], DocumentVerified)


# --- blocks, padding and the Forward-Authenticator chain ----------------------------------------------------


def test_hash_chain_and_padding_messages(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = bytearray(b"".join(encode_stream(DOC, signed)))
    body[len(push_tag(signed.tag)) + 1024 + 32 + 5] ^= 1  # block 2
    _expect(refusal(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), bytes(body)),
            BlockMismatch, 2, "hash chain broken")
    # A signer that hashed a non-zero byte into the last block's padding: the chain holds,
    # the padding check does not.
    doc = DOC[:100]
    _, bad = _signed_by_hand(ed_key, doc + b"\x01", len(doc), b"")
    err = refusal(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), bad)
    _expect(err, BadPadding, 2, "non-zero padding")
    _, good = _signed_by_hand(ed_key, doc, len(doc), b"")
    assert feed(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), good)[0] == doc


def _fa_document(ed_key: SigningKey) -> tuple[SignedDocument, bytes]:
    signed = sign_document(DOC, "/d", ed_key, NOW, forward_authenticator=FA, block_size=64)
    assert signed.info.fa_block_count >= 3
    return signed, b"".join(encode_stream(DOC, signed))


def test_truncation_and_trailing_bytes_are_blamed_on_the_right_block(ed_key: SigningKey) -> None:
    """Blocks are numbered 1..n for the content and n+1..n+m for the Forward Authenticator."""
    signed, body = _fa_document(ed_key)
    n, m = signed.info.block_count, signed.info.fa_block_count
    fa_start = len(body) - (m - 1) * (64 + 32) - 64  # the first FA record
    cut = fa_start + (64 + 32) + 10  # one FA record and a bit of the next
    err = refusal(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), body[:cut])
    _expect(err, TruncatedDocument, n + 2, "stream ended early")
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    feed(v, body)
    with pytest.raises(TrailingData) as info:  # in a later call...
        v.receive_data(b"!")
    _expect(info.value, TrailingData, n + m + 1, "bytes after the last block")
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    with pytest.raises(TrailingData) as info:  # ...or in the call that completes the document
        v.receive_data(body + b"!")
    _expect(info.value, TrailingData, n + m + 1, "bytes after the last block")


def test_a_signers_malformed_forward_authenticator_is_refused_at_its_first_block(
    ed_key: SigningKey,
) -> None:
    doc = DOC[:300]
    fa_bytes = struct.pack("!I", 1) + b"\x00\x02/a" + b"\x20" + bytes(32) + b"junk"  # trailing
    signed, body = _signed_by_hand(ed_key, doc, len(doc), fa_bytes)
    n = signed.info.block_count
    err = refusal(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), body)
    _expect(err, TagFormatError, n + 1, "trailing bytes after the forward authenticator")
    good = struct.pack("!I", 1) + b"\x00\x02/a" + b"\x20" + bytes(32)
    _, body = _signed_by_hand(ed_key, doc, len(doc), good)
    _, events = feed(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()), body)
    fas = [e for e in events if isinstance(e, ForwardAuthenticatorVerified)]
    assert fas[0].forward_authenticator == ForwardAuthenticator((("/a", bytes(32)),))


def test_separate_tag_with_a_tampered_forward_authenticator(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW, forward_authenticator=FA, block_size=64)
    at = signed.separate_tag()
    fa = bytearray(at.forward_authenticator)
    fa[-1] ^= 1
    bad = push_separate_tag(SeparateTag(at.tag, at.links, bytes(fa)))
    with pytest.raises(BlockMismatch) as info:
        StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), separate=bad)
    _expect(info.value, BlockMismatch, signed.info.block_count + 1, "forward authenticator")
    for separate in (push_separate_tag(at), at):  # the bytes, or the parsed tag itself
        v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), separate=separate)
        data, events = feed(v, DOC)
        assert data == DOC
        fas = [e.forward_authenticator for e in events if isinstance(e, ForwardAuthenticatorVerified)]
        assert fas == [FA]
