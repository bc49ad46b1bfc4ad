"""Codec round-trips (byte-exact) and rejection of malformed tags, with Hypothesis fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sine.algorithms import HashAlg, SigAlg, digest_size
from sine.errors import TagFormatError
from sine.format import (
    ForwardAuthenticator,
    SeparateTag,
    Tag,
    TagInfo,
    pull_forward_authenticator,
    pull_separate_tag,
    pull_tag,
    pull_tag_info,
    push_forward_authenticator,
    push_separate_tag,
    push_tag,
    push_tag_info,
)
from tls12.buffer import Buffer

paths = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
).map(lambda s: "/" + s)


@st.composite
def tag_infos(draw: st.DrawFn) -> TagInfo:
    alg = draw(st.sampled_from(list(HashAlg)))
    hlen = digest_size(alg)
    t = draw(st.integers(0, 2**40))
    fa_length = draw(st.integers(0, 5000))
    return TagInfo(
        hash_alg=alg,
        sig_alg=draw(st.sampled_from(list(SigAlg))),
        block_size=draw(st.integers(16, 1 << 20)),
        timestamp=t,
        expires=t + draw(st.integers(1, 2**30)),
        content_length=draw(st.integers(0, 2**40)),
        path=draw(paths),
        content_root=draw(st.binary(min_size=hlen, max_size=hlen)),
        fa_length=fa_length,
        fa_root=draw(st.binary(min_size=hlen, max_size=hlen)) if fa_length else b"",
    )


@given(tag_infos())
def test_tag_info_round_trip(info: TagInfo) -> None:
    raw = push_tag_info(info)
    buf = Buffer(raw)
    assert pull_tag_info(buf) == info
    assert buf.eof()
    assert push_tag_info(pull_tag_info(Buffer(raw))) == raw


@given(tag_infos(), st.binary(min_size=1, max_size=600))
def test_tag_round_trip(info: TagInfo, sig: bytes) -> None:
    raw = push_tag(Tag(info, sig))
    assert pull_tag(Buffer(raw)) == Tag(info, sig)


@given(st.lists(st.tuples(paths, st.binary(min_size=32, max_size=32)), max_size=20,
                unique_by=lambda e: e[0]))
def test_forward_authenticator_round_trip(entries: list[tuple[str, bytes]]) -> None:
    fa = ForwardAuthenticator(tuple(sorted(entries)))
    raw = push_forward_authenticator(fa)
    assert pull_forward_authenticator(Buffer(raw)) == fa
    with pytest.raises(TagFormatError):
        pull_forward_authenticator(Buffer(raw + b"\x00"))


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_pull_tag_rejects_garbage_with_typed_error(data: bytes) -> None:
    for pull in (pull_tag, pull_separate_tag, pull_forward_authenticator):
        try:
            pull(Buffer(data))
        except TagFormatError as exc:
            assert exc.block == 0


@settings(max_examples=300)
@given(tag_infos(), st.integers(0, 200), st.integers(0, 255))
def test_mutated_tag_info_parses_or_raises_typed(info: TagInfo, pos: int, value: int) -> None:
    raw = bytearray(push_tag_info(info))
    raw[pos % len(raw)] = value
    try:
        parsed = pull_tag_info(Buffer(bytes(raw)))
    except TagFormatError:
        return
    assert push_tag_info(parsed) == bytes(raw)


def test_block_count_is_checked() -> None:
    info = TagInfo(HashAlg.SHA256, SigAlg.ED25519, 1024, 10, 20, 2049, "/x", bytes(32))
    raw = bytearray(push_tag_info(info))
    count_offset = 4 + 4 + 4 + 8 + 8 + 8
    assert raw[count_offset : count_offset + 8] == (3).to_bytes(8, "big")
    raw[count_offset + 7] = 2
    with pytest.raises(TagFormatError, match="block count"):
        pull_tag_info(Buffer(bytes(raw)))


def test_separate_tag_rejects_trailing_bytes_and_wrong_link_count() -> None:
    info = TagInfo(HashAlg.SHA256, SigAlg.ED25519, 16, 10, 20, 40, "/x", bytes(32))
    at = SeparateTag(Tag(info, b"s"), (b"a" * 32, b"b" * 32))
    raw = push_separate_tag(at)
    assert pull_separate_tag(Buffer(raw)) == at
    with pytest.raises(TagFormatError):
        pull_separate_tag(Buffer(raw + b"x"))
    with pytest.raises(TagFormatError):
        pull_separate_tag(Buffer(raw[:-1]))
    with pytest.raises(ValueError):
        SeparateTag(Tag(info, b"s"), (b"a" * 32,))


@pytest.mark.parametrize("bad", [
    dict(block_size=8), dict(expires=10), dict(path="x"), dict(path="/\x00"),
    dict(content_root=b"short"),
])
def test_tag_info_rejects_bad_arguments(bad: dict[str, object]) -> None:
    args: dict[str, object] = dict(hash_alg=HashAlg.SHA256, sig_alg=SigAlg.ED25519,
                                   block_size=1024, timestamp=10, expires=20,
                                   content_length=5, path="/x", content_root=bytes(32))
    args.update(bad)
    with pytest.raises(ValueError):
        TagInfo(**args)  # type: ignore[arg-type]


# Golden bytes, written down from FORMAT.md before the codecs moved onto tls12.buffer: the
# encoders must keep producing exactly these bytes and the decoders must accept them.
GOLDEN_SEPARATE_TAG = bytes.fromhex(
    "0000007753494e450101020000000010000000000000000a0000000000000014000000000000002800000000"
    "0000000300052f782fc3a9000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f00"
    "000007202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f000f73696773696773"
    "6967736967736967616161616161616161616161616161616161616161616161616161616161616162626262"
    "6262626262626262626262626262626262626262626262626262626246412d62797465"
)
GOLDEN_FORWARD_AUTHENTICATOR = bytes.fromhex(
    "0000000200022f6120010101010101010101010101010101010101010101010101010101010101010100022f"
    "62140202020202020202020202020202020202020202"
)


def test_golden_bytes_of_every_structure() -> None:
    info = TagInfo(HashAlg.SHA256, SigAlg.ED25519, 16, 10, 20, 40, "/x/\u00e9", bytes(range(32)),
                   7, bytes(range(32, 64)))
    at = SeparateTag(Tag(info, b"sig" * 5), (b"a" * 32, b"b" * 32), b"FA-byte")
    fa = ForwardAuthenticator((("/a", b"\x01" * 32), ("/b", b"\x02" * 20)))
    assert push_separate_tag(at) == GOLDEN_SEPARATE_TAG
    assert pull_separate_tag(Buffer(GOLDEN_SEPARATE_TAG)) == at
    assert push_forward_authenticator(fa) == GOLDEN_FORWARD_AUTHENTICATOR
    assert pull_forward_authenticator(Buffer(GOLDEN_FORWARD_AUTHENTICATOR)) == fa
