"""Tree mode: codecs byte-exact, whole documents and ranges verify, tampering fails closed."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sine.algorithms import SigAlg, SigningKey
from sine.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    TagExpired,
    TrailingData,
    TruncatedDocument,
    WrongResource,
)
from sine.tree import (
    GROUP_SIZES,
    HASH_SIZE,
    GroupMismatch,
    Outboard,
    RangeProof,
    SignedTree,
    TreeFormatError,
    TreeHash,
    TreeTag,
    build_outboard,
    encode_interleaved,
    group_count,
    leaf_hash,
    left_groups,
    make_proof,
    parent_hash,
    proof_root,
    pull_outboard,
    pull_range_proof,
    pull_tree_head,
    pull_tree_tag,
    push_outboard,
    push_range_proof,
    push_tree_head,
    push_tree_tag,
    root_hash,
    sign_tree,
    tree_overhead,
)
from sine.tree_verifier import (
    HeadVerified,
    RangeVerified,
    SliceVerifier,
    TreeEvent,
    TreeVerified,
    TreeVerifier,
    VerifiedData,
)
from tls12.buffer import Buffer

NOW = 1_700_000_000
PATH = "/doc.bin"
_KEY = SigningKey.generate(SigAlg.ED25519)  # module-level: Hypothesis tests without fixtures
FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _doc(length: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(length)


@st.composite
def documents(draw: st.DrawFn) -> tuple[TreeHash, int, bytes]:
    """Hash, group size and a document: 0, 1, exact multiples, one off either way, random."""
    alg = draw(st.sampled_from(list(TreeHash)))
    g = draw(st.sampled_from(GROUP_SIZES))
    groups = draw(st.integers(0, 5 if g < 1 << 16 else 2))
    tail = draw(st.sampled_from([0, 1, g - 1, draw(st.integers(0, g - 1))]))
    length = max(0, groups * g + tail) if groups or tail else draw(st.sampled_from([0, 1]))
    return alg, g, _doc(length, draw(st.integers(0, 3)))


def _sign(key: SigningKey, doc: bytes, alg: TreeHash = TreeHash.SHA256, g: int = 1024,
          now: float = NOW, path: str = PATH) -> SignedTree:
    return sign_tree(doc, path, key, now, group_size=g, tree_hash=alg)


def _feed(v: TreeVerifier | SliceVerifier, chunks: list[bytes]) -> list[TreeEvent]:
    events: list[TreeEvent] = []
    for c in [*chunks, b""]:
        events += v.receive_data(c)
    return events


def _data(events: list[TreeEvent] | list[object]) -> bytes:
    out = b""
    for e in events:
        if isinstance(e, VerifiedData):
            assert e.offset == len(out)  # in order, no gap
            out += e.data
    return out


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _pair_starts(n: int) -> list[int]:
    """First group under each parent, in the outboard's pre-order."""
    out: list[int] = []

    def walk(start: int, count: int) -> None:
        if count > 1:
            out.append(start)
            split = left_groups(count)
            walk(start, split)
            walk(start + split, count - split)

    walk(0, n)
    return out


# -- codecs -----------------------------------------------------------------------------------


@given(documents(), st.text(max_size=20).map(lambda s: "/" + s.replace("\x00", "")))
@FAST
def test_codecs_round_trip_byte_exact(ed_key: SigningKey, d: tuple[TreeHash, int, bytes],
                                      path: str) -> None:
    alg, g, doc = d
    signed = _sign(ed_key, doc, alg, g, path=path)
    raw_head = push_tree_head(signed.tag.head)
    assert pull_tree_head(Buffer(raw_head)) == signed.tag.head
    raw_tag = push_tree_tag(signed.tag)
    assert pull_tree_tag(Buffer(raw_tag)) == signed.tag
    assert push_tree_tag(pull_tree_tag(Buffer(raw_tag))) == raw_tag
    raw_ob = push_outboard(signed.outboard)
    assert pull_outboard(Buffer(raw_ob)) == signed.outboard
    assert push_outboard(pull_outboard(Buffer(raw_ob))) == raw_ob
    assert len(raw_ob) == tree_overhead(len(doc), g).outboard
    if doc:
        a = len(doc) // 3
        proof = make_proof(signed.outboard, a, len(doc) - 1)
        raw = push_range_proof(proof)
        assert pull_range_proof(Buffer(raw)) == proof
        assert push_range_proof(pull_range_proof(Buffer(raw))) == raw
        assert len(raw) == tree_overhead(len(doc), g, (a, len(doc) - 1)).proof


