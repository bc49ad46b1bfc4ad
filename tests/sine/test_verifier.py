"""The signer and the streaming verifier: correctness, tampering, fuzzing, bounds."""

from __future__ import annotations

import ast
import hashlib
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sine
from sine.algorithms import HashAlg, SigningKey
from sine.errors import (
    BlockMismatch,
    DigestMismatch,
    LocalProtocolError,
    RemoteProtocolError,
    SignatureInvalid,
    TagExpired,
    TagNotYetValid,
    TrailingData,
    TruncatedDocument,
    WrongResource,
)
from sine.format import ForwardAuthenticator, push_separate_tag, push_tag
from sine.tag import encode_stream, sign_document, stream_length
from sine.verifier import (
    BlockVerified,
    DocumentVerified,
    ForwardAuthenticatorVerified,
    StreamVerifier,
    TagVerified,
)
from tests.sine.chain_backends import chain_backend  # noqa: F401  (autouse: C and Python)

NOW = 1_700_000_000.0
DOC = bytes(range(256)) * 21 + b"tail"  # 5380 bytes: 6 blocks of 1 KiB, last one padded


def feed(v: StreamVerifier, body: bytes, step: int = 700) -> tuple[bytes, list[object]]:
    """Feed ``body`` in ``step``-byte chunks; return released bytes and all events."""
    out, events = bytearray(), []
    for i in range(0, len(body), step):
        for e in v.receive_data(body[i : i + step]):
            events.append(e)
            if isinstance(e, BlockVerified):
                out += e.data
    events += v.receive_eof()
    return bytes(out), events


def verify_capturing(v: StreamVerifier, body: bytes, step: int = 700
                     ) -> tuple[bytes, RemoteProtocolError | None]:
    out = bytearray()
    try:
        for i in range(0, len(body), step):
            for e in v.receive_data(body[i : i + step]):
                if isinstance(e, BlockVerified):
                    out += e.data
        v.receive_eof()
    except RemoteProtocolError as exc:
        out += b"".join(e.data for e in exc.events if isinstance(e, BlockVerified))
        return bytes(out), exc
    return bytes(out), None


def reference_root(doc: bytes, bs: int) -> bytes:
    """FORMAT.md section 3 written out naively (independent of sine.tag)."""
    blocks = [doc[i : i + bs] for i in range(0, len(doc), bs)]
    h = bytes(32)
    for block in reversed(blocks):
        h = hashlib.sha256(block.ljust(bs, b"\0") + h).digest()
    return h


@pytest.mark.parametrize("key_name", ["ed_key", "rsa_key", "ec_key"])
def test_round_trip_every_signature_scheme(key_name: str, request: pytest.FixtureRequest) -> None:
    key: SigningKey = request.getfixturevalue(key_name)
    signed = sign_document(DOC, "/d.html", key, NOW)
    assert signed.info.content_root == reference_root(DOC, 1024)
    body = b"".join(encode_stream(DOC, signed))
    assert len(body) == stream_length(signed)
    pk = key.verifying_key()
    data, events = feed(StreamVerifier("/d.html", NOW + 5, public_key=pk), body)
    assert data == DOC
    assert pk.verifications == 1
    assert isinstance(events[0], TagVerified) and events[0].method == "signature"
    assert isinstance(events[-1], DocumentVerified)
    assert [e.index for e in events if isinstance(e, BlockVerified)] == list(range(1, 7))


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 4096])
@pytest.mark.parametrize("alg", list(HashAlg))
def test_sizes_and_hashes(size: int, alg: HashAlg, ed_key: SigningKey) -> None:
    doc = bytes((i * 31) % 256 for i in range(size))
    signed = sign_document(doc, "/x", ed_key, NOW, hash_alg=alg)
    assert signed.info.block_count == -(-size // 1024)
    body = b"".join(encode_stream(doc, signed))
    data, _ = feed(StreamVerifier("/x", NOW, public_key=ed_key.verifying_key()), body, 333)
    assert data == doc
    sep = push_separate_tag(signed.separate_tag())
    data, _ = feed(StreamVerifier("/x", NOW, public_key=ed_key.verifying_key(), separate=sep),
                   doc, 333)
    assert data == doc


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.binary(max_size=3000), bs=st.integers(16, 700),
       cuts=st.lists(st.integers(0, 6000), max_size=8))
