"""Chain vs tree byte counts against the real encoders and verifiers, and the range model's sanity.

The counts of :mod:`sine.model_ranges` are formulas (a 1 GB file is never built); here, at small
sizes, every count is the length of what the real encoders produce, and feeding a real verifier
exactly that many bytes releases the goal while one byte fewer does not.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sine.algorithms import SigningKey
from sine.format import push_separate_tag
from sine.httpsig import sign_response
from sine.mice import MiceDecoder, RecordVerified, mice_encode, response_fields
from sine.model_latency import Scenario
from sine.model_ranges import (
    CHAIN_MODES,
    GROUP_SIZES,
    MIB,
    MODES,
    TREE_MODES,
    UNVERIFIED,
    Fetch,
    HeadSizes,
    VerifyCpu,
    fetch_time,
    first_verified_fetch,
    head_sizes,
    range_fetch,
    spine_parents,
    steady_rate,
    whole_overhead,
)
from sine.tag import encode_stream, sign_document
from sine.tree import (
    TreeHash,
    encode_interleaved,
    group_count,
    make_proof,
    push_outboard,
    push_range_proof,
    push_tree_tag,
    sign_tree,
)
from sine.tree_verifier import SliceVerifier, TreeVerifier, VerifiedData
from sine.verifier import BlockVerified, StreamVerifier

NOW = 1_700_000_000
PATH = "/video.bin"
SMALL = (1024, 4096)  # group sizes at which the real objects stay small
#: head sizes of a 1 GB file with an RSA-2048 signature (test_head_sizes_are_the_real_heads
#: checks the real ones; these only feed the model)
HEADS = HeadSizes(386, 347, 778, "RSA_PSS_SHA256 (256-byte signature)")
SLOW = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _released(events: Sequence[object]) -> int:
    """One past the last document byte released verified (0: nothing)."""
    end = 0
    for e in events:
        if isinstance(e, BlockVerified):
            end += len(e.data)
        elif isinstance(e, RecordVerified):
            end += len(e.data)
        elif isinstance(e, VerifiedData):
            end = max(end, e.offset + len(e.data))
    return end


@st.composite
def documents(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """A document, a group size and an inclusive range inside it."""
    g = draw(st.sampled_from(SMALL))
    length = draw(st.integers(1, 12 * g + 7))
    first = draw(st.integers(0, length - 1))
    last = draw(st.integers(first, length - 1))
    return random.Random(length * 7 + first).randbytes(length), g, first, last


def test_head_sizes_are_the_real_heads(rsa_key: SigningKey, ed_key: SigningKey) -> None:
    for key in (rsa_key, ed_key):
        doc = random.Random(1).randbytes(5000)
        heads = head_sizes(key, PATH, len(doc), 4096, NOW)
        signed = sign_document(doc, PATH, key, NOW, block_size=4096)
        assert heads.sine_tag == len(next(encode_stream(doc, signed)))
        tree = sign_tree(doc, PATH, key, NOW, group_size=4096)
        assert heads.tree_tag == len(push_tree_tag(tree.tag))
        for content, rs in ((doc, 1024), (doc * 9, 16384)):  # the fields do not grow
            enc = mice_encode(content, rs)
            plain = [("Content-Type", "application/octet-stream")]
            fields = sign_response(200, plain + response_fields(enc), enc.body, key,
                                   key_id="origin", now=NOW, unencoded=content)
            assert heads.mice_fields == sum(len(n) + len(v) + 4 for n, v in fields[1:])
    assert "256-byte" in head_sizes(rsa_key, PATH, 10).signature


@SLOW
@given(case=documents())
def test_chain_prefixes_are_exactly_enough(case: tuple[bytes, int, int, int],
                                           ed_key: SigningKey) -> None:
    """SINE inline, SINE separate and MICE: the counted bytes release ``last``; one fewer
    does not (a chain cannot skip the prefix)."""
    doc, g, first, last = case
    pk = ed_key.verifying_key()
    heads = head_sizes(ed_key, PATH, len(doc), g, NOW)
    signed = sign_document(doc, PATH, ed_key, NOW, block_size=g)
    body = b"".join(encode_stream(doc, signed))
    at = push_separate_tag(signed.separate_tag())
    enc = mice_encode(doc, g)
    n = -(-len(doc) // g)
    final = last // g + 1 == n

    inline = range_fetch("sine-inline", len(doc), g, first, last, heads)
    (prefix,) = inline.bodies
    assert whole_overhead("sine-inline", len(doc), g, heads) == len(body) - len(doc)
    for cut, enough in ((prefix, True), (prefix - 1, False)):
        v = StreamVerifier(PATH, NOW + 1, public_key=pk)
        assert (_released(v.receive_data(body[:cut])) > last) is enough

    separate = range_fetch("sine-separate", len(doc), g, first, last, heads)
    assert separate.bodies[0] == len(at) == whole_overhead("sine-separate", len(doc), g, heads)
    for cut, enough in ((separate.bodies[1], True), (separate.bodies[1] - 1, False)):
        v = StreamVerifier(PATH, NOW + 1, public_key=pk, separate=at)
        assert (_released(v.receive_data(doc[:cut]) if cut else []) > last) is enough

    mice = range_fetch("mice", len(doc), g, first, last, heads)
    (prefix,) = mice.bodies
    assert whole_overhead("mice", len(doc), g, heads) == (len(enc.body) - len(doc)
                                                          + heads.mice_fields)
    decoder = MiceDecoder(enc.top_proof)
    events = decoder.receive_data(enc.body[:prefix]) + (decoder.receive_data(b"") if final
                                                         else [])
    assert _released(events) > last
    if not final:  # the last record is released at the end of the body only
        assert _released(MiceDecoder(enc.top_proof).receive_data(enc.body[:prefix - 1])) <= last
    for f in (inline, separate, mice):
        assert f.useful == last - first + 1 and f.hashed == min((last // g + 1) * g, len(doc))


@SLOW
@given(case=documents(), tree_hash=st.sampled_from(TREE_MODES))
def test_tree_range_is_the_real_proof_and_groups(case: tuple[bytes, int, int, int],
                                                 tree_hash: str, ed_key: SigningKey) -> None:
    doc, g, first, last = case
    alg = TreeHash.SHA256 if tree_hash == "tree-sha256" else TreeHash.BLAKE3
    signed = sign_tree(doc, PATH, ed_key, NOW, group_size=g, tree_hash=alg)
    heads = head_sizes(ed_key, PATH, len(doc), g, NOW)
    tag, proof = push_tree_tag(signed.tag), push_range_proof(make_proof(signed.outboard, first, last))
    f = range_fetch(tree_hash, len(doc), g, first, last, heads)
    v = SliceVerifier(PATH, NOW + 1, public_key=ed_key.verifying_key(), tag=tag, proof=proof,
                      first=first, last=last)
    start, end = v.span
    assert f.bodies == (len(tag), len(proof), end - start)
    assert f.overhead == len(tag) + len(proof) + (end - start) - (last - first + 1)
    assert _released(v.receive_data(doc[start:end])) == last + 1
    combined = b"".join(encode_interleaved(doc, signed.outboard))
    assert whole_overhead(tree_hash, len(doc), g, heads) == len(tag) + len(combined) - len(doc)


@SLOW
@given(case=documents())
def test_tree_stream_releases_group_0_after_the_spine(case: tuple[bytes, int, int, int],
                                                      ed_key: SigningKey) -> None:
    doc, g, _, _ = case
    signed = sign_tree(doc, PATH, ed_key, NOW, group_size=g)
    heads = head_sizes(ed_key, PATH, len(doc), g, NOW)
    f = first_verified_fetch("tree-sha256", len(doc), g, 0, heads)
    combined = b"".join(encode_interleaved(doc, signed.outboard))
    for cut, released in ((f.bodies[1], min(g, len(doc))), (f.bodies[1] - 1, 0)):
        v = TreeVerifier(PATH, NOW + 1, public_key=ed_key.verifying_key(), tag=signed.tag)
        assert _released(v.receive_data(combined[:cut]) if cut else []) == released
    ob = first_verified_fetch("tree-blake3", len(doc), g, 0, heads, outboard=True)
    outboard = push_outboard(signed.outboard)
    assert ob.bodies[1] == len(outboard)  # the whole outboard, then group 0 of the plain body
    for cut, released in ((ob.bodies[2], min(g, len(doc))), (ob.bodies[2] - 1, 0)):
        v = TreeVerifier(PATH, NOW + 1, public_key=ed_key.verifying_key(), tag=signed.tag,
                         outboard=outboard)
        assert _released(v.receive_data(doc[:cut]) if cut else []) == released


@given(count=st.integers(1, 1 << 40))
def test_spine_is_the_depth_of_leaf_0(count: int) -> None:
    """Left-full tree: leaf 0 sits ``ceil(log2 N)`` parents deep."""
    assert spine_parents(count) == (count - 1).bit_length()


@given(length=st.integers(1, 1 << 42), g=st.sampled_from(GROUP_SIZES),
       a=st.floats(0, 1, exclude_max=True), span=st.integers(1, 1 << 24))
def test_formulas_at_any_size(length: int, g: int, a: float, span: int) -> None:
    """The analytic counts at sizes no test can build: a tree range costs at most
    ``2 ceil(log2 N)`` siblings plus a group on each side; a chain the whole prefix."""
    hs = HEADS
    first = min(int(a * length), length - 1)
    last = min(first + span - 1, length - 1)
    n = group_count(length, g)
    for mode in TREE_MODES:
        f = range_fetch(mode, length, g, first, last, hs)
        proof_bound = 33 + 32 * 2 * (n - 1).bit_length()
        assert f.useful == last - first + 1
        assert 0 <= f.overhead - hs.tree_tag - f.bodies[1] < 2 * g
        assert 33 <= f.bodies[1] <= proof_bound
    for mode in CHAIN_MODES:
        f = range_fetch(mode, length, g, first, last, hs)
        assert f.wire >= last + 1 >= f.useful  # the prefix through ``last``, at least
        assert f.hashed >= last + 1
    assert range_fetch(UNVERIFIED, length, g, first, last, hs).overhead == 0


def test_bad_arguments() -> None:
    hs = HEADS
    with pytest.raises(ValueError):
        range_fetch("tree-md5", 10, 1024, 0, 1, hs)
    with pytest.raises(ValueError):
        range_fetch("mice", 10, 1000, 0, 1, hs)
    with pytest.raises(ValueError):
        range_fetch("mice", 10, 1024, 5, 10, hs)
    with pytest.raises(ValueError):
        first_verified_fetch("mice", 10, 1024, 10, hs)
    with pytest.raises(ValueError):
        Fetch("mice", 1024, (1, 2), 1, 1, 1, True, (0,))


# -- the time model ----------------------------------------------------------------------------

def test_round_trips_closed_form() -> None:
    """Unlimited bandwidth: the unverified range is SYN + one exchange (2 round trips); a
    tree range SYN + three (tag, proof, groups); a chain SYN + one, whose 900 MB prefix then
    moves one receive window per round trip."""
    hs = HEADS
    sc = Scenario(client_bw=1e13, client_delay=0.01)
    rtt, cpu = 0.02, VerifyCpu.none()
    length, first = 10**9, 9 * 10**8
    ref = fetch_time(range_fetch(UNVERIFIED, length, 1024, first, first + 99, hs), sc, cpu)
    assert ref == pytest.approx(2 * rtt, rel=1e-4)
    tree = fetch_time(range_fetch("tree-blake3", length, 1024, first, first + 99, hs), sc, cpu)
    assert tree == pytest.approx(4 * rtt, rel=1e-4)
    prefix = range_fetch("sine-inline", length, 65536, first, first + 99, hs)
    window = sc.tcp.rwnd * sc.tcp.mss  # the receive window: one window per round trip
    assert fetch_time(prefix, sc, cpu) == pytest.approx(2 * rtt + prefix.wire / window * rtt,
                                                        rel=0.01)


@pytest.mark.parametrize("bw", [4e6, 100e6])
@pytest.mark.parametrize("mode", ["sine-inline", "sine-separate"])
def test_long_responses_extrapolate_like_the_full_simulation(bw: float, mode: str) -> None:
    """Responses beyond the cap are extended at the model's steady rate: the same time as
    simulating every byte (8 MiB: two long responses for the separate tag at 1 KiB)."""
    hs = HEADS
    sc = Scenario(client_bw=bw)
    length = 40 * MIB
    f = range_fetch(mode, length, 1024, 8 * MIB, 9 * MIB - 1, hs)
    cpu = VerifyCpu({("stream", mode, 1024): 2e-9}, "test")
    full = fetch_time(f, sc, cpu, cap=0)
    assert fetch_time(f, sc, cpu, cap=MIB // 2) == pytest.approx(full, rel=2e-4)
    assert steady_rate(sc, MIB // 2) == pytest.approx(8 / bw * (1500 / 1448), rel=2e-3)


def test_cpu_is_added_as_each_verifier_works() -> None:
    """A slice hashes after its last byte (all its CPU is added); a chain hashes while bytes
    arrive (only its last record's CPU is added while the CPU outpaces the line, all of it
    once the CPU is the bottleneck)."""
    hs = HEADS
    sc = Scenario(client_bw=100e6)
    length, first = 10**9, 5 * 10**8
    f = range_fetch("tree-sha256", length, 4096, first, first + MIB - 1, hs)
    net = fetch_time(f, sc, VerifyCpu.none())
    slow = VerifyCpu({("slice", "tree-sha256", 4096): 1e-8}, "test")
    assert fetch_time(f, sc, slow) == pytest.approx(net + 1e-8 * f.hashed, rel=1e-9)
    c = first_verified_fetch("sine-inline", length, 4096, first, hs)
    net = fetch_time(c, sc, VerifyCpu.none())
    fast = VerifyCpu({("stream", "sine-inline", 4096): 1e-9}, "test")  # 1 GB/s > 12.5 MB/s
    assert fetch_time(c, sc, fast) == pytest.approx(net + 1e-9 * c.last_record, rel=1e-9)
    hog = VerifyCpu({("stream", "sine-inline", 4096): 1e-6}, "test")  # 1 MB/s < the line
    assert fetch_time(c, sc, hog) > 1e-6 * c.hashed > net


def test_ranges_and_first_bytes_are_ordered() -> None:
    """Sanity: verified never beats unverified; a chain's cost grows with the position and
    dwarfs a tree's, which does not grow; larger groups widen a tree range."""
    hs = HEADS
    sc = Scenario(client_bw=4e6)
    cpu = VerifyCpu.none()
    length = 10**9
    by: dict[tuple[str, int, float], float] = {}
    for frac in (0.1, 0.5, 0.9):
        first = int(frac * length)
        ref = fetch_time(range_fetch(UNVERIFIED, length, 1024, first, first + MIB - 1, hs),
                         sc, cpu)
        for mode in MODES:
            for g in (1024, 65536):
                t = fetch_time(range_fetch(mode, length, g, first, first + MIB - 1, hs), sc, cpu)
                assert t >= ref
                by[mode, g, frac] = t / ref
                fv = first_verified_fetch(mode, length, g, first, hs)
                assert fetch_time(fv, sc, cpu) <= t * (1 + 1e-9)
    for mode in CHAIN_MODES:
        assert by[mode, 1024, 0.1] < by[mode, 1024, 0.5] < by[mode, 1024, 0.9]
    for mode in TREE_MODES:
        assert by[mode, 1024, 0.9] == pytest.approx(by[mode, 1024, 0.1], rel=0.01)
        assert by[mode, 1024, 0.9] < by[mode, 65536, 0.9]
        assert by[mode, 65536, 0.9] * 10 < min(by[c, 65536, 0.1] for c in CHAIN_MODES)