def test_codecs_reject_trailing_short_and_inconsistent() -> None:
    signed = _sign(_KEY, _doc(5000))
    encodings = [(push_tree_tag(signed.tag), pull_tree_tag),
                 (push_outboard(signed.outboard), pull_outboard),
                 (push_range_proof(make_proof(signed.outboard, 10, 3000)), pull_range_proof)]
    for raw, pull in encodings:
        for bad in (raw + b"\x00", raw[:-1]):
            with pytest.raises(TreeFormatError):
                pull(Buffer(bad))  # type: ignore[operator]
    head = bytearray(push_tree_head(signed.tag.head))
    head[40] ^= 1  # low byte of the group count N (offset 33..40)
    with pytest.raises(TreeFormatError, match="group count"):
        pull_tree_head(Buffer(bytes(head)))


def test_tree_head_is_rejected_by_the_chain_parser(ed_key: SigningKey) -> None:
    from sine.format import pull_tag_info

    head = _sign(ed_key, b"x").tag.head
    with pytest.raises(RemoteProtocolError, match="reserved flags"):
        pull_tag_info(Buffer(push_tree_head(head)))
    assert head.signed_message().startswith(b"SINE/1 tree root\x00")


@pytest.mark.parametrize("pull", [pull_tree_tag, pull_tree_head, pull_outboard,
                                  pull_range_proof])
@given(raw=st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_parsers_fuzz_only_typed_errors(pull: Callable[[Buffer], object], raw: bytes) -> None:
    try:
        pull(Buffer(raw))
    except TreeFormatError:
        pass


@given(st.sampled_from([0, 1, 2, 3]), st.integers(0, 2**64 - 1), st.integers(0, 255))
@settings(max_examples=200, deadline=None)
def test_mutated_valid_encodings_only_typed_errors(which: int, pos: int, byte: int) -> None:
    """Flipping one byte of a valid encoding: it parses (to something else) or a typed error."""
    key = _KEY
    doc = _doc(5000)
    signed = _sign(key, doc)
    raws = [push_tree_tag(signed.tag), push_tree_head(signed.tag.head),
            push_outboard(signed.outboard), push_range_proof(make_proof(signed.outboard, 10, 3000))]
    pulls = [pull_tree_tag, pull_tree_head, pull_outboard, pull_range_proof]
    raw = bytearray(raws[which])
    raw[pos % len(raw)] = byte
    try:
        pulls[which](Buffer(bytes(raw)))  # type: ignore[operator]
    except TreeFormatError:
        pass


# -- whole documents --------------------------------------------------------------------------


@given(documents(), st.integers(1, 5000), st.booleans())
@FAST
def test_whole_document_verifies(ed_key: SigningKey, d: tuple[TreeHash, int, bytes],
                                 chunk: int, outboard_first: bool) -> None:
    alg, g, doc = d
    signed = _sign(ed_key, doc, alg, g)
    pk = ed_key.verifying_key()
    if outboard_first:
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=push_tree_tag(signed.tag),
                         outboard=push_outboard(signed.outboard))
        body = doc
    else:
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=push_tree_tag(signed.tag))
        body = b"".join(encode_interleaved(doc, signed.outboard))
        assert len(body) == len(doc) + tree_overhead(len(doc), g).interleaved
    events = _feed(v, _chunks(body, chunk))
    assert isinstance(events[0], HeadVerified)
    assert isinstance(events[-1], TreeVerified)
    assert _data(events) == doc
    assert v.released_bytes == len(doc)


@given(documents(), st.data())
@FAST
def test_random_ranges_verify_alone(ed_key: SigningKey, d: tuple[TreeHash, int, bytes],
                                    data: st.DataObject) -> None:
    alg, g, doc = d
    if not doc:
        doc = b"\x01"
    signed = _sign(ed_key, doc, alg, g)
    first = data.draw(st.integers(0, len(doc) - 1))
    last = data.draw(st.integers(first, len(doc) - 1))
    proof = push_range_proof(make_proof(signed.outboard, first, last))
    v = SliceVerifier(PATH, NOW, public_key=ed_key.verifying_key(),
                      tag=push_tree_tag(signed.tag), proof=proof, first=first, last=last)
    start, end = v.span
    assert start <= first <= last < end <= len(doc)
    events = _feed(v, _chunks(doc[start:end], data.draw(st.integers(1, 70000))))
    assert [e.data for e in events if isinstance(e, VerifiedData)] == [doc[first : last + 1]]
    assert isinstance(events[-1], RangeVerified)


