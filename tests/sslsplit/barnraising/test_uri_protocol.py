"""The ``barnraising://`` URI parser and the join protocol's codecs: round trips, typed errors,
and Hypothesis fuzzing (any bytes in, a typed error or a message out; nothing else)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.uri import DEFAULT_PORT, BarnraisingURI, URIError, check_site, parse_uri

# --- URIs --------------------------------------------------------------------------------


@pytest.mark.parametrize("text, host, port, site", [
    ("barnraising://broker.example.org/news/front", "broker.example.org", DEFAULT_PORT,
     "news/front"),
    ("BarnRaising://Broker.Example.ORG:9000/a", "broker.example.org", 9000, "a"),
    ("barnraising://127.0.0.1:8470/some/site/name", "127.0.0.1", 8470, "some/site/name"),
    ("barnraising://[::1]:1234/x.y_z-1", "::1", 1234, "x.y_z-1"),
    ("barnraising://[2001:DB8::1]/s", "2001:db8::1", DEFAULT_PORT, "s"),
])
def test_parse_valid_uris(text: str, host: str, port: int, site: str) -> None:
    uri = parse_uri(text)
    assert (uri.broker_host, uri.broker_port, uri.site) == (host, port, site)
    assert parse_uri(str(uri)) == uri  # the canonical form parses to the same URI


@pytest.mark.parametrize("text, words", [
    ("http://broker/site", "scheme"),
    ("barnraising:/broker/site", "not a URI"),
    ("barnraising://broker", "names no site"),
    ("barnraising://broker/", "names no site"),
    ("barnraising://broker:0/site", "outside 1-65535"),
    ("barnraising://broker:99999/site", "outside 1-65535"),
    ("barnraising://broker:http/site", "not a number"),
    ("barnraising://user@broker/site", "user information"),
    ("barnraising://broker/site?x=1", "query"),
    ("barnraising://broker/site#top", "fragment"),
    ("barnraising://broker/a//b", "empty segment"),
    ("barnraising://broker/a/../b", "'..' segment"),
    ("barnraising://broker/a b", "letters, digits"),
    ("barnraising://[::1/site", "unterminated"),
    ("barnraising://[nothex]/site", "not an IPv6 address"),
    ("barnraising://999.1.1.1/site", "not an IPv4 address"),
    ("barnraising://bro_ker/site", "not a host name"),
    ("barnraising:///site", "empty"),
    ("barnraising://b/" + "/".join("s" * 9), "segments"),
    ("barnraising://b/" + "s" * 201, "at most 200"),
    ("barnraising://b/" + "s" * 600, "at most 512"),
])
def test_bad_uris_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(URIError, match=None) as info:
        parse_uri(text)
    assert words in str(info.value)


@given(st.text(max_size=300))
@settings(max_examples=500, deadline=None)
def test_uri_parser_fuzz(text: str) -> None:
    try:
        uri = parse_uri(text)
    except URIError:
        return
    assert isinstance(uri, BarnraisingURI) and parse_uri(str(uri)) == uri


_segment = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,10}", fullmatch=True)


@given(st.lists(_segment, min_size=1, max_size=8), st.integers(1, 65535))
@settings(max_examples=200, deadline=None)
def test_uri_round_trip(segments: list[str], port: int) -> None:
    site = "/".join(segments)
    uri = BarnraisingURI("broker.test", port, check_site(site))
    assert parse_uri(str(uri)) == uri


# --- requests ----------------------------------------------------------------------------

REQUESTS: list[p.Request] = [
    p.Join("news/front", 443, None, 1000.0, None),
    p.Join("news/front", 4433, "127.0.0.2", 160.0, 9000),
    p.Join("s", 1, "::1", 1e7, 65535),
    p.Renew("news/front", "0" * 32),
    p.Leave("news/front", "ab" * 16),
    p.Report("news/front", "127.0.0.3", None, "black hole", "secret"),
    p.Report("news/front", "127.0.0.3", 4433, "", "secret"),
    p.Lookup("a/b/c"),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.OP)
def test_request_round_trip(request_: p.Request) -> None:
    path, body = p.encode_request(request_)
    assert path == f"/barnraising/1/{request_.OP}"
    assert p.parse_request("POST", path, body) == request_


def _join_body(**change: object) -> bytes:
    obj = {"site": "news", "port": 443, "host": None, "capacity": 10.0, "cache_port": None}
    obj.update(change)
    return json.dumps({k: v for k, v in obj.items() if v != "DROP"}).encode()


@pytest.mark.parametrize("method, target, body, error, words", [
    ("POST", "/other", b"{}", p.UnknownOperation, "no such resource"),
    ("POST", "/barnraising/2/join", b"{}", p.UnsupportedVersion, "version"),
    ("POST", "/barnraising/1/steal", b"{}", p.UnknownOperation, "unknown operation"),
    ("GET", "/barnraising/1/join", b"", p.MethodNotAllowed, "POST"),
    ("POST", "/barnraising/1/join", b"x" * (p.MAX_BODY + 1), p.BodyTooLarge, "at most"),
    ("POST", "/barnraising/1/join", b"\xff\xfe", p.MalformedMessage, "UTF-8"),
    ("POST", "/barnraising/1/join", b"{", p.MalformedMessage, "not JSON"),
    ("POST", "/barnraising/1/join", b"[1]", p.MalformedMessage, "JSON object"),
    ("POST", "/barnraising/1/join", b"[" * 4000, p.MalformedMessage, "nests too deeply"),
    ("POST", "/barnraising/1/join", _join_body(port="DROP"), p.MalformedMessage, "missing"),
    ("POST", "/barnraising/1/join", _join_body(port=True), p.MalformedMessage, "integer"),
    ("POST", "/barnraising/1/join", _join_body(port=0), p.MalformedMessage, "outside"),
    ("POST", "/barnraising/1/join", _join_body(host="example.org"), p.MalformedMessage,
     "IP address"),
    ("POST", "/barnraising/1/join", _join_body(capacity=0), p.MalformedMessage, "outside"),
    ("POST", "/barnraising/1/join", b'{"site":"n","port":1,"capacity":NaN}', p.MalformedMessage,
     "finite"),
    ("POST", "/barnraising/1/join", _join_body(extra=1), p.MalformedMessage, "unknown field"),
    ("POST", "/barnraising/1/join", _join_body(site="../etc"), p.MalformedMessage, "segment"),
    ("POST", "/barnraising/1/renew", b'{"site":"n","volunteer_id":"XYZ"}', p.MalformedMessage,
     "hex"),
    ("POST", "/barnraising/1/report", b'{"site":"n","host":"1.2.3.4"}', p.MalformedMessage,
     "token"),
])
def test_malformed_requests_get_typed_errors(method: str, target: str, body: bytes,
                                             error: type[p.ProtocolError], words: str) -> None:
    with pytest.raises(error) as info:
        p.parse_request(method, target, body)
    assert words in str(info.value)
    status, wire = p.encode_error(info.value)
    assert status == error.status and status >= 400
    with pytest.raises(error):  # the client side raises the same class
        p.parse_reply("join", status, wire)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                 max_size=6),
    max_leaves=20,
)
_ops = st.sampled_from(["join", "renew", "leave", "report", "lookup"])
_keys = st.sampled_from(["site", "port", "host", "capacity", "cache_port", "volunteer_id",
                         "reason", "token", "x"])


@given(_ops, st.dictionaries(_keys, _json, max_size=6))
@settings(max_examples=600, deadline=None)
def test_request_parser_fuzz_structured(op: str, obj: dict[str, object]) -> None:
    body = json.dumps(obj).encode()
    try:
        request = p.parse_request("POST", p.request_path(op), body)
    except p.ProtocolError:
        return
    assert request.OP == op
    assert p.parse_request("POST", *p.encode_request(request)) == request


@given(st.text(max_size=40), st.text(max_size=60), st.binary(max_size=300))
@settings(max_examples=600, deadline=None)
def test_request_parser_fuzz_bytes(method: str, target: str, body: bytes) -> None:
    try:
        p.parse_request(method, target, body)
    except p.ProtocolError:
        pass


# --- replies -----------------------------------------------------------------------------

SITE = p.SiteInfo("news/front", ("127.0.0.1", 8443), ("127.0.0.1", 8444), ("www.news.test",),
                  {"memory_mb": 64, "encoding": "sha256", "share": True, "ratio": 0.5})
REPLIES: list[tuple[str, p.Reply]] = [
    ("join", p.JoinReply("f" * 32, 30.0, SITE)),
    ("renew", p.RenewReply(30.0, SITE)),
    ("leave", p.LeaveReply(True)),
    ("report", p.ReportReply(2)),
    ("lookup", p.LookupReply(SITE, 3)),
    ("lookup", p.LookupReply(SITE, 2, (("127.0.0.2", 7000),), (("127.0.0.2", 4433),
                                                              ("::1", 4433)))),
]


@pytest.mark.parametrize("op, reply", REPLIES, ids=[op for op, _ in REPLIES])
def test_reply_round_trip(op: str, reply: p.Reply) -> None:
    status, body = p.encode_reply(reply)
    assert status == 200
    assert p.parse_reply(op, status, body) == reply


def test_rate_limited_error_carries_retry_after() -> None:
    status, body = p.encode_error(p.RateLimited("slow down", retry_after=1.25))
    assert status == 429
    with pytest.raises(p.RateLimited) as info:
        p.parse_reply("join", status, body)
    assert info.value.retry_after == 1.25 and info.value.message == "slow down"


@pytest.mark.parametrize("code", [["rate_limited"], {"a": 1}, 7, None, "no-such-code"])
def test_an_error_reply_with_a_strange_code_is_a_protocol_error(code: object) -> None:
    """A hostile broker's error code may be any JSON value: never a TypeError (a list is
    unhashable), always the base :class:`ProtocolError`."""
    body = json.dumps({"protocol": p.VERSION, "error": {"code": code, "message": "x"}}).encode()
    with pytest.raises(p.ProtocolError) as info:
        p.parse_reply("join", 400, body)
    assert type(info.value) is p.ProtocolError


@given(_ops, st.integers(100, 599), st.binary(max_size=300) | _json.map(
    lambda v: json.dumps(v).encode()))
@settings(max_examples=600, deadline=None)
def test_reply_parser_fuzz(op: str, status: int, body: bytes) -> None:
    try:
        reply = p.parse_reply(op, status, body)
    except p.ProtocolError:
        return
    assert status == 200 and isinstance(reply, p.Reply)


def test_one_error_hierarchy_and_every_error_crosses_the_wire_as_itself() -> None:
    """Every Barnraising error is a BarnraisingError; local misuse stays a ValueError; each
    protocol error the broker raises comes back out of the client's parser as the same class."""
    from sslsplit.barnraising.errors import BarnraisingError, ConfigError

    for local in (URIError, ConfigError):
        assert issubclass(local, BarnraisingError) and issubclass(local, ValueError)
    assert not issubclass(p.ProtocolError, ValueError)
    with pytest.raises(BarnraisingError):
        parse_uri("http://not-barnraising/x")
    assert len(p.ERRORS) == 11
    for code, cls in p.ERRORS.items():
        assert issubclass(cls, p.ProtocolError) and issubclass(cls, BarnraisingError)
        status, body = p.encode_error(cls(f"why {code}"))
        with pytest.raises(cls) as caught:
            p.parse_reply("join", status, body)
        assert type(caught.value) is cls and caught.value.message == f"why {code}"


def test_operations_are_an_enum_one_request_class_each() -> None:
    assert list(p.REQUESTS) == list(p.Operation)
    assert all(cls.OP is op for op, cls in p.REQUESTS.items())
    path, body = p.encode_request(p.Renew("a/site", volunteer_id="0" * 32))
    assert p.parse_request("POST", path, body).OP is p.Operation.RENEW
    assert p.request_path(p.Operation.LOOKUP) == p.request_path("lookup") == "/barnraising/1/lookup"