def test_any_chunking_gives_the_same_result(doc: bytes, bs: int, cuts: list[int],
                                            ed_key: SigningKey) -> None:
    signed = sign_document(doc, "/f", ed_key, NOW, block_size=bs)
    body = b"".join(encode_stream(doc, signed))
    v = StreamVerifier("/f", NOW, public_key=ed_key.verifying_key())
    out = bytearray()
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    for a, b in zip(points, points[1:], strict=False):
        for e in v.receive_data(body[a:b]):
            if isinstance(e, BlockVerified):
                out += e.data
        assert v.buffered <= bs + 32 + (b - a) + 2000
    v.receive_eof()
    assert bytes(out) == doc


def record_offset(signed: sine.SignedDocument, k: int) -> int:
    info = signed.info
    return len(push_tag(signed.tag)) + (k - 1) * (info.block_size + info.digest_size)


@pytest.mark.parametrize("k", [1, 2, 5, 6])
def test_flipped_byte_in_block_k_fails_at_k(k: int, ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = bytearray(b"".join(encode_stream(DOC, signed)))
    body[record_offset(signed, k) + 3] ^= 0x01
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()),
                                bytes(body))
    assert isinstance(err, BlockMismatch) and err.block == k
    assert out == DOC[: (k - 1) * 1024]


def test_flipped_link_blames_the_record_carrying_it(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = bytearray(b"".join(encode_stream(DOC, signed)))
    body[record_offset(signed, 3) + 1024 + 7] ^= 0x80  # h_4, carried by record 3
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()),
                                bytes(body))
    assert isinstance(err, BlockMismatch) and err.block == 3
    assert out == DOC[:2048]


def test_truncation_reorder_trailing(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    body = b"".join(encode_stream(DOC, signed))
    pk = ed_key.verifying_key()
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk),
                                body[: record_offset(signed, 4)])
    assert isinstance(err, TruncatedDocument) and err.block == 4 and out == DOC[:3072]
    r2, r3 = record_offset(signed, 2), record_offset(signed, 3)
    size = r3 - r2
    swapped = body[:r2] + body[r3 : r3 + size] + body[r2:r3] + body[r3 + size :]
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk), swapped)
    assert isinstance(err, BlockMismatch) and err.block == 2 and out == DOC[:1024]
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk), body + b"!")
    assert isinstance(err, TrailingData) and out == DOC
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk), body[:10])
    assert isinstance(err, TruncatedDocument) and err.block == 0 and out == b""


def test_freshness_path_and_signature(ed_key: SigningKey, ec_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW, lifetime=100)
    body = b"".join(encode_stream(DOC, signed))
    pk = ed_key.verifying_key()
    cases = [
        (StreamVerifier("/d", NOW + 100, public_key=pk), TagExpired),
        (StreamVerifier("/d", NOW - 1000, public_key=pk), TagNotYetValid),
        (StreamVerifier("/other", NOW, public_key=pk), WrongResource),
        (StreamVerifier("/d", NOW, public_key=ec_key.verifying_key()), SignatureInvalid),
        (StreamVerifier("/d", NOW, public_key=SigningKey.generate(ed_key.alg).verifying_key()),
         SignatureInvalid),
        (StreamVerifier("/d", NOW, trusted_digest=bytes(32)), DigestMismatch),
    ]
    for verifier, error in cases:
        out, err = verify_capturing(verifier, body)
        assert isinstance(err, error) and err.block == 0 and out == b"", error
    bad_sig = bytearray(body)
    bad_sig[record_offset(signed, 1) - 1] ^= 1  # last signature byte
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk), bytes(bad_sig))
    assert isinstance(err, SignatureInvalid) and out == b""