@pytest.mark.parametrize("alg", list(TreeHash))
@pytest.mark.parametrize("g", GROUP_SIZES)
def test_proof_size_is_logarithmic(ed_key: SigningKey, alg: TreeHash, g: int) -> None:
    """For N = 2^k groups a one-byte range needs exactly k siblings (k * 32 bytes + header)."""
    for k in range(0, 11 if g < 1 << 14 else 6):
        n = 1 << k
        outboard, _ = build_outboard(_doc(n * g), g, alg)
        for group in {0, n // 3, n - 1}:
            proof = make_proof(outboard, group * g + 1, group * g + 1)
            raw = push_range_proof(proof)
            assert len(proof.siblings) == k
            assert len(raw) == 33 + HASH_SIZE * k
            assert tree_overhead(n * g, g, (group * g + 1, group * g + 1)).proof == len(raw)
        # any range: at most two siblings per level
        proof = make_proof(outboard, g // 2, max(g // 2, (n - 1) * g - 1))
        assert len(proof.siblings) <= 2 * k


def test_overhead_model() -> None:
    o = tree_overhead(10_000, 1024, (1000, 1100))
    assert (o.outboard, o.interleaved) == (16 + 64 * 9, 64 * 9)
    assert o.widening == 2048 - 101  # groups 0 and 1 are fetched for 101 bytes
    assert tree_overhead(0, 1024) == tree_overhead(1, 1024)  # one group, no parents
    with pytest.raises(ValueError):
        tree_overhead(100, 1000)
    with pytest.raises(ValueError):
        tree_overhead(100, 1024, (50, 100))


# -- domain separation and the length binding -------------------------------------------------


@pytest.mark.parametrize("alg", list(TreeHash))
def test_no_leaf_poses_as_a_parent(alg: TreeHash) -> None:
    left, right = bytes(range(32)), bytes(range(32, 64))
    # a leaf whose index and data spell out the parent's input bytes after the prefix
    forged = leaf_hash(alg, int.from_bytes(left[:8], "big"), left[8:] + right)
    assert forged != parent_hash(alg, left, right)
    assert root_hash(alg, 1024, 0, left) != parent_hash(alg, left, right)


@pytest.mark.parametrize("alg", list(TreeHash))
def test_the_root_binds_the_length(ed_key: SigningKey, alg: TreeHash) -> None:
    """A proof that claims a shorter document (same group count) does not reach the root."""
    doc = _doc(3000)
    signed = _sign(ed_key, doc, alg)
    proof = make_proof(signed.outboard, 0, 10)
    assert proof_root(proof, doc[:1024]) == signed.tag.head.root
    short = RangeProof(alg, 1024, 2100, proof.first_group, proof.groups, proof.siblings)
    assert proof_root(short, doc[:1024]) != signed.tag.head.root
    with pytest.raises(TreeFormatError) as info:
        SliceVerifier(PATH, NOW, public_key=ed_key.verifying_key(), tag=signed.tag,
                      proof=push_range_proof(short), first=0, last=10)
    assert info.value.block == 1


# -- tampering fails closed at the right group ------------------------------------------------


def _released_before(exc: RemoteProtocolError, earlier: list[TreeEvent], g: int,
                     doc: bytes) -> None:
    """Exactly groups ``< g`` came out, byte-exact, and nothing else."""
    assert _data([*earlier, *exc.events]) == doc[: g * 1024]


@given(st.integers(0, 20_000), st.integers(0, 7), st.booleans())
@settings(max_examples=60, deadline=None)
def test_data_bit_flip(pos: int, bit: int, outboard_first: bool) -> None:
    doc = _doc(20_000)
    signed = _sign(_KEY, doc)
    bad = bytearray(doc)
    bad[pos % len(doc)] ^= 1 << bit
    g = (pos % len(doc)) // 1024
    if outboard_first:
        v = TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                         outboard=signed.outboard)
        body = bytes(bad)
    else:
        v = TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag)
        body = b"".join(encode_interleaved(bytes(bad), signed.outboard))
    earlier: list[TreeEvent] = []
    with pytest.raises(GroupMismatch) as info:
        for c in _chunks(body, 1500):
            earlier += v.receive_data(c)
    assert info.value.block == g + 1 and info.value.group == g
    _released_before(info.value, earlier, g, doc)
    with pytest.raises(LocalProtocolError):
        v.receive_data(b"more")


