"""The header codecs and URL names of tree mode (``sine.tree_http``), fuzzed with Hypothesis:
``Range``, ``Content-Range``, ``Link``, the tree URL convention, the bounded gzip decoder, and
proofs read from the outboard's bytes (issue 25).  Every parser returns a value or raises
:class:`ValueError` -- never another exception -- and what is written reads back equal."""

from __future__ import annotations

import gzip
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sine.tree import TreeHash, build_outboard, make_proof, proof_from_outboard, push_outboard
from sine.tree_http import (
    MAX_POSITION,
    BodyDecoder,
    ByteRange,
    CodingError,
    InvalidRange,
    LinkValue,
    RangeNotSatisfiable,
    content_codings,
    content_range,
    link_targets,
    parse_content_range,
    parse_link,
    parse_range,
    parse_tree_id,
    parse_tree_route,
    tree_id,
    tree_url,
)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60) | st.from_regex(r"bytes=[0-9, -]{0,20}", fullmatch=True))
def test_range_parser_never_crashes(value: str) -> None:
    try:
        spec = parse_range(value)
    except InvalidRange:
        return
    if spec is not None:
        try:
            first, last = spec.resolve(1000)
        except RangeNotSatisfiable:
            return
        assert 0 <= first <= last < 1000


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6) | st.none(), st.integers(0, 2 * 10**6))
def test_range_round_trip_and_resolution(first: int, last: int | None, length: int) -> None:
    if last is not None and last < first:
        with pytest.raises(InvalidRange):
            ByteRange(first, last)
        return
    spec = ByteRange(first, last)
    assert parse_range(spec.header()) == spec
    assert parse_range(spec.header().upper().replace("BYTES", "Bytes")) == spec
    if first >= length:
        with pytest.raises(RangeNotSatisfiable):
            spec.resolve(length)
        return
    a, b = spec.resolve(length)
    assert (a, b) == (first, length - 1 if last is None else min(last, length - 1))
    suffix = ByteRange(None, first)
    if first == 0 or length == 0:
        with pytest.raises(RangeNotSatisfiable):
            suffix.resolve(length)
    else:
        assert suffix.resolve(length) == (max(0, length - first), length - 1)


@pytest.mark.parametrize("value,expect", [
    ("bytes=0-99", ByteRange(0, 99)), ("bytes=5-", ByteRange(5, None)),
    ("bytes=-7", ByteRange(None, 7)), (" Bytes = 1-2 ", ByteRange(1, 2)),
    ("bytes=1-2,", ByteRange(1, 2)), ("bytes=0-1,5-6", None), ("items=0-5", None),
    ("bytes 0-5", None), ("bytes=" + "9" * 40 + "-", ByteRange(MAX_POSITION, None)),
])
def test_range_examples(value: str, expect: ByteRange | None) -> None:
    assert parse_range(value) == expect


@pytest.mark.parametrize("value", ["bytes=", "bytes=5", "bytes=a-b", "bytes=5-1",
                                   "bytes=-", "bytes=1-2-3", "bytes=+1-2", "bytes=٣-5"])
def test_range_syntax_errors(value: str) -> None:
    with pytest.raises(InvalidRange):
        parse_range(value)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(1, 10**12))
def test_content_range_round_trip(a: int, b: int, length: int) -> None:
    first, last = min(a, b), max(a, b)
    if last >= length:
        with pytest.raises(ValueError):
            content_range(first, last, length)
        return
    assert parse_content_range(content_range(first, last, length)) == (first, last, length)


@pytest.mark.parametrize("value", ["bytes 5-10/10", "bytes 5-4/10", "bytes */10",
                                   "bytes 1-2", "items 1-2/3", "bytes 1-2/x", "bytes -1-2/3"])
def test_content_range_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        parse_content_range(value)
    assert parse_content_range("bytes 5-9/10") == (5, 9, 10)
    assert parse_content_range(" bytes 5-9/* ") == (5, 9, None)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"bytes [0-9*/ -]{0,16}", fullmatch=True))
def test_content_range_parser_never_crashes(value: str) -> None:
    try:
        first, last, length = parse_content_range(value)
    except ValueError:
        return
    assert first <= last and (length is None or last < length)


_TOKEN = st.from_regex(r"[a-z][a-z0-9.-]{0,8}", fullmatch=True)
_QUOTED = st.text(st.characters(codec="latin-1", exclude_characters="\r\n\x00"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(
    st.from_regex(r"/[A-Za-z0-9/;,=.-]{0,20}", fullmatch=True),
    st.lists(st.tuples(_TOKEN, _QUOTED | st.none()), max_size=3)), max_size=4))
def test_link_round_trip(links: list[tuple[str, list[tuple[str, str | None]]]]) -> None:
    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = ", ".join(
        f"<{target}>" + "".join(f"; {n}" if v is None else f"; {n}={quote(v)}"
                                for n, v in params)
        for target, params in links)
    parsed = parse_link(text)
    assert parsed == [LinkValue(t, tuple((n, v or "") for n, v in p)) for t, p in links]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60) | st.from_regex(r'(<[^>]{0,6}>)?[ ;,=a-z"\\]{0,20}',
                                            fullmatch=True))
