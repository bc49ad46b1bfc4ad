"""``sine.cache_status``: RFC 9211 ``Cache-Status`` parsed as a Structured Field List, nginx's
``X-Cache-Status``, Squid's ``X-Cache`` and ``Age``; one verdict, never a crash.

The ``Cache-Status`` examples are those of RFC 9211 §3 (June 2022), with the verdict each one
implies under the member order of RFC 9211 §2 (first member nearest the origin, last nearest
the client).  nginx's values are the documented ones of ``$upstream_cache_status``
(ngx_http_upstream_module); Squid's ``X-Cache`` is ``HIT from <host>`` / ``MISS from <host>``
(Squid 5.7, see ``tests/interop/test_sine_squid.py``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sine.cache_status import (
    CacheEntry,
    CacheStatusError,
    CacheVerdict,
    Outcome,
    Token,
    cache_verdict,
    format_cache_status,
    parse_cache_status,
)

HIT, MISS, REVALIDATED = Outcome.HIT, Outcome.MISS, Outcome.REVALIDATED

# --- RFC 9211 §3 ---------------------------------------------------------------------------

RFC_EXAMPLES = [
    # (field lines, verdict, deciding cache)
    (["ExampleCache; hit"], HIT, "ExampleCache"),
    (["ExampleCache; hit; ttl=376"], HIT, "ExampleCache"),
    (["ExampleCache; hit; ttl=-412"], HIT, "ExampleCache"),  # a stale hit is still a hit
    (["ExampleCache; fwd=uri-miss"], MISS, "ExampleCache"),
    (["ExampleCache; fwd=stale; fwd-status=304"], REVALIDATED, "ExampleCache"),
    (["ExampleCache; fwd=uri-miss; collapsed"], MISS, "ExampleCache"),
    (["ExampleCache; fwd=uri-miss; collapsed=?0"], MISS, "ExampleCache"),
    # two layers, both hits: the one nearest the client (the CDN) served it
    (['OriginCache; hit; ttl=1100, "CDN Company Here"; hit; ttl=545'], HIT,
     "CDN Company Here"),
    # three layers on three lines: the browser and the forward proxy missed, the reverse
    # proxy nearest the origin answered from storage -- the origin was not contacted
    (["ReverseProxyCache; hit", "ForwardProxyCache; fwd=uri-miss; collapsed; stored",
      "BrowserCache; fwd=uri-miss"], HIT, "ReverseProxyCache"),
]


@pytest.mark.parametrize("lines,outcome,cache", RFC_EXAMPLES)
def test_rfc9211_examples(lines: list[str], outcome: Outcome, cache: str) -> None:
    verdict = cache_verdict([("Cache-Status", line) for line in lines])
    assert (verdict.outcome, verdict.cache, verdict.header) == (outcome, cache, "Cache-Status")


def test_rfc9211_three_layer_members_and_parameters() -> None:
    entries = parse_cache_status("ReverseProxyCache; hit, ForwardProxyCache; fwd=uri-miss; "
                                 "collapsed; stored, BrowserCache; fwd=uri-miss")
    assert [e.cache for e in entries] == ["ReverseProxyCache", "ForwardProxyCache",
                                          "BrowserCache"]
    fwd = entries[1]
    assert fwd.params == (("fwd", "uri-miss"), ("collapsed", True), ("stored", True))
    assert isinstance(fwd.get("fwd"), Token) and fwd.fwd == "uri-miss" and not fwd.hit
    assert [e.outcome() for e in entries] == [HIT, MISS, MISS]


def test_order_decides_which_cache_answered() -> None:
    """RFC 9211 §2: the last member is nearest the client. A forward proxy that revalidated
    its stale copy *behind* a cache that hit never saw the request: HIT, not REVALIDATED."""
    nearest_hit = "Proxy; fwd=stale; fwd-status=304, Edge; hit"
    assert cache_verdict({"cache-status": nearest_hit}).outcome is HIT
    assert cache_verdict({"cache-status": nearest_hit}).cache == "Edge"
    nearest_revalidated = "Origin; hit, Edge; fwd=stale; fwd-status=304"
    v = cache_verdict({"cache-status": nearest_revalidated})
    assert (v.outcome, v.cache) == (REVALIDATED, "Edge")
    # every cache forwarded: the origin answered; the verdict names the nearest cache
    v = cache_verdict({"cache-status": "Origin; fwd=miss, Edge; fwd=uri-miss"})
    assert (v.outcome, v.cache) == (MISS, "Edge")


def test_silent_members_and_explicit_false_hit() -> None:
    assert cache_verdict({"Cache-Status": "Edge; ttl=30"}).outcome is None
    assert cache_verdict({"Cache-Status": "Edge; hit=?0"}).outcome is MISS
    assert cache_verdict({"Cache-Status": "Origin; hit, Edge; ttl=3"}).cache == "Origin"
    # hit wins over a contradictory fwd (hit is defined as "not forwarded")
    assert cache_verdict({"Cache-Status": "Edge; fwd=miss; hit"}).outcome is HIT


def test_structured_field_items() -> None:
    [e] = parse_cache_status('"a \\"b\\" \\\\"; key="/x?y"; detail=%"caf%c3%a9"; '
                             "n=-12; d=1.5; b=:aGk=:; t=@1659578233; s=?1; p=*tok/x:y")
    assert e.cache == 'a "b" \\'
    assert dict(e.params) == {"key": "/x?y", "detail": "café", "n": -12, "d": 1.5,
                              "b": b"hi", "t": 1659578233, "s": True, "p": "*tok/x:y"}
    assert isinstance(e.get("p"), Token) and not isinstance(e.get("key"), Token)
    assert e.get("missing") is None
    # a repeated parameter: the last one counts (RFC 9651 §4.2.3.2)
    assert parse_cache_status("c; hit=?1; hit=?0")[0].hit is False
    assert parse_cache_status(b"  c; hit ,\td  ") == [CacheEntry("c", (("hit", True),)),
                                                      CacheEntry("d")]
    assert parse_cache_status(" ") == []  # an empty List: no cache said anything


@pytest.mark.parametrize("bad", [
    "c,", ",c", "c,,d", "c d", "c ;hit", "(a b); hit", "1; hit", "?1", "c; Hit", "c; hit=",
    "c; x=1.2345", "c; x=1.", "c; x=1234567890123456", "c; x=-", '"unterminated',
    '"bad \\x escape"', "c; b=:not base64!:", "c; b=:abc", "c; b=:a:", "c; t=@1.5", "c; d=%\"%ZZ\"",
    'c; d=%"%ff"', "c; x=?2", "c;", "é; hit", '"é"', "c; x=\"\x01\"",
])
def test_malformed_lists_raise_a_typed_error(bad: str) -> None:
    with pytest.raises(CacheStatusError):
        parse_cache_status(bad)
    with pytest.raises(ValueError):  # CacheStatusError is a ValueError
        parse_cache_status(bad)


def test_malformed_cache_status_is_ignored_as_a_whole() -> None:
    """RFC 9651: a field that fails to parse is ignored; the next convention decides."""
    headers = {"Cache-Status": "Edge; hit,", "X-Cache": "MISS from squid"}
    v = cache_verdict(headers)
    assert (v.outcome, v.header) == (MISS, "X-Cache")
    assert cache_verdict({"Cache-Status": "(Edge); hit"}).outcome is None


# --- nginx, Squid, Age ------------------------------------------------------------------------


@pytest.mark.parametrize("value,outcome", [
    ("HIT", HIT), ("STALE", HIT), ("UPDATING", HIT), ("REVALIDATED", REVALIDATED),
    ("MISS", MISS), ("EXPIRED", MISS), ("BYPASS", MISS), ("hit", HIT), ("MISS, HIT", HIT),
    ("", None), ("-", None), ("SOMETIMES", None),
])
def test_nginx_upstream_cache_status(value: str, outcome: Outcome | None) -> None:
    v = cache_verdict([(b"X-Cache-Status", value.encode())])
    assert v.outcome is outcome
    assert v.header == ("X-Cache-Status" if outcome else "")


@pytest.mark.parametrize("value,outcome", [
    ("HIT from squid.example", HIT), ("MISS from squid.example", MISS),
    ("MISS from inner, HIT from outer", HIT), ("HIT from inner, MISS from outer", MISS),
    ("Hit from cloudfront", HIT), ("RefreshHit from cloudfront", REVALIDATED),
    ("TCP_MEM_HIT", HIT), ("", None), ("NONE from squid", None),
])
def test_squid_x_cache(value: str, outcome: Outcome | None) -> None:
    assert cache_verdict({"X-Cache": value}).outcome is outcome


@pytest.mark.parametrize("value,outcome", [
    ("1", HIT), ("86400", HIT), (" 3 ", HIT), ("0", None), ("-1", None), ("1.5", None),
    ("soon", None), ("", None), ("٣", None), ("2, 2", None),
])
def test_age(value: str, outcome: Outcome | None) -> None:
    assert cache_verdict({"age": value}).outcome is outcome


def test_precedence_and_display() -> None:
    everything = [("Age", "5"), ("X-Cache", "MISS from squid"), ("X-Cache-Status", "EXPIRED"),
                  ("Cache-Status", "nginx; hit")]
    assert str(cache_verdict(everything)) == "HIT (Cache-Status: nginx; hit)"
    assert str(cache_verdict(everything[:3])) == "MISS (X-Cache-Status: EXPIRED)"
    assert str(cache_verdict(everything[:2])) == "MISS (X-Cache: MISS from squid)"
    assert str(cache_verdict(everything[:1])) == "HIT (Age: 5)"
    assert str(cache_verdict({})) == "-" and cache_verdict({}) == CacheVerdict()
    long = cache_verdict({"X-Cache": "HIT from " + "h" * 200})
    assert len(str(long)) < 120 and str(long).endswith("...)")


# --- serialisation and fuzzing ----------------------------------------------------------------

_token = st.from_regex(r"[A-Za-z*][A-Za-z0-9!#$%&'*+.^_`|~:/-]{0,12}", fullmatch=True)
_string = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)
_key = st.from_regex(r"[a-z*][a-z0-9_.*-]{0,8}", fullmatch=True)
_item = st.one_of(
    st.booleans(), st.integers(-(10**15) + 1, 10**15 - 1), _token.map(Token), _string,
    st.binary(max_size=16),
    st.integers(-(10**12) + 1, 10**12 - 1).flatmap(
        lambda whole: st.integers(0, 999).map(lambda milli: whole + milli / 1000)),
)
_entry = st.builds(CacheEntry, st.one_of(_token, _string),
                   st.lists(st.tuples(_key, _item), max_size=4).map(tuple))


@given(st.lists(_entry, min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_format_then_parse_round_trips(entries: list[CacheEntry]) -> None:
    back = parse_cache_status(format_cache_status(entries))
    assert [e.cache for e in back] == [e.cache for e in entries]
    for got, sent in zip(back, entries, strict=True):
        assert [k for k, _ in got.params] == [k for k, _ in sent.params]
        for (_, a), (_, b) in zip(got.params, sent.params, strict=True):
            assert type(a) is type(b)
            assert a == pytest.approx(b, abs=1e-9) if isinstance(b, float) else a == b


@given(st.lists(_entry, max_size=3), _token)
@settings(max_examples=200, deadline=None)
def test_a_nearest_hit_always_decides(upstream: list[CacheEntry], name: str) -> None:
    """Whatever the caches nearer the origin said, a hit appended by the cache nearest the
    client is the verdict, and that cache is named."""
    value = format_cache_status([*upstream, CacheEntry(name, (("hit", True),))])
    v = cache_verdict({"Cache-Status": value})
    assert (v.outcome, v.cache) == (HIT, name)


_garbage = st.one_of(
    st.text(max_size=60),
    st.text(st.sampled_from(' \t,;=?:@%"()\\*-.0123456789abcHITMISfwd'), max_size=60),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


@given(_garbage)
@settings(max_examples=1000, deadline=None)
def test_parse_never_crashes(text: str) -> None:
    try:
        entries = parse_cache_status(text)
    except CacheStatusError:
        return
    assert all(isinstance(e, CacheEntry) and isinstance(e.cache, str) for e in entries)


@given(st.dictionaries(st.sampled_from(["Cache-Status", "x-cache-status", "X-Cache", "age",
                                        "Other"]), _garbage, max_size=5))
@settings(max_examples=1000, deadline=None)
def test_verdict_never_crashes(headers: dict[str, str]) -> None:
    v = cache_verdict(headers)
    assert v.outcome is None or v.header
    assert isinstance(str(v), str)


def test_format_rejects_what_is_not_a_structured_field() -> None:
    with pytest.raises(CacheStatusError):
        format_cache_status([CacheEntry("c", (("Bad Key", True),))])
    with pytest.raises(CacheStatusError):
        format_cache_status([CacheEntry("c", (("k", "tab\there"),))])
    with pytest.raises(CacheStatusError):
        format_cache_status([CacheEntry("c", (("k", 10**15),))])
    assert format_cache_status([CacheEntry("two words", (("ttl", 5),))]) == '"two words";ttl=5'