@given(st.integers(0, 2**32), st.integers(0, 7), st.booleans())
@settings(max_examples=60, deadline=None)
def test_outboard_bit_flip(pos: int, bit: int, interleaved: bool) -> None:
    doc = _doc(20_000)
    signed = _sign(_KEY, doc)
    raw = bytearray(push_outboard(signed.outboard))
    pair = (pos % (len(raw) - 16)) // 64
    raw[16 + pos % (len(raw) - 16)] ^= 1 << bit
    bad = pull_outboard(Buffer(bytes(raw)))
    g = _pair_starts(group_count(len(doc), 1024))[pair]
    pk = _KEY.verifying_key()
    body = b"".join(encode_interleaved(doc, bad)) if interleaved else doc
    earlier: list[TreeEvent] = []
    with pytest.raises(GroupMismatch) as info:  # outboard first: parents above group 0 are
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=signed.tag,  # checked at construction
                         outboard=None if interleaved else bytes(raw))
        for c in _chunks(body, 999):
            earlier += v.receive_data(c)
    assert info.value.group == g
    _released_before(info.value, earlier, g, doc)


@given(st.integers(0, 2**32), st.integers(0, 7))
@settings(max_examples=60, deadline=None)
def test_proof_bit_flip(pos: int, bit: int) -> None:
    doc = _doc(50_000)
    signed = _sign(_KEY, doc)
    raw = bytearray(push_range_proof(make_proof(signed.outboard, 5000, 9000)))
    raw[pos % len(raw)] ^= 1 << bit
    try:
        v = SliceVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                          proof=bytes(raw), first=5000, last=9000)
    except TreeFormatError as exc:  # a header byte: wrong range, length, hash or group size
        assert pos % len(raw) < 33 and exc.group == 4
        return
    with pytest.raises(GroupMismatch) as info:
        v.receive_data(doc[4096:9216])  # groups 4..8
    assert info.value.group == 4 and _data(info.value.events) == b""
    assert v.released_bytes == 0


@given(st.integers(0, 200_000), st.booleans())
@settings(max_examples=60, deadline=None)
def test_truncation(cut: int, outboard_first: bool) -> None:
    doc = _doc(30_000)
    signed = _sign(_KEY, doc, g=4096)
    pk = _KEY.verifying_key()
    if outboard_first:
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=signed.tag, outboard=signed.outboard)
        body = doc
    else:
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=signed.tag)
        body = b"".join(encode_interleaved(doc, signed.outboard))
    cut %= len(body)
    events = v.receive_data(body[:cut]) if cut else []
    with pytest.raises(TruncatedDocument) as info:
        v.receive_data(b"")
    released = _data(events)
    assert doc.startswith(released) and len(released) % 4096 == 0
    assert info.value.group == len(released) // 4096


def test_extension_and_slice_truncation() -> None:
    doc = _doc(10_000)
    signed = _sign(_KEY, doc)
    pk = _KEY.verifying_key()
    for extra in (b"\x00", b"x" * 64, b"y" * 1024):
        v = TreeVerifier(PATH, NOW, public_key=pk, tag=signed.tag, outboard=signed.outboard)
        with pytest.raises(TrailingData) as info:
            v.receive_data(doc + extra)
        assert info.value.block == 11 and _data(info.value.events) == doc
    v = TreeVerifier(PATH, NOW, public_key=pk, tag=signed.tag, outboard=signed.outboard)
    assert isinstance(v.receive_data(doc)[-1], TreeVerified)
    with pytest.raises(TrailingData):
        v.receive_data(b"\x00")
    proof = make_proof(signed.outboard, 3000, 5000)
    s = SliceVerifier(PATH, NOW, public_key=pk, tag=signed.tag, proof=proof, first=3000,
                      last=5000)
    with pytest.raises(TrailingData):
        s.receive_data(doc[2048:5120] + b"\x00")
    s = SliceVerifier(PATH, NOW, public_key=pk, tag=signed.tag, proof=proof, first=3000,
                      last=5000)
    s.receive_data(doc[2048:4096])
    with pytest.raises(TruncatedDocument) as info:
        s.receive_data(b"")
    assert info.value.group == 4 and s.released_bytes == 0