def test_closed_after_error(ed_key: SigningKey) -> None:
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    with pytest.raises(RemoteProtocolError):
        v.receive_data(b"\x00\x00\x00\x10" + b"x" * 100)
    with pytest.raises(LocalProtocolError):
        v.receive_data(b"more")
    with pytest.raises(LocalProtocolError):
        StreamVerifier("/d", NOW)


def test_digest_trust_needs_no_signature_and_hides_the_forward_authenticator(
    ed_key: SigningKey,
) -> None:
    fa = ForwardAuthenticator((("/a", b"\x01" * 32), ("/b", b"\x02" * 32)))
    signed = sign_document(DOC, "/d", ed_key, NOW, forward_authenticator=fa, block_size=64)
    body = b"".join(encode_stream(DOC, signed))
    pk = ed_key.verifying_key()
    data, events = feed(StreamVerifier("/d", NOW, public_key=pk), body)
    fas = [e for e in events if isinstance(e, ForwardAuthenticatorVerified)]
    assert data == DOC and fas[0].forward_authenticator == fa
    digest = signed.info.at_sign()
    counter = SigningKey.generate(ed_key.alg).verifying_key()
    data, events = feed(StreamVerifier("/d", NOW, trusted_digest=digest), body)
    assert data == DOC and counter.verifications == 0
    assert not any(isinstance(e, ForwardAuthenticatorVerified) for e in events)
    # The digest covers the content; tampering with content still fails at the right block.
    bad = bytearray(body)
    bad[record_offset(signed, 10) + 1] ^= 4
    out, err = verify_capturing(StreamVerifier("/d", NOW, trusted_digest=digest), bytes(bad))
    assert isinstance(err, BlockMismatch) and err.block == 10 and out == DOC[:9 * 64]
    # A flipped Forward-Authenticator byte is caught in the FA chain (blocks n+1..).
    bad = bytearray(body)
    bad[-3] ^= 1
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=pk), bytes(bad))
    assert isinstance(err, BlockMismatch) and err.block > signed.info.block_count
    assert out == DOC


def test_separate_form_blames_block(ed_key: SigningKey) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW)
    sep = push_separate_tag(signed.separate_tag())
    bad = bytearray(DOC)
    bad[4 * 1024 + 10] ^= 1
    out, err = verify_capturing(
        StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), separate=sep), bytes(bad))
    assert isinstance(err, BlockMismatch) and err.block == 5 and out == DOC[:4096]
    out, err = verify_capturing(
        StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), separate=sep), DOC[:-1])
    assert isinstance(err, TruncatedDocument) and err.block == 6


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pos=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000),
       step=st.integers(1, 3000))
def test_fuzz_mutated_stream_never_releases_unverified_bytes(
    pos: int, value: int, cut: int, step: int, ed_key: SigningKey
) -> None:
    signed = sign_document(DOC, "/d", ed_key, NOW, block_size=512)
    body = bytearray(b"".join(encode_stream(DOC, signed)))
    body[pos % len(body)] = value
    body = body[: len(body) - cut % 50]
    out, err = verify_capturing(StreamVerifier("/d", NOW, public_key=ed_key.verifying_key()),
                                bytes(body), step)
    if err is None:
        assert out == DOC
    else:
        assert out == DOC[: len(out)]
        assert len(out) == max(err.block - 1, 0) * 512 or err.block > signed.info.block_count


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=2000))
def test_fuzz_garbage_raises_typed_errors_only(garbage: bytes, ed_key: SigningKey) -> None:
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    out, err = verify_capturing(v, garbage, 97)
    assert out == b"" and err is not None
    info_len = struct.pack("!I", 60)
    out, err = verify_capturing(StreamVerifier("/d", NOW, trusted_digest=bytes(32)),
                                info_len + garbage, 97)
    assert out == b"" and err is not None


SANS_IO = ["algorithms", "format", "tag", "verifier", "links", "errors"]


@pytest.mark.parametrize("module", SANS_IO)
def test_sans_io_modules_do_no_io(module: str) -> None:
    source = Path(sine.__file__).with_name(f"{module}.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"asyncio", "socket", "time", "random", "ssl", "subprocess"}