def test_link_parser_never_crashes(value: str) -> None:
    try:
        links = parse_link(value)
    except ValueError:
        return
    assert all(isinstance(link.target, str) for link in links)


def test_link_examples() -> None:
    value = '</a,b;c>; rel="sine-tree next"; title="x, y; z", <//evil/>; rel=sine-tree'
    assert [v.target for v in parse_link(value)] == ["/a,b;c", "//evil/"]
    assert parse_link(value)[0].rels() == ("sine-tree", "next")
    assert link_targets([value, "</o>; REL=Sine-Tree"], "sine-tree") == ["/a,b;c", "//evil/",
                                                                          "/o"]
    for bad in ["<a", "<a> x", '<a>; t="x', "<a>; =b", "a", "<a b>"]:
        with pytest.raises(ValueError):
            parse_link(bad)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([TreeHash.SHA256, TreeHash.BLAKE3]),
       st.sampled_from([1024, 4096, 16384, 65536]),
       st.sampled_from(["tag", "outboard", "proof", "stream"]),
       st.from_regex(r"/[a-z0-9/._-]{0,20}", fullmatch=True),
       st.integers(0, 10**9), st.integers(1, 10**9))
def test_tree_url_round_trip(alg: TreeHash, g: int, kind: str, path: str, g0: int, k: int
                             ) -> None:
    ident = tree_id(alg, g)
    assert parse_tree_id(ident) == (alg, g)
    url = tree_url(ident, kind, path, (g0, k) if kind == "proof" else None)
    route = parse_tree_route(url)
    assert (route.tree_hash, route.group_size, route.kind, route.path) == (alg, g, kind, path)
    if kind == "proof":
        assert (route.first_group, route.groups) == (g0, k)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=50) | st.from_regex(
    r"/\.sine/tree/(sha256|blake3|md5)-[0-9]{3,6}/(tag|proof|x)/[0-9-]{0,6}/?[a-z/]{0,5}",
    fullmatch=True))
def test_tree_route_parser_never_crashes(value: str) -> None:
    try:
        route = parse_tree_route(value)
    except ValueError:
        return
    assert route.path.startswith("/") and route.group_size in (1024, 4096, 16384, 65536)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=5000), st.integers(1, 700), st.integers(4096, 9000))
def test_body_decoder_round_trip(data: bytes, step: int, piece: int) -> None:
    packed = gzip.compress(data)
    dec = BodyDecoder("gzip", len(data), piece=piece)
    out = b"".join(p for i in range(0, len(packed), step) for p in dec.feed(packed[i:i + step]))
    dec.finish()
    assert out == data
    if data:
        short = BodyDecoder("gzip", len(data) - 1)
        with pytest.raises(CodingError):
            for i in range(0, len(packed), step):
                list(short.feed(packed[i:i + step]))
        cut = BodyDecoder("gzip", len(data))
        list(cut.feed(packed[:-1]))
        with pytest.raises(CodingError):
            cut.finish()
    trailing = BodyDecoder("gzip", len(data) + 10)
    with pytest.raises(CodingError):
        list(trailing.feed(packed + b"x"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_body_decoder_fuzzed_bytes_fail_typed(data: bytes) -> None:
    dec = BodyDecoder("gzip", 1000)
    try:
        list(dec.feed(data))
        dec.finish()
    except CodingError:
        return


def test_body_decoder_bounds_a_bomb() -> None:
    bomb = gzip.compress(b"\x00" * 50_000_000)  # 50 MB in ~50 kB
    dec = BodyDecoder("gzip", 1_000_000, piece=65536)
    largest = 0
    with pytest.raises(CodingError, match="more than 1000000"):
        for i in range(0, len(bomb), 4096):
            for piece in dec.feed(bomb[i:i + 4096]):
                largest = max(largest, len(piece))
    assert largest <= 65536 and dec.produced <= 1_000_000 + 65536
    with pytest.raises(CodingError):
        BodyDecoder("br", 10)
    assert content_codings(" mi-sha256-03 , identity,GZIP") == ["mi-sha256-03", "gzip"]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40_000), st.sampled_from([1024, 4096]),
       st.sampled_from([TreeHash.SHA256, TreeHash.BLAKE3]), st.data())
def test_proof_read_from_outboard_equals_make_proof(length: int, g: int, alg: TreeHash,
                                                     data: st.DataObject) -> None:
    doc = random.Random(length).randbytes(length)
    outboard, _ = build_outboard(doc, g, alg)
    raw = push_outboard(outboard)
    if not length:
        with pytest.raises(ValueError):
            proof_from_outboard(lambda o, s: raw[o:o + s], alg, g, 0, 1, 1)
        return
    first = data.draw(st.integers(0, length - 1))
    last = data.draw(st.integers(first, length - 1))
    want = make_proof(outboard, first, last)
    got = proof_from_outboard(lambda o, s: raw[o:o + s], alg, g, length, want.first_group,
                              want.groups)
    assert got == want
    if want.siblings:  # an outboard that reads short is a ValueError, not a short proof
        with pytest.raises(ValueError):
            proof_from_outboard(lambda o, s: b"", alg, g, length, want.first_group, want.groups)