def test_chunk_from_another_document() -> None:
    doc, other = _doc(8192, 1), _doc(8192, 2)
    signed = _sign(_KEY, doc)
    spliced = doc[:3072] + other[3072:4096] + doc[4096:]
    v = TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                     outboard=signed.outboard)
    with pytest.raises(GroupMismatch) as info:
        v.receive_data(spliced)
    assert info.value.group == 3 and _data(info.value.events) == doc[:3072]
    # the other document's own, authentic outboard and proof do not help either
    other_signed = _sign(_KEY, other)
    with pytest.raises(GroupMismatch):
        TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                     outboard=other_signed.outboard).receive_data(other)
    s = SliceVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                      proof=make_proof(other_signed.outboard, 3500, 3600), first=3500, last=3600)
    with pytest.raises(GroupMismatch):
        s.receive_data(spliced[3072:4096])


def test_stale_version() -> None:
    old_doc, new_doc = _doc(9000, 1), _doc(9000, 2)
    old = _sign(_KEY, old_doc, now=NOW - 100_000)
    new = _sign(_KEY, new_doc, now=NOW)
    pk = _KEY.verifying_key()
    with pytest.raises(TagExpired):  # the older root itself is no longer fresh
        TreeVerifier(PATH, NOW, public_key=pk, tag=push_tree_tag(old.tag))
    # old outboard / proof / bytes against the current root
    with pytest.raises(GroupMismatch) as info:
        TreeVerifier(PATH, NOW, public_key=pk, tag=new.tag, outboard=old.outboard
                     ).receive_data(old_doc)
    assert info.value.group == 0
    s = SliceVerifier(PATH, NOW, public_key=pk, tag=new.tag,
                      proof=make_proof(old.outboard, 100, 200), first=100, last=200)
    with pytest.raises(GroupMismatch):
        s.receive_data(new_doc[:1024])


def test_head_checks(ed_key: SigningKey) -> None:
    signed = _sign(_KEY, b"hello")
    with pytest.raises(WrongResource):
        TreeVerifier("/other", NOW, public_key=_KEY.verifying_key(), tag=signed.tag)
    with pytest.raises(RemoteProtocolError) as info:  # a key that did not sign
        TreeVerifier(PATH, NOW, public_key=ed_key.verifying_key(), tag=signed.tag)
    assert info.value.block == 0
    forged = TreeTag(dataclasses.replace(signed.tag.head, content_length=4),
                     signed.tag.signature)
    with pytest.raises(RemoteProtocolError):
        TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=forged)
    with pytest.raises(LocalProtocolError):
        SliceVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                      proof=b"", first=3, last=5)


def test_empty_document_and_outboard_mismatch() -> None:
    signed = _sign(_KEY, b"", TreeHash.BLAKE3)
    v = TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag)
    events = v.receive_data(b"")
    assert [type(e) for e in events] == [HeadVerified, TreeVerified]
    other = Outboard(TreeHash.SHA256, 1024, 0, ())
    with pytest.raises(TreeFormatError) as info:
        TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag, outboard=other)
    assert info.value.group == 0


@given(st.binary(max_size=3000), st.booleans())
@settings(max_examples=100, deadline=None)
def test_verifier_fuzz_never_releases_garbage(body: bytes, outboard_first: bool) -> None:
    """Arbitrary bodies: typed errors only, and every released byte is the document's."""
    doc = _doc(2500)
    signed = _sign(_KEY, doc)
    v = TreeVerifier(PATH, NOW, public_key=_KEY.verifying_key(), tag=signed.tag,
                     outboard=signed.outboard if outboard_first else None)
    events: list[TreeEvent] = []
    try:
        events += _feed(v, _chunks(body, 700))
    except RemoteProtocolError as exc:
        events += exc.events  # type: ignore[arg-type]
    assert doc.startswith(_data(events))
